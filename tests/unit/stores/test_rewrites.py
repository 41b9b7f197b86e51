"""Layer four rewrites on synthetic transcripts in the exact CLI shapes (S-19, S-20, S-21, B-6, B-7).

Every test asserts on the resulting entries (content, chain, order), never on counts alone.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from flower import texts
from flower.errors import ConfigError
from flower.stores.rewrite import (
    EphemeralPolicy,
    TrimPolicy,
    drop_api_errors,
    expire_ephemeral,
    heal_orphans,
    neutralise_interrupts,
    prune_denials,
    rewrite,
    trim_results,
)
from flower.stores.validate import validate
from tests.support.transcripts import (
    REJECTED_TEXT,
    Transcript,
    bash,
    block_of,
    by_uuid,
    chain_ok,
    image_block,
    text,
    thinking,
    tool_use,
)


def glance(command: str) -> bool:
    """Stand-in for glance.is_ephemeral, so these tests do not depend on the shell parser."""
    return command.split()[:2] in (["git", "status"], ["git", "diff"]) or command.split()[:1] == ["ls"]


EPH = EphemeralPolicy(keep_recent=6, predicate=glance, reads=False)  # Bash glances; Read expiry has its own tests


def rewritten(entries: list[dict[str, Any]], **kw: Any) -> tuple[list[dict[str, Any]], Any]:
    """rewrite(), checking the invariants every rewrite must keep: input untouched, idempotent."""
    before = copy.deepcopy(entries)
    kw.setdefault("ephemeral", EPH)
    out, report = rewrite(entries, **kw)
    assert entries == before, "the input was mutated"
    again, _ = rewrite(out, **kw)
    assert again == out, "a second rewrite changed the result"
    return out, report


def glance_out(n: int) -> str:
    """A glance body well longer than any expiry note (short bodies never expire)."""
    return f"out-{n}\n" + "\tmodified:   src/module.py\n" * 12


def glances(t: Transcript, count: int, command: str = "git status") -> list[str]:
    """`count` rounds, each one Bash call of `command` and its result `glance_out(n)`."""
    calls = []
    for n in range(count):
        call = f"toolu_g{len(t.entries):04d}"
        t.assistant(bash(call, command))
        t.result(call, glance_out(n))
        calls.append(call)
    return calls


def result_body(entries: list[dict[str, Any]], call: str) -> Any:
    for entry in entries:
        for block in (entry.get("message") or {}).get("content") or []:
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_result"
                and block.get("tool_use_id") == call
            ):
                return block["content"]
    raise AssertionError(f"no result for {call}")


def calls_in(entries: list[dict[str, Any]]) -> list[str]:
    return [
        b["id"]
        for e in entries
        if e.get("type") == "assistant"
        for b in e["message"]["content"]
        if b.get("type") == "tool_use"
    ]


# --- 1. ephemeral expiry -------------------------------------------------------------------------------


def test_expiry_keeps_newest_six_and_names_command_and_age() -> None:
    """S-19.1: all but the newest 6 glance results expire; a run of expired calls goes as pairs (S-20), the
    last of the run staying with one line: its command, its age in rounds and what went before it."""
    t = Transcript()
    t.prompt("check")
    calls = glances(t, 9)
    t.assistant(text("done"))
    out, report = rewritten(t.entries)
    # calls 0 and 1 go with their results; call 2, made in round 3 of 10 real assistant messages, stays
    assert calls_in(out) == calls[2:] and calls[0] not in json.dumps(out) and calls[1] not in json.dumps(out)
    assert result_body(out, calls[2]) == texts.EXPIRED_GROUP.format(
        command="git status", age="7 rounds", removed="2 earlier expired calls", commands="git status; git status")
    assert [result_body(out, c) for c in calls[3:]] == [glance_out(n) for n in range(3, 9)]
    gone = {e["uuid"] for e in t.entries if any(c in json.dumps(e) for c in calls[:2])}
    assert len(gone) == 4 and [e["uuid"] for e in out] == [e["uuid"] for e in t.entries if e["uuid"] not in gone]
    assert (report.expired, [d.tool_use_id for d in report.details]) == (3, calls[:3])
    assert validate(out) == [] and chain_ok(out)


def test_a_lone_expired_call_keeps_its_call_and_a_one_line_note() -> None:
    """A run of one expired call (a kept result on each side) is not worth a group: the call stays with the
    one-line note; nor is a call whose message holds text, which would be left alone."""
    t = Transcript()
    t.prompt("check")
    first = glances(t, 1)
    t.assistant(tool_use("toolu_edit", "Edit", file_path="/a.py", old_string="x", new_string="y"))
    t.result("toolu_edit", "edited")
    t.assistant(text("Looking again."), bash("toolu_said", "git status"))
    t.result("toolu_said", glance_out(7))
    t.assistant(bash("toolu_quiet", "git status"))
    t.result("toolu_quiet", glance_out(8))
    glances(t, 6)
    t.assistant(text("done"))
    out, report = rewritten(t.entries)
    assert result_body(out, first[0]).startswith("[flower: expired output of `git status`, run ")
    # toolu_said's message has text: it keeps its call and note, and ends no pair removal of its neighbour
    assert "toolu_said" in calls_in(out) and result_body(out, "toolu_said").startswith("[flower: expired output")
    assert result_body(out, "toolu_quiet").startswith("[flower: expired output")
    assert report.expired == 3 and calls_in(out) == calls_in(t.entries) and validate(out) == []


def test_expiry_counts_a_split_message_once_and_skips_synthetic_messages() -> None:
    """Rounds are API messages: thinking+text+tool_use entries of one message.id are one round;
    the CLI's <synthetic> messages are not rounds."""
    t = Transcript()
    t.prompt("go")
    t.assistant(bash("toolu_old", "git status"))
    t.result("toolu_old", glance_out(0))
    t.assistant(
        thinking(), text("looking"), tool_use("toolu_r", "Read", file_path="/a")
    )  # one round, 3 entries
    t.result("toolu_r", "file text")
    t.no_response()
    t.prompt("again")
    t.assistant(text("ok"))
    out, _ = rewritten(t.entries, ephemeral=EphemeralPolicy(keep_recent=0, predicate=glance))
    assert result_body(out, "toolu_old") == texts.EXPIRED_RESULT.format(command="git status", age="2 rounds")
    assert result_body(out, "toolu_r") == "file text"  # Read results never expire


