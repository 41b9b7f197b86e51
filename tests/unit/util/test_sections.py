"""The shared markdown section parser (issue #17 item 7): fenced headings are content, nothing is dropped."""

from __future__ import annotations

from flower.util.sections import headings, parse_sections, render_sections, section_key

DOC = """Intro line.

## Doing
Porting the parser.

```markdown
## Next
this fenced line is an example, not a heading
```

~~~~
## Decided
~~~
still fenced (a shorter fence does not close a longer one)
~~~~

## Next:
1. Finish the lexer.
### Details
kept under Next when only known sections count
"""


def test_fenced_heading_lines_are_content() -> None:
    doc = parse_sections(DOC)
    assert list(doc) == ["doing", "next", "details"]
    assert "this fenced line is an example" in doc["doing"]
    assert "## Decided" in doc["doing"] and "still fenced" in doc["doing"]
    assert doc["next"] == "1. Finish the lexer."
    assert doc.preamble == "Intro line."


def test_known_sections_only_and_lookup_by_any_spelling() -> None:
    doc = parse_sections(DOC, known=("Doing", "next"))
    assert list(doc) == ["doing", "next"]
    assert "### Details" in doc["next"] and "kept under Next" in doc["next"]
    assert "NEXT:" in doc and doc.title("next") == "Next:" and doc.level("Next") == 2


def test_level_filter() -> None:
    doc = parse_sections("# Title\n## A\na\n### B\nb\n", level=2)
    assert list(doc) == ["a"] and doc["a"] == "a\n### B\nb" and doc.preamble == "# Title"


def test_unclosed_fence_runs_to_the_end() -> None:
    assert [h.title for h in headings("## One\n```\n## Two\n")] == ["One"]


def test_inline_backticks_are_not_a_fence() -> None:
    assert [h.title for h in headings("```not a fence```\n## Real\n")] == ["Real"]


def test_repeated_heading_keeps_both_bodies_and_render_round_trips() -> None:
    doc = parse_sections("pre\n\n## A\none\n## B\nbee\n## a\ntwo\n")
    assert doc["a"] == "one\n\ntwo"
    again = parse_sections(render_sections(doc))
    assert dict(again) == dict(doc) and again.preamble == "pre"


def test_with_section_replaces_or_appends() -> None:
    doc = parse_sections("## A\none\n").with_section("A", "new").with_section("Open questions", "q?")
    assert render_sections(doc) == "## A\n\nnew\n\n## Open questions\n\nq?\n"


def test_section_key() -> None:
    assert section_key("  Dead   Ends: ") == "dead ends"
    assert section_key("Next ##") == "next"
    assert [h.level for h in headings("#NoSpace\n####### seven\n#\n")] == [1]
