"""`flower asks / answer / say` over a run dir's mailbox, and their one-line errors (issue #14, L-8)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from flower.cli import cli
from flower.human.mailbox import SqliteMailbox, is_postgres_dsn, open_mailbox, pending_questions


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def one_line_error(result: Result, needle: str) -> None:
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flower: ") and needle in lines[0], result.stderr


def run_dir(tmp_path: Path) -> tuple[Path, SqliteMailbox]:
    runs = tmp_path / "runs"
    box = SqliteMailbox(runs / "human.db")
    box.post("run-1", "question", "Which port?", ref="q1", meta={"options": ["8080", "9090"]})
    box.post("run-1", "question", "Which host?", ref="q2")
    return runs, box


def test_asks_lists_waiting_questions_and_answer_takes_the_oldest_or_the_named_one(tmp_path: Path) -> None:
    runs, box = run_dir(tmp_path)
    listed = invoke("asks", str(runs))
    assert [line.split("  ")[0] for line in listed.stdout.splitlines()] == ["q1", "q2"]
    assert "Which port?  [8080 | 9090]" in listed.stdout
    assert invoke("answer", str(runs), "q2", "localhost").stdout.strip() == "answered q2: Which host?"
    assert invoke("answer", str(runs), "9090").stdout.strip() == "answered q1: Which port?"
    letters = box.read("run-1")
    assert [(x.kind, x.ref, x.body) for x in letters if x.kind == "answer"] == [("answer", "q2", "localhost"),
                                                                                ("answer", "q1", "9090")]
    as_json = json.loads(invoke("asks", str(runs), "--json").stdout)
    assert [q["id"] for q in as_json] == ["q1", "q2"]  # answers are not settlements: the run settles


def test_a_qid_looking_word_alone_is_the_answer_and_decline_takes_a_reason(tmp_path: Path) -> None:
    runs, box = run_dir(tmp_path)
    invoke("answer", str(runs), "q7")  # one word: the answer itself, to the oldest question
    invoke("answer", str(runs), "q2", "--decline", "ask the ops team")
    assert [(x.kind, x.ref, x.body) for x in box.read("run-1") if x.kind in ("answer", "decline")] == [
        ("answer", "q1", "q7"), ("decline", "q2", "ask the ops team")]


def test_say_sends_to_the_run_that_last_used_the_run_dir(tmp_path: Path) -> None:
    """Not to every run: a later run (after `flower go --new`) must not get the old run's mail as new."""
    runs, box = run_dir(tmp_path)
    assert "sent to" in invoke("say", str(runs), "the", "deadline", "moved").stdout
    (mail,) = [x for x in box.read("run-1") if x.kind == "mail"]
    assert (mail.run, mail.body) == ("run-1", "the deadline moved")
    assert not [x for x in box.read("run-2") if x.kind == "mail"]


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    runs, box = run_dir(tmp_path)
    one_line_error(invoke("asks", str(tmp_path / "nowhere")), "is not a run dir")
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line_error(invoke("asks", str(empty)), "no human channel mailbox")
    one_line_error(invoke("answer", str(runs), "q9", "hi"), "q9 is not waiting for an answer (waiting: q1, q2)")
    one_line_error(invoke("answer", str(runs), "  "), "the answer is empty")
    one_line_error(invoke("say", str(runs), " "), "the message is empty")
    box.post("run-1", "settled", "", ref="q1", meta={"state": "timeout"})
    box.post("run-1", "settled", "", ref="q2", meta={"state": "answered"})
    assert invoke("asks", str(runs)).stdout.strip() == "no question is waiting"
    one_line_error(invoke("answer", str(runs), "late"), "no question is waiting")


def test_mailbox_helpers(tmp_path: Path) -> None:
    assert is_postgres_dsn("postgresql://u@h/db") and is_postgres_dsn("host=127.0.0.1 dbname=test")
    assert not is_postgres_dsn("runs/sessions.db") and not is_postgres_dsn("/tmp/a=b/x.db")
    box = open_mailbox(tmp_path, str(tmp_path / "store" / "sessions.db"))
    assert isinstance(box, SqliteMailbox) and box.path == tmp_path / "store" / "human.db"
    box.post("r", "question", "a?", ref="q1")
    box.post("other", "question", "b?", ref="q1")
    box.post("r", "settled", "x", ref="q1")
    assert [(q.run, q.id) for q in pending_questions(box.read())] == [("other", "q1")]


def test_an_approval_is_listed_as_one_and_takes_yes_or_no_with_a_reason(tmp_path: Path) -> None:
    runs, box = run_dir(tmp_path)
    about = {"tool": "Bash", "rule": "Bash(git push:*)", "agent": "", "key": "k", "call": "git push"}
    for ref in ("q3", "q4", "q5"):
        box.post("run-1", "question", "Approve Bash: git push  (rule Bash(git push:*))", ref=ref,
                 meta={"options": ["yes", "no"], "approval": about})
    listed = invoke("asks", str(runs)).stdout.splitlines()
    assert listed[2].startswith("q3  run-1  approval ") and listed[2].endswith("[yes | no]")
    assert " asked " in listed[0]  # a plain question is not an approval
    assert [q["approval"] for q in json.loads(invoke("asks", str(runs), "--json").stdout)] == [None, None] + [about] * 3
    one_line_error(invoke("answer", str(runs), "q3", "after", "lunch"),
                   "q3 asks to approve a call: answer yes or no, then an optional reason")
    assert invoke("answer", str(runs), "q3", "yes").stdout.startswith("approved q3: Approve Bash: git push")
    assert invoke("answer", str(runs), "q4", "no", "frozen").stdout.startswith("denied q4: ")
    assert invoke("answer", str(runs), "q5", "--decline", "ask ops").stdout.startswith("denied q5: ")
    assert [(x.kind, x.ref, x.body) for x in box.read("run-1") if x.kind in ("answer", "decline")] == [
        ("answer", "q3", "yes"), ("answer", "q4", "no frozen"), ("decline", "q5", "ask ops")]