def test_expiry_leaves_other_commands_errors_denials_and_media_alone() -> None:
    t = Transcript()
    t.prompt("go")
    t.assistant(bash("toolu_build", "make build"))
    t.result("toolu_build", "built")
    t.assistant(bash("toolu_fail", "git status"))
    t.result("toolu_fail", "fatal: not a git repository", is_error=True)
    t.assistant(bash("toolu_deny", "git status"))
    t.denial("toolu_deny")
    t.assistant(bash("toolu_img", "ls"))
    t.result("toolu_img", [image_block()])
    t.assistant(text("end"))
    out, report = rewritten(t.entries, ephemeral=EphemeralPolicy(keep_recent=0, predicate=glance))
    assert report.expired == 0
    assert result_body(out, "toolu_build") == "built"
    assert result_body(out, "toolu_fail") == "fatal: not a git repository"
    assert result_body(out, "toolu_img") == [image_block()]


def test_expiry_asks_the_predicate_once_per_distinct_command() -> None:
    asked: list[str] = []

    def counting(command: str) -> bool:
        asked.append(command)
        return True

    t = Transcript()
    glances(t, 5, "git status")
    glances(t, 1, "ls -la")
    expire_ephemeral(t.entries, EphemeralPolicy(keep_recent=1, predicate=counting))
    assert sorted(asked) == ["git status", "ls -la"]


def test_expiry_shortens_long_and_multiline_commands() -> None:
    t = Transcript()
    command = "git status --porcelain " + "x" * 100 + "\ngit diff"
    first = glances(t, 2, command)[0]
    out, _ = expire_ephemeral(t.entries, EphemeralPolicy(keep_recent=1, predicate=lambda c: True))
    body = result_body(out, first)
    assert (
        "`git status --porcelain xxx" in body
        and "git diff" not in body
        and "\N{HORIZONTAL ELLIPSIS}`" in body
    )
    assert "1 round ago" in body


def test_expiry_never_makes_the_history_longer() -> None:
    """S-19.1: a glance body no longer than its note keeps its body (a tiny `ls`); a long one expires.
    Short results still count among the newest `keep_recent`."""
    t = Transcript()
    t.prompt("look")
    t.assistant(bash("toolu_tiny", "ls"))
    t.result("toolu_tiny", "a.txt\nb.txt")
    t.assistant(tool_use("toolu_edit", "Edit", file_path="/a.py", old_string="x", new_string="y"))
    t.result("toolu_edit", "edited")  # a kept result between: each expired call is alone, none goes as a pair
    t.assistant(bash("toolu_long", "ls"))
    listing = "\n".join(f"file_{n:03d}.py" for n in range(40))
    t.result("toolu_long", listing)
    t.assistant(bash("toolu_new", "ls"))
    t.result("toolu_new", "c.txt")
    t.assistant(text("done"))
    out, report = rewritten(t.entries, ephemeral=EphemeralPolicy(keep_recent=1, predicate=glance))
    note = texts.EXPIRED_RESULT.format(command="ls", age="2 rounds")
    assert result_body(out, "toolu_tiny") == "a.txt\nb.txt" and "toolu_tiny" in calls_in(out)
    assert result_body(out, "toolu_long") == note and len(note) < len(listing)
    assert result_body(out, "toolu_new") == "c.txt"
    saved = [(d.tool_use_id, d.chars_saved) for d in report.details]
    assert saved == [("toolu_long", len(listing) - len(note))]


def test_expiry_decision_survives_a_pass_that_counts_fewer_rounds() -> None:
    """Idempotence: denial pruning removes whole messages, so a second pass sees a smaller age (10 -> 9
    rounds: a note one char shorter). A body kept on the first pass must not expire on the second."""
    t = Transcript()
    t.prompt("go")
    t.assistant(bash("toolu_edge", "ls"))
    one_digit = texts.EXPIRED_RESULT.format(command="ls", age="9 rounds")
    t.result("toolu_edge", "x" * (len(one_digit) + 1))
    for n in range(2):
        t.assistant(bash(f"toolu_d{n}", "rm -rf /"))
        t.denial(f"toolu_d{n}")
    for n in range(7):
        t.assistant(text(f"step {n}"))
    t.assistant(bash("toolu_last", "ls"))
    t.result("toolu_last", glance_out(0))
    once, report = rewritten(t.entries, ephemeral=EphemeralPolicy(keep_recent=1, predicate=glance))
    assert report.denials_dropped == 1 and report.expired == 0
    assert result_body(once, "toolu_edge") == "x" * (len(one_digit) + 1)


def test_expiry_default_predicate_is_glance() -> None:
    """EphemeralPolicy(predicate=None) means flower.walls.glance.judge.is_ephemeral (S-8: one predicate)."""
    glance_module = pytest.importorskip("flower.walls.glance.judge", reason="flower.walls.glance.judge not written yet")
    assert EphemeralPolicy().resolved_predicate() is glance_module.is_ephemeral


