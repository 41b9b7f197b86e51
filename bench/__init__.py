"""flower's benchmark suite: every claim about saving context or being cheap, as a number anyone can re-run.

`python -m bench` runs every module here that has `run(tiny: bool = False) -> list[dict]` and prints one
table; see bench/__main__.py and docs/benchmarks.md.
"""
