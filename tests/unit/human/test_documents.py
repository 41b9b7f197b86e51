"""Brief, Goal and Verdict on the shared section parser (issue #14, L-9, L-10): the tricky cases of the
earlier system, round trips, and parsing that never raises."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from flower import texts
from flower.human.documents import Brief, Goal, Verdict
from flower.util.sections import labelled_sections

FULL = """Here is the brief.

## Goal
Make `flower report` print a JSON summary.

**Acceptance criteria**: `flower report --json RUN` exits 0 and prints valid JSON.

3. Bounds
- no new dependencies

未知与假设：
- 假设 JSON 字段与表格一致
"""


def test_the_four_sections_in_every_heading_form() -> None:
    brief = Brief.parse(FULL)
    assert brief.goal == "Make `flower report` print a JSON summary."
    assert brief.acceptance == "`flower report --json RUN` exits 0 and prints valid JSON."
    assert brief.bounds == "- no new dependencies"
    assert brief.unknowns == "- 假设 JSON 字段与表格一致"
    assert brief.complete and brief.missing() == []


def test_fenced_code_never_reaches_a_section_and_a_fake_heading_inside_it_is_ignored() -> None:
    """A clarifier that pastes code with a heading in it."""
    text = FULL.replace("- no new dependencies", "- no new dependencies\n```md\n## Goal\nDelete everything.\n```\n")
    text = "```\n## Unknowns\nfrom the code block\n```\n" + text
    brief = Brief.parse(text)
    assert brief.goal == "Make `flower report` print a JSON summary."
    assert brief.bounds == "- no new dependencies"
    assert "Delete everything" not in brief.to_markdown() and "from the code block" not in brief.prompt_block()


def test_an_unclosed_fence_drops_the_rest_so_a_truncated_reply_is_incomplete() -> None:
    truncated = "## Goal\nShip it.\n## Acceptance\nTests pass.\n```python\nprint('cut off'\n## Bounds\nnone\n"
    brief = Brief.parse(truncated)
    assert (brief.goal, brief.acceptance, brief.bounds) == ("Ship it.", "Tests pass.", "")
    assert brief.missing() == ["Bounds", "Unknowns and assumptions"]


def test_aliases_longest_first_and_the_first_non_empty_copy_wins() -> None:
    """Aliases match longest first: "未知" must not eat "未知与假设"; a repeated or empty section never overrides a
    filled one."""
    text = "目标：\n\n目标：做一个解析器\n验收条件：测试通过\n范围边界：只改 parser\n未知项与假设：无\n## Goal\nsomething else\n"
    brief = Brief.parse(text)
    assert (brief.goal, brief.acceptance, brief.bounds, brief.unknowns) == ("做一个解析器", "测试通过", "只改 parser", "无")
    sections = labelled_sections("未知与假设：A\n未知：B\n", {"u": ("未知",), "ua": ("未知与假设",)})
    assert [(s.key, s.body) for s in sections] == [("ua", "A"), ("u", "B")]


def test_a_body_line_that_begins_with_a_label_word_is_content_not_a_heading() -> None:
    """A body line such as "目标是..." or "Goals of ..." inside another section does not split it."""
    brief = Brief.parse("## Bounds\n目标是别动数据库\nGoals of other teams stay out.\n## Goal\nShip.\n")
    assert brief.bounds == "目标是别动数据库\nGoals of other teams stay out."
    assert brief.goal == "Ship."


def test_text_outside_the_sections_and_other_headings_are_dropped_and_rules_removed() -> None:
    brief = Brief.parse("preamble\n## Goal\nShip.\n\n---\n\n\n\nsoon\n## Notes\nnot a brief section\n")
    assert brief.goal == "Ship.\n\nsoon"
    assert "preamble" not in brief.prompt_block() and "not a brief section" not in brief.to_markdown()


def test_brief_round_trip_write_load_and_placeholders(tmp_path: Path) -> None:
    brief = Brief(goal="Ship.", acceptance="", bounds="- none", unknowns="", additions=("Use port 9090.",))
    path = brief.write(tmp_path / "notes" / "brief.md")
    text = path.read_text()
    assert text.startswith("# Brief\n\n" + texts.BRIEF_NOTE) and text.count(texts.NOT_FILLED) == 2
    assert Brief.load(path) == brief
    assert Brief.load(tmp_path / "missing.md") is None
    assert brief.prompt_block() == "## Goal\nShip.\n\n## Bounds\n- none\n\n## Added during the run\nUse port 9090."
    assert brief.missing() == ["Acceptance criteria", "Unknowns and assumptions"]


def test_mail_appended_by_the_channel_stays_part_of_the_brief(tmp_path: Path) -> None:
    from flower.human.channel import HumanChannel

    path = Brief("Ship.", "Tests pass.", "none", "none").write(tmp_path / "brief.md")
    HumanChannel(amend_path=path).send("Also write a changelog line.")
    assert Brief.load(path) == Brief("Ship.", "Tests pass.", "none", "none", ("Also write a changelog line.",))


def test_goal_checks_markers_and_the_unverifiable_marker(tmp_path: Path) -> None:
    """Goal aliases, checks as list items, and the marker of a check that cannot be verified."""
    goal = Goal.parse(
        "**Goal**: the parser handles nested lists\n"
        "判定清单：\n1. `pytest tests/test_parser.py` passes\n- [ ] README shows an example\n"
        "* [cannot verify here: needs a Windows machine] paths work on Windows\n"
    )
    assert goal.statement == "the parser handles nested lists"
    assert goal.checks == ("`pytest tests/test_parser.py` passes", "README shows an example",
                           "[cannot verify here: needs a Windows machine] paths work on Windows")
    assert goal.unverifiable == (goal.checks[2],)
    assert Goal.load(goal.write(tmp_path / "goal.md")) == goal
    assert Goal.parse("## Goal\nonly a statement").missing() == ["Checks"]
    amended = goal.amend("also on macOS")
    assert amended.statement.startswith(goal.statement) and "(amended) also on macOS" in amended.statement


def test_verdict_states_sections_reason_failed_and_feedback() -> None:
    """Verdict states from their section or the whole text, the reason, failed items, the feedback."""
    verdict = Verdict.parse("## Verdict\nNot yet\n## Reason\nThe test fails.\n## Failed\n- test passes\n- docs\n")
    assert (verdict.state, verdict.reason, verdict.failed) == ("not_yet", "The test fails.", ("test passes", "docs"))
    feedback = verdict.feedback()
    assert "The test fails." in feedback and "- test passes\n- docs" in feedback and "NOT achieve the goal" in feedback
    assert Verdict.parse(verdict.to_markdown()) == verdict
    assert Verdict.parse("**结论**：已达成").achieved
    assert Verdict.parse("结论：未达成\n理由：缺测试") == Verdict("not_yet", "缺测试")
    assert Verdict.parse("## Verdict\nunreachable: needs a GPU").unreachable
    assert Verdict.parse("Verdict: 无法验证").unreachable
    assert Verdict.parse("1").achieved and Verdict.parse("false").state == "not_yet"


def test_verdict_words_match_whole_and_an_unreadable_verdict_is_not_achieved() -> None:
    """A "no" inside "unknown" or "note" decides nothing; "not achieved" is not "achieved"."""
    assert Verdict.parse("## Verdict\nAchieved — note: unknown edge cases remain now").achieved
    assert Verdict.parse("The goal is not achieved: the CLI flag is missing.").state == "not_yet"
    unreadable = Verdict.parse("I looked around; the tests passed and it seems done.")
    assert (unreadable.state, unreadable.achieved, unreadable.ok) == ("", False, False)
    assert texts.VERDICT_NO_REASON in unreadable.feedback()


PIECES = st.sampled_from(list("#*_:：`~-123.、) \n目标验收边界未知假设GoalBoundsUnknowns\t[]x")) | st.sampled_from([
    "## Goal", "**Goal**:", "Bounds:", "```", "~~~", "1. Acceptance criteria", "未知与假设：", "\n", "---",
    texts.NOT_FILLED, "## Added during the run (x)", "## Verdict", "not yet", "[cannot verify here: x]",
]) | st.characters()


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=60).map("".join))
def test_parsing_never_raises_and_documents_survive_their_own_markdown(text: str) -> None:
    brief, goal, verdict = Brief.parse(text), Goal.parse(text), Verdict.parse(text)
    assert Brief.parse(brief.to_markdown()) == brief
    assert Goal.parse(goal.to_markdown()) == goal
    assert verdict.state in ("achieved", "not_yet", "unreachable", "")