# --- 2. trim -------------------------------------------------------------------------------------------


def test_read_results_expire_like_glances() -> None:
    """S-19.1 with reads: a text Read is a snapshot of a file, so all but the newest `keep_recent` glances
    (Bash glances and Reads counted together) become one line naming `Read <path>`; a failed Read, an image
    and a short body stay; `reads=False` leaves every Read as stored."""
    t = Transcript()
    t.prompt("go")
    for n in range(4):
        t.assistant(tool_use(f"toolu_r{n}", "Read", file_path=f"/notes/n{n}.md", **({"offset": 10} if n == 1 else {})))
        t.result(f"toolu_r{n}", f"1\tnote {n} " + "z" * 600)
    t.assistant(tool_use("toolu_missing", "Read", file_path="/gone"))
    t.result("toolu_missing", "File does not exist. " + "q" * 400, is_error=True)
    t.assistant(tool_use("toolu_img", "Read", file_path="/a.png"))
    t.result("toolu_img", [image_block()])
    t.assistant(tool_use("toolu_tiny", "Read", file_path="/t"))
    t.result("toolu_tiny", "1\tok")
    glances(t, 2)
    policy = EphemeralPolicy(keep_recent=2, predicate=glance)
    out, report = rewritten(t.entries, ephemeral=policy)
    # r0..r3 are one run (the failed Read between does not end it): r0..r2 go as pairs, r3 stays with one line
    assert [c for c in calls_in(out) if c.startswith("toolu_r")] == ["toolu_r3"]
    assert result_body(out, "toolu_r3") == texts.EXPIRED_GROUP.format(
        command="Read /notes/n3.md", age="5 rounds", removed="3 earlier expired calls",
        commands="Read /notes/n0.md; Read /notes/n1.md (offset=10); Read /notes/n2.md")
    for kept in ("toolu_missing", "toolu_img", "toolu_tiny"):
        assert result_body(out, kept) == result_body(t.entries, kept)
    assert report.expired == 4 and validate(out) == [] and chain_ok(out)
    unchanged, none = rewritten(t.entries, ephemeral=EphemeralPolicy(keep_recent=2, predicate=glance, reads=False))
    assert none.expired == 0 and result_body(unchanged, "toolu_r0") == result_body(t.entries, "toolu_r0")


def big(n: int, size: int = 3000) -> str:
    return f"[{n}]" + "y" * size


def test_trim_spills_all_but_newest_and_points_there(tmp_path: Path) -> None:
    """S-19.2: bodies >= min_chars except the newest keep_recent go to <ws>/.flower/spill/<hash>.txt."""
    t = Transcript()
    for n in range(3):
        t.assistant(tool_use(f"toolu_r{n}", "Read", file_path=f"/f{n}"))
        t.result(f"toolu_r{n}", big(n))
    t.assistant(text("end"))
    out, report = rewritten(t.entries, workspace=tmp_path, trim=TrimPolicy(keep_recent=1, min_chars=2000))
    spill = tmp_path / ".flower" / "spill"
    for n in (0, 1):
        name = hashlib.sha256(big(n).encode()).hexdigest()[:16] + ".txt"
        assert (spill / name).read_text() == big(n)
        assert result_body(out, f"toolu_r{n}") == texts.TRIMMED_RESULT.format(
            chars="3,003", path=spill / name
        )
    assert result_body(out, "toolu_r2") == big(2)
    assert report.trimmed == 2 and report.chars_saved == 2 * (3003 - len(result_body(out, "toolu_r0")))
    assert [p.name for p in spill.iterdir() if p.name.startswith(".")] == []  # no temp files left behind


def test_trim_dedups_by_content_and_never_touches_media_summaries_or_meta(tmp_path: Path) -> None:
    t = Transcript()
    t.meta("m" * 5000)
    for n in range(2):
        t.assistant(tool_use(f"toolu_same{n}", "Read", file_path="/same"))
        t.result(f"toolu_same{n}", "same" * 1000)
    t.assistant(tool_use("toolu_img", "Read", file_path="/a.png"))
    t.result("toolu_img", [image_block(), text("z" * 5000)])
    t.compact("s" * 5000)
    t.assistant(text("after"))
    out, report = rewritten(t.entries, workspace=tmp_path, trim=TrimPolicy(keep_recent=0, min_chars=100))
    assert len(list((tmp_path / ".flower" / "spill").iterdir())) == 1
    assert result_body(out, "toolu_same0") == result_body(out, "toolu_same1") != "same" * 1000
    assert result_body(out, "toolu_img") == [image_block(), text("z" * 5000)]
    assert out[0] is t.entries[0] and out[-3:] == t.entries[-3:]  # meta, boundary, summary: the same objects
    assert report.trimmed == 2


def test_trim_is_off_by_default_and_needs_a_workspace(tmp_path: Path) -> None:
    t = Transcript()
    t.assistant(tool_use("toolu_r", "Read", file_path="/f"))
    t.result("toolu_r", big(0, 50_000))
    out, _ = rewritten(t.entries)
    assert result_body(out, "toolu_r") == big(0, 50_000)
    with pytest.raises(ConfigError, match="workspace"):
        rewrite(t.entries, trim=True)
    with pytest.raises(ConfigError, match="inside the workspace"):
        TrimPolicy(spill_dir="../elsewhere")
    out, report = trim_results(t.entries, workspace=tmp_path, policy=TrimPolicy(keep_recent=0))
    assert report.trimmed == 1 and str(tmp_path) in result_body(out, "toolu_r")


# --- 3. denials ----------------------------------------------------------------------------------------


