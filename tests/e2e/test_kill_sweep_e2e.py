"""The kill sweep (issue #26; L-2, L-7, B-13): `flower run flow.py:wf`, a three-step durable workflow on
the real CLI and the default SQLite, is SIGKILLed (its whole process group) at 26 points chosen by events,
and after each kill the same command runs again.

The points, in four chains (each chain is one run, killed at its points in the order the run reaches them;
each chain is its own test, so xdist spreads them): a request's arrival at the fake and 30, 60 or 100 ms
after it (in the first 100 ms of each step, before and after a reply, the handoff round of step two and the
first request of its second generation), a tool command while it runs, and the workflow's own code right
after a step's checkpoint (its gate), inside its settle (reduce), before a step (when) and while a step's
prompt is built. For every point:

- no request of a step whose checkpoint was recorded before the kill reaches the fake again;
- no tool command starts again once the model has seen its result (a continued step resumes its session
  instead of redoing its work; a call the kill interrupted is called again);
- every entry the killed process's CLI wrote to a transcript (its own folder, or the temp folder of a
  store-backed resume) is in the store after the re-runs;
- the run finishes, with the outputs of an uninterrupted run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.flowproc import outputs, runs_json
from tests.support.killsweep import Chain, Code, Point, Req

pytestmark = [pytest.mark.e2e]

CHAINS: dict[str, list[Point]] = {
    "a": [Req("one", "g1n0", 0), Code("one-g1-2"), Req("one", "next", 60), Req("one", "next", 0),
          Code("reduce-one"), Req("two", "handoff", 0), Req("three", "g1n2", 0)],
    "b": [Req("one", "g1n0", 30), Req("one", "next", 30), Code("gate-one"), Code("when-two"),
          Req("two", "g2n0", 0), Req("three", "g1n0", 30)],
    "c": [Code("one-g1-1"), Req("two", "g1n0", 30), Req("two", "handoff", 40), Req("two", "g2n0", 30),
          Code("gate-two"), Req("three", "g1n1", 0)],
    "d": [Req("one", "g1n0", 100), Req("two", "g1n0", 100), Req("two", "g2n0", 60), Code("two-g2-2"),
          Code("prompt-three"), Req("three", "g1n0", 0), Code("gate-three")],
}


def test_the_sweep_has_26_distinct_points() -> None:
    names = [point.name for chain in CHAINS.values() for point in chain]
    assert len(names) == len(set(names)) == 26


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_killed_at_every_point_the_same_command_continues(tmp_path: Path, chain: str) -> None:
    sweep = Chain(tmp_path, CHAINS[chain])
    code, _, err = sweep.run()
    assert code == 0, err
    assert outputs(sweep.runs) == {"one": "OUT-one", "two": "OUT-two", "three": "OUT-three"}
    (row,) = runs_json(sweep.env(), sweep.runs)
    assert (row["state"], row["done"], row["total"]) == ("finished", 3, 3)

    stored = sweep.stored()
    problems = []
    for kill in sweep.kills:
        again = sorted({step for index, (step, _) in sweep.tags.items()
                        if index >= kill.since and step in kill.finished})
        if again:
            problems.append(f"{kill.point.name}: finished step(s) {again} asked the model again")
        lost = kill.acknowledged - stored
        if lost:
            problems.append(f"{kill.point.name}: {len(lost)} transcript entries missing from the store")
    if sweep.redone():
        problems.append(f"tool commands run again after their result was seen: {sweep.redone()}")
    assert not problems, "\n".join(problems)