def test_older_denial_goes_with_its_call_and_the_chain_is_relinked() -> None:
    """S-19.3: the older denial's tool_use and tool_result both go; the newest stays; children relinked."""
    t = Transcript()
    t.prompt("go")
    t.assistant(text("trying"), bash("toolu_d1", "rm -rf x"))
    intro, call1 = t.entries[-2:]
    denial1 = t.denial("toolu_d1")
    next_msg = t.assistant(bash("toolu_d2", "rm -rf y"))[0]
    denial2 = t.denial("toolu_d2")
    t.assistant(text("giving up"))
    out, report = rewritten(t.entries)
    uuids = [e.get("uuid") for e in out]
    assert call1["uuid"] not in uuids and denial1["uuid"] not in uuids
    assert intro["uuid"] in uuids and denial2["uuid"] in uuids and calls_in(out) == ["toolu_d2"]
    assert by_uuid(out, next_msg["uuid"])["parentUuid"] == intro["uuid"]
    assert (report.denials_dropped, report.details[0].tool_use_id, report.details[0].note) == (
        1,
        "toolu_d1",
        "Bash",
    )
    assert validate(out) == [] and chain_ok(out)


def test_denied_call_with_a_sibling_read_whose_result_arrives_first() -> None:
    """Parallel results arrive in completion order (docs/sdk-notes.md#transcript-order); only the denied pair
    goes, the Read stays."""
    t = Transcript()
    t.prompt("go")
    t.assistant(thinking(), tool_use("toolu_read", "Read", file_path="/a"), bash("toolu_deny", "curl x"))
    think, read_call, deny_call = t.entries[-3:]
    read_result = t.result("toolu_read", "contents")
    denial = t.denial("toolu_deny")
    after = t.assistant(text("ok"))[0]
    t.assistant(bash("toolu_new", "curl y"))
    t.denial("toolu_new")
    out, _ = rewritten(t.entries)
    assert calls_in(out) == ["toolu_read", "toolu_new"]
    assert by_uuid(out, read_call["uuid"]) is read_call and by_uuid(out, think["uuid"]) is think
    assert result_body(out, "toolu_read") == "contents"
    assert deny_call["uuid"] not in [e.get("uuid") for e in out] and denial not in out
    assert by_uuid(out, read_result["uuid"])["parentUuid"] == read_call["uuid"]  # was deny_call, now removed
    assert by_uuid(out, after["uuid"])["parentUuid"] == read_result["uuid"]  # was the denial, now removed
    assert validate(out) == []


def test_denial_in_a_multi_block_entry_keeps_the_siblings() -> None:
    """Older CLIs put several blocks in one assistant entry: only the denied block leaves it."""
    t = Transcript()
    t.prompt("go")
    entry = t.add(
        {
            "type": "assistant",
            "uuid": t.uuid(),
            "message": {
                "id": "msg_multi",
                "role": "assistant",
                "model": "m",
                "content": [
                    text("both"),
                    tool_use("toolu_ok", "Read", file_path="/a"),
                    bash("toolu_no", "rm x"),
                ],
            },
        }
    )
    t.result("toolu_ok", "fine")
    t.denial("toolu_no")
    t.assistant(bash("toolu_last", "rm y"))
    t.denial("toolu_last")
    out, _ = rewritten(t.entries)
    kept = by_uuid(out, entry["uuid"])
    assert kept["message"]["content"] == [text("both"), tool_use("toolu_ok", "Read", file_path="/a")]
    assert entry["message"]["content"][2]["id"] == "toolu_no"  # the input entry is untouched
    assert validate(out) == []


def test_denials_are_recognised_by_marker_never_by_wording() -> None:
    t = Transcript()
    t.prompt("go")
    t.assistant(bash("toolu_words", "x"))
    t.result("toolu_words", "PreToolUse:Bash hook error: DENY", is_error=True)  # denial wording, no marker
    t.assistant(bash("toolu_ask", "y"))
    t.result(
        "toolu_ask", "needs approval", is_error=True, toolDenialKind="user-rejected"
    )  # unapproved, not a denial
    t.assistant(bash("toolu_marked", "z"))
    t.denial("toolu_marked", reason="anything at all")
    out, report = rewritten(t.entries, keep_denials=0)
    assert calls_in(out) == ["toolu_words", "toolu_ask"] and report.denials_dropped == 1


def test_keep_denials_zero_and_none() -> None:
    t = Transcript()
    t.prompt("go")
    for n in range(3):
        t.assistant(bash(f"toolu_d{n}", "rm"))
        t.denial(f"toolu_d{n}")
    assert calls_in(prune_denials(t.entries, keep_denials=0)[0]) == []
    assert calls_in(prune_denials(t.entries, keep_denials=2)[0]) == ["toolu_d1", "toolu_d2"]
    assert rewrite(t.entries, ephemeral=False, keep_denials=None)[0] == t.entries
    with pytest.raises(ConfigError):
        rewrite(t.entries, keep_denials=-1)


def test_denial_entry_with_other_blocks_survives_without_the_denial_copies() -> None:
    """A marked entry that also holds a text block keeps the text; its toolUseResult copy and marker go."""
    t = Transcript()
    t.prompt("go")
    t.assistant(bash("toolu_d", "rm"))
    entry = t.denial("toolu_d")
    entry["message"]["content"].append(text("note from the user"))
    t.assistant(bash("toolu_e", "rm"))
    t.denial("toolu_e")
    out, _ = rewritten(t.entries)
    kept = by_uuid(out, entry["uuid"])
    assert kept["message"]["content"] == [text("note from the user")]
    assert "toolUseResult" not in kept and "toolDenialKind" not in kept and "toolUseResult" in entry


# --- 4. residue ----------------------------------------------------------------------------------------


def test_api_errors_go_no_response_requested_stays() -> None:
    """S-19.4: isApiErrorMessage entries are dropped and relinked; the synthetic "No response requested."
    is not an error and is kept (decision documented in prune.py)."""
    t = Transcript()
    first = t.prompt("go")
    err1 = t.api_error()
    err2 = t.api_error("API Error: 529 Overloaded (fake).")
    second = t.prompt("go again")
    reply = t.assistant(text("hi"))[0]
    nothing = t.no_response()
    t.last_prompt()
    out, report = rewritten(t.entries)
    assert [e.get("uuid") for e in out if e.get("type") != "last-prompt"] == [
        first["uuid"],
        second["uuid"],
        reply["uuid"],
        nothing["uuid"],
    ]
    assert by_uuid(out, second["uuid"])["parentUuid"] == first["uuid"]  # over two removed entries
    assert report.api_errors_dropped == 2 and {d.uuid for d in report.details} == {err1["uuid"], err2["uuid"]}
    assert drop_api_errors(t.entries)[0] == out


def test_removing_an_entry_from_a_cycle_leaves_a_history_a_second_rewrite_keeps() -> None:
    """A damaged chain: `e` and the API error `d` name each other as parent, `c` hangs under `d` before `e`.
    Removing `d` relinks `c` to `e`, which comes after it: the result is put in chain order too."""
    t = Transcript()
    root = t.prompt("go")
    child = t.prompt("c", parentUuid="d")
    mid = t.assistant(text("e"), parent="d")[-1]
    error = t.api_error()
    entries = [*t.entries[:-1], {**error, "uuid": "d", "parentUuid": mid["uuid"]}]
    out, report = rewrite(entries)
    assert report.api_errors_dropped == 1
    assert [e["uuid"] for e in out] == [root["uuid"], mid["uuid"], child["uuid"]]
    assert by_uuid(out, child["uuid"])["parentUuid"] == mid["uuid"]
    assert rewrite(out)[0] == out


def test_leaf_pointer_to_a_removed_entry_is_relinked() -> None:
    t = Transcript()
    prompt = t.prompt("go")
    t.api_error()
    pointer = t.last_prompt()
    out, _ = rewritten(t.entries)
    assert out[-1]["leafUuid"] == prompt["uuid"] and pointer["leafUuid"] != prompt["uuid"]


@pytest.mark.parametrize("marker", [True, False], ids=["2.1.332-marker", "older-no-marker"])
def test_interrupted_result_gets_the_neutral_note(marker: bool) -> None:
    """S-19.4: the stop-and-wait text is replaced; is_error, the harness row and toolUseResult stay."""
    t = Transcript()
    t.prompt("go")
    t.assistant(bash("toolu_slow", "python3 slow.py"))
    rejected = t.rejected("toolu_slow", marker=marker)
    row = t.interrupt_row()
    t.prompt("continue")
    out, report = rewritten(t.entries)
    block = block_of(by_uuid(out, rejected["uuid"]))
    assert block == {
        "tool_use_id": "toolu_slow",
        "type": "tool_result",
        "content": texts.INTERRUPTED_RESULT,
        "is_error": True,
    }
    assert (
        by_uuid(out, row["uuid"]) is row
        and by_uuid(out, rejected["uuid"])["toolUseResult"] == "User rejected tool use"
    )
    assert report.interrupts_neutralised == 1 and neutralise_interrupts(t.entries)[0] == out


def test_parallel_interrupt_and_rejection_without_row() -> None:
    """Both rejected calls before one row are neutralised; a genuine error beside them and an unapproved
    call without a row keep their text."""
    t = Transcript()
    t.prompt("go")
    t.assistant(bash("toolu_a", "sleep"), tool_use("toolu_b", "Glob", pattern="*"), bash("toolu_c", "false"))
    t.result("toolu_c", "Exit code 1", is_error=True)
    t.rejected("toolu_a")
    t.rejected("toolu_b")
    t.interrupt_row()
    t.prompt("next")
    t.assistant(bash("toolu_ask", "curl"))
    t.rejected("toolu_ask")  # user-rejected, no row: an unapproved call, not an interrupt
    t.assistant(text("fine"))
    out, _ = rewritten(t.entries)
    assert [result_body(out, c) for c in ("toolu_a", "toolu_b", "toolu_c", "toolu_ask")] == [
        texts.INTERRUPTED_RESULT,
        texts.INTERRUPTED_RESULT,
        "Exit code 1",
        REJECTED_TEXT,
    ]


def test_trailing_orphan_is_healed_right_after_its_message() -> None:
    """S-19.4: a call with no result gets a healing result entry chained right after it."""
    t = Transcript()
    t.prompt("go")
    call = t.assistant(text("running"), bash("toolu_o", "make"))[-1]
    out, report = rewritten(t.entries)
    heal = out[-1]
    assert (
        heal["parentUuid"] == call["uuid"]
        and heal["type"] == "user"
        and heal["sourceToolAssistantUUID"] == call["uuid"]
    )
    assert heal["message"] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_o",
                "content": texts.ORPHAN_RESULT,
                "is_error": True,
            }
        ],
    }
    assert heal["sessionId"] == call["sessionId"] and heal["isSidechain"] is False
    assert report.orphans_healed == 1 and report.details[0].uuid == heal["uuid"]
    assert validate(t.entries) != [] and validate(out) == []
    assert heal_orphans(t.entries)[0] == out


def test_orphan_healed_after_a_copy_of_its_entry_takes_over_only_the_children_after_it() -> None:
    """The CLI can write an entry twice; the healing entry follows the later copy, so a child stored before
    it keeps its parent (moving under the healing entry would put it before its parent: a rewrite of the
    rewrite would then reorder it)."""
    t = Transcript()
    t.prompt("go")
    call = t.assistant(bash("toolu_o", "make"))[-1]
    child = t.prompt("still there?")
    entries = [*t.entries, call]  # the call's entry again, after its child
    out, _ = heal_orphans(entries)
    heal = out[-1]
    assert [e["uuid"] for e in out] == [e["uuid"] for e in entries] + [heal["uuid"]]
    assert heal["parentUuid"] == call["uuid"] and by_uuid(out, child["uuid"])["parentUuid"] == call["uuid"]
    assert rewrite(out)[0] == out


def test_mid_history_parallel_orphan_is_spliced_before_the_answered_sibling() -> None:
    """An orphan in a parallel message: the heal goes after the message's last entry and takes over its
    children (the sibling's result and the next prompt hang under it), so it is on every path."""
    t = Transcript()
    t.prompt("go")
    first, last = t.assistant(tool_use("toolu_ok", "Read", file_path="/a"), bash("toolu_lost", "make"))
    answered = t.result("toolu_ok", "text")
    t.prompt("next")
    pointer = t.last_prompt()
    pointer["leafUuid"] = last["uuid"]
    out, _ = rewritten(t.entries)
    position = [e.get("uuid") for e in out].index(last["uuid"])
    heal = out[position + 1]
    assert result_body([heal], "toolu_lost") == texts.ORPHAN_RESULT
    assert by_uuid(out, answered["uuid"])["parentUuid"] == heal["uuid"]
    assert out[-1]["leafUuid"] == heal["uuid"]
    assert by_uuid(out, first["uuid"]) is first and validate(out) == []


def test_orphan_before_a_compaction_boundary_and_untouched_summary() -> None:
    t = Transcript()
    t.prompt("go")
    t.assistant(bash("toolu_cut", "make"))
    boundary, summary = t.compact("what happened")
    t.assistant(text("continuing"))
    out, _ = rewritten(t.entries)
    assert by_uuid(out, boundary["uuid"]) is boundary and by_uuid(out, summary["uuid"]) is summary
    assert result_body(out, "toolu_cut") == texts.ORPHAN_RESULT
    assert validate(out) == []


def test_every_rewrite_at_once_keeps_the_red_lines(tmp_path: Path) -> None:
    """S-20 across the whole pipeline: pairs together, siblings unharmed, chain relinked, protected entries
    are the very same objects."""
    t = Transcript()
    t.prompt("go")
    t.meta("caveat")
    glances(t, 8)
    t.assistant(tool_use("toolu_big", "Read", file_path="/big"), bash("toolu_den", "rm -rf /"))
    t.denial("toolu_den")
    t.result("toolu_big", big(0, 10_000))
    t.api_error()
    t.compact("summary")
    t.assistant(bash("toolu_den2", "rm"))
    t.denial("toolu_den2")
    t.assistant(bash("toolu_int", "sleep 9"))
    t.rejected("toolu_int")
    t.interrupt_row()
    t.prompt("resume")
    t.assistant(bash("toolu_end", "make"))
    out, report = rewritten(t.entries, workspace=tmp_path, trim=TrimPolicy(keep_recent=0))
    assert (
        report.expired,
        report.trimmed,
        report.denials_dropped,
        report.api_errors_dropped,
        report.interrupts_neutralised,
        report.orphans_healed,
    ) == (2, 1, 1, 1, 1, 1)
    assert validate(out) == [] and chain_ok(out)
    protected = [e for e in t.entries if e.get("isMeta") or e.get("isCompactSummary") or e.get("subtype")]
    assert all(any(o is p for o in out) for p in protected)
    assert str(report).startswith("2 expired, 1 trimmed, 1 denials dropped")


def test_rewrite_does_not_copy_unchanged_entries() -> None:
    t = Transcript()
    glances(t, 7)
    out, _ = rewrite(t.entries, ephemeral=EPH)
    changed = [n for n, (a, b) in enumerate(zip(out, t.entries)) if a is not b]
    assert changed == [1]  # only the expired result entry is a new object


def test_rejects_bad_options() -> None:
    with pytest.raises(ConfigError):
        rewrite([], ephemeral="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        EphemeralPolicy(keep_recent=-1)
    assert rewrite([], ephemeral=False) == ([], rewrite([], ephemeral=False)[1])


# --- validate ------------------------------------------------------------------------------------------


def test_validate_accepts_parallel_results_in_completion_order() -> None:
    t = Transcript()
    t.prompt("go")
    t.assistant(tool_use("toolu_1", "Read", file_path="/a"), bash("toolu_2", "ls"), bash("toolu_3", "ls"))
    for call in ("toolu_3", "toolu_1", "toolu_2"):
        t.result(call, "x")
    t.assistant(text("done"))
    assert validate(t.entries) == []


def test_validate_reports_missing_stray_and_duplicate_results() -> None:
    t = Transcript()
    t.prompt("go")
    t.assistant(bash("toolu_a", "ls"), bash("toolu_b", "ls"))
    t.result("toolu_a", "x")
    t.result("toolu_a", "again")
    t.result("toolu_zz", "stray")
    t.assistant(text("next"))
    assert validate(t.entries) == [
        "pairing: tool_use toolu_a has more than one tool_result",
        "pairing: tool_result for toolu_zz does not answer a call of the message before it",
        "pairing: tool_use toolu_b (Bash) has no tool_result before the next assistant message",
    ]


def test_validate_result_after_the_next_message_is_not_an_answer() -> None:
    t = Transcript()
    t.assistant(bash("toolu_a", "ls"))
    t.assistant(text("moved on"))
    t.result("toolu_a", "late")
    assert validate(t.entries) == [
        "pairing: tool_use toolu_a (Bash) has no tool_result before the next assistant message",
        "pairing: tool_result for toolu_a does not answer a call of the message before it",
    ]


def test_validate_chain_names_the_missing_parent_once() -> None:
    t = Transcript()
    t.prompt("a", parentUuid="gone-1")
    t.prompt("b")
    t.add(
        {
            "type": "user",
            "uuid": t.uuid(),
            "parentUuid": "gone-1",
            "message": {"role": "user", "content": "c"},
        }
    )
    assert validate(t.entries) == ["chain: parentUuid gone-1 is not in the transcript"]


def test_validate_follows_what_the_cli_sends() -> None:
    """Sidechain rows of old CLIs, API-error messages and anything before a compaction boundary are not sent."""
    t = Transcript()
    t.prompt("go")
    t.assistant(bash("toolu_before", "make"))  # unanswered, but cut off by compaction
    t.compact("s")
    t.assistant(tool_use("toolu_task", "Task", prompt="p"))
    t.add(
        {
            "type": "assistant",
            "uuid": t.uuid(),
            "isSidechain": True,
            "message": {"id": "side", "role": "assistant", "content": [bash("toolu_side", "ls")]},
        }
    )
    t.api_error()
    t.result("toolu_task", "report")
    assert validate(t.entries) == []


# --- the wrapping stores (B-6, S-21) ---------------------------------------------------------------------

KEY = {"project_key": "-work-ws", "session_id": "5e551011-0000-4000-8000-000000000000"}
SUB = {**KEY, "subpath": "subagents/agent-a1"}


def sample() -> list[dict[str, Any]]:
    t = Transcript()
    t.prompt("go")
    glances(t, 8)
    t.api_error()
    return t.entries


class MinimalStore:
    """Only the two required protocol methods."""

    def __init__(self) -> None:
        self.rows: dict[str, list[Any]] = {}

    async def append(self, key: Any, entries: list[Any]) -> None:
        self.rows.setdefault(str(sorted(key.items())), []).extend(entries)

    async def load(self, key: Any) -> list[Any] | None:
        return self.rows.get(str(sorted(key.items())))


@pytest.mark.anyio
async def test_rewriting_store_rewrites_on_load_and_never_changes_stored_rows() -> None:
    from claude_agent_sdk import InMemorySessionStore

    from flower.stores.rewrite import RewritingSessionStore

    base = InMemorySessionStore()
    store = RewritingSessionStore(base, workspace=None, ephemeral=EPH)
    entries = sample()
    await store.append(KEY, copy.deepcopy(entries))  # type: ignore[arg-type]
    await store.append(SUB, copy.deepcopy(entries[:3]))  # type: ignore[arg-type]
    loaded = await store.load(KEY)  # type: ignore[arg-type]
    assert loaded == rewrite(entries, ephemeral=EPH)[0] != entries
    assert await base.load(KEY) == entries  # type: ignore[arg-type]
    assert await store.load(SUB) == entries[:3]  # type: ignore[arg-type]
    report = store.last_report(KEY)  # type: ignore[arg-type]
    assert report is not None and (report.expired, report.api_errors_dropped) == (2, 1)
    assert store.last_report(SUB).changed is False and store.last_report() is store.last_report(SUB)  # type: ignore
    assert await store.load({**KEY, "session_id": "nope"}) is None  # type: ignore[arg-type]
    assert await store.list_subkeys(KEY) == ["subagents/agent-a1"]  # type: ignore[arg-type]
    assert store.get_entries(KEY) == entries  # other attributes of the base pass through, unrewritten


@pytest.mark.anyio
async def test_wrapper_implements_an_optional_method_exactly_when_its_base_does() -> None:
    from claude_agent_sdk import InMemorySessionStore
    from claude_agent_sdk._internal.session_store_validation import _store_implements

    from flower.stores.rewrite import RewritingSessionStore

    minimal = RewritingSessionStore(MinimalStore(), workspace=None, ephemeral=EPH)
    full = RewritingSessionStore(InMemorySessionStore(), workspace=None, ephemeral=EPH)
    optional = ("list_sessions", "list_session_summaries", "delete", "list_subkeys")
    assert [_store_implements(minimal, m) for m in optional] == [False] * 4  # type: ignore[arg-type]
    assert [_store_implements(full, m) for m in optional] == [True] * 4  # type: ignore[arg-type]
    assert isinstance(minimal, RewritingSessionStore) and type(minimal).__name__ == "RewritingSessionStore"
    await minimal.append(KEY, sample())  # type: ignore[arg-type]
    assert (await minimal.load(KEY))[-1]["type"] == "user"  # type: ignore[arg-type,index]


@pytest.mark.anyio
async def test_pruning_and_trimming_stores_differ_only_in_trim(tmp_path: Path) -> None:
    """S-21: PruningSessionStore = what Runtime(trim=False) uses (no trimming); TrimmingSessionStore trims."""
    from flower.stores.rewrite import PruningSessionStore, TrimmingSessionStore

    t = Transcript()
    t.prompt("go")
    for n in range(25):
        t.assistant(tool_use(f"toolu_r{n}", "Read", file_path="/f"))
        t.result(f"toolu_r{n}", big(n))
    t.api_error()
    with PruningSessionStore(tmp_path / "s.db", workspace=tmp_path, ephemeral=EPH) as pruning:
        await pruning.append(KEY, t.entries)  # type: ignore[arg-type]
        pruned = await pruning.load(KEY)  # type: ignore[arg-type]
        assert pruned == rewrite(t.entries, ephemeral=EPH)[0] and len(pruned) == len(t.entries) - 1
        assert pruning.load_sync(KEY) == pruned  # type: ignore[arg-type]
        assert await pruning.list_sessions(KEY["project_key"]) != []
    with TrimmingSessionStore(tmp_path / "s.db", workspace=tmp_path, ephemeral=EPH) as trimming:
        trimmed = await trimming.load(KEY)  # type: ignore[arg-type]
        assert trimming.last_report(KEY).trimmed == 5  # type: ignore[arg-type,union-attr]
        assert result_body(trimmed, "toolu_r0").startswith("[flower: ") and result_body(
            trimmed, "toolu_r24"
        ) == big(24)  # type: ignore[arg-type]
        assert trimming.base.load_sync(KEY) == t.entries  # the stored rows are the originals
    with pytest.raises(ConfigError, match="workspace"):
        PruningSessionStore(tmp_path / "s.db", workspace=None, trim=True)


@pytest.mark.anyio
async def test_pruning_store_passes_the_sdk_conformance_suite(tmp_path: Path) -> None:
    from claude_agent_sdk.testing import run_session_store_conformance

    from flower.stores.rewrite import PruningSessionStore

    counter = iter(range(1000))
    await run_session_store_conformance(
        lambda: PruningSessionStore(tmp_path / f"c{next(counter)}.db", workspace=tmp_path, ephemeral=EPH)
    )


# --- property: a valid transcript stays valid -------------------------------------------------------------

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

OUTCOMES = ["ok", "ok", "ok", "error", "denial", "rejected", "missing", "big"]


@st.composite
def synthetic(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Random mixes of parallel calls (results in random completion order), denials, interrupts, API errors,
    prompts, compactions, missing results and large results."""
    t = Transcript()
    t.prompt("start")
    for r in range(draw(st.integers(0, 14))):
        step = draw(
            st.sampled_from(["tools"] * 5 + ["text", "api_error", "prompt", "compact", "no_response"])
        )
        if step == "tools":
            calls = [f"toolu_{r}_{i}" for i in range(draw(st.integers(1, 3)))]
            blocks = [thinking()] if draw(st.booleans()) else []
            for call in calls:
                command = draw(st.sampled_from(["git status", "ls", "make", "git diff"]))
                blocks.append(
                    bash(call, command) if draw(st.booleans()) else tool_use(call, "Read", file_path="/x")
                )
            t.assistant(*blocks)
            rejected = False
            for call in draw(st.permutations(calls)):
                outcome = draw(st.sampled_from(OUTCOMES))
                if outcome == "ok" or outcome == "big":
                    t.result(call, "r" * (300 if outcome == "big" else 5))
                elif outcome == "error":
                    t.result(call, "Exit code 1", is_error=True)
                elif outcome == "denial":
                    t.denial(call)
                elif outcome == "rejected":
                    t.rejected(call, marker=draw(st.booleans()))
                    rejected = True
            if rejected:
                t.interrupt_row()
        elif step == "text":
            t.assistant(text("words"))
        elif step == "api_error":
            t.api_error()
        elif step == "prompt":
            t.prompt("more")
        elif step == "compact":
            t.compact("summary")
        else:
            t.no_response()
    return t.entries


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=synthetic(), keep=st.sampled_from([None, 0, 1, 2]), trim=st.booleans())
def test_property_rewrite_never_breaks_and_heals_orphans(
    entries: list[dict[str, Any]], keep: int | None, trim: bool, tmp_path: Path
) -> None:
    """B-7: the rewritten transcript validates whenever the input does; problems never grow; orphans
    (the only breakage generated here) are always healed; idempotent; the input is untouched."""
    before = validate(entries)
    out, _ = rewritten(
        entries,
        workspace=tmp_path,
        keep_denials=keep,
        ephemeral=EphemeralPolicy(keep_recent=1, predicate=glance),
        trim=TrimPolicy(keep_recent=1, min_chars=100) if trim else False,
    )
    after = validate(out)
    assert set(after) <= set(before)
    assert after == []
    assert chain_ok(out)


def test_interrupt_when_results_interleave_with_the_message_entries() -> None:
    """2.1.x writes a call's result before the next block of the same message: still one turn."""
    t = Transcript()
    t.prompt("go")
    t.assistant(bash("toolu_x", "sleep 5"), msg_id="msg_split")
    t.rejected("toolu_x")
    t.assistant(bash("toolu_y", "sleep 6"), msg_id="msg_split")
    t.rejected("toolu_y")
    t.interrupt_row()
    out, report = rewritten(t.entries)
    assert [result_body(out, c) for c in ("toolu_x", "toolu_y")] == [texts.INTERRUPTED_RESULT] * 2
    assert report.interrupts_neutralised == 2 and validate(out) == []


_UUIDS = st.sampled_from(["a", "b", "c", "d", "e"])


def _chained(uuid: str, parent: str | None, error: bool) -> dict[str, Any]:
    if error:
        message = {"id": f"synth-{uuid}", "model": "<synthetic>", "role": "assistant",
                   "content": [{"type": "text", "text": "API Error: 500"}]}
        return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "isApiErrorMessage": True,
                "message": message}
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "message": {"role": "user", "content": uuid}}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.builds(_chained, _UUIDS, st.one_of(st.none(), _UUIDS, st.just("gone")), st.booleans()),
                max_size=12))
def test_property_rewrite_is_a_fixed_point_whatever_the_parent_chain(entries: list[dict[str, Any]]) -> None:
    """Duplicated uuids, cycles, self-parents and removed entries inside them: one rewrite is final."""
    out, _ = rewrite(entries)
    assert rewrite(out)[0] == out
