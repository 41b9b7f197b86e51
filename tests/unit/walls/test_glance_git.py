"""The git pins against git itself: names kept as written, merges not re-run, and every documented key that
names a program accounted for."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from flower.walls.glance.git import GIT_PINS, PROGRAM_KEYS, repo_pins, split_key
from flower.walls.glance.judge import describe_refusal

_PROGRAM_WORDS = re.compile(
    r"\.(?:[a-z<>]*\.)?[a-z]*(?:cmd|command|program|driver|textconv|clean|smudge|process|editor|pager|helper"
    r"|hook|hookspath|external|fsmonitor|askpass|browser|tool|proxy)$|^(?:alias|pager)\.", re.IGNORECASE)
_NOT_PROGRAMS = {
    "advice.ignoredhook": "a hint switch", "advice.waitingforeditor": "a hint switch", "color.pager": "a colour switch",
    "column.clean": "a layout", "diff.<driver>.cachetextconv": "a cache switch", "gitcvs.dbdriver": "a DBI name",
    "http.proxy": "an address (no transport runs)", "remote.<name>.proxy": "an address (no transport runs)",
    "fsmonitor.allowremote": "a switch",
}


def _documented() -> list[str]:
    done = subprocess.run(["git", "help", "--config"], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        pytest.skip("this git cannot list its configuration keys")
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def test_every_documented_key_that_names_a_program_is_accounted_for() -> None:
    named = {key.lower() for key in _documented() if _PROGRAM_WORDS.search(key)}
    assert "core.fsmonitor" in named and "merge.<driver>.driver" in named  # the selection sees what it must
    unaccounted = sorted(named - set(PROGRAM_KEYS) - set(_NOT_PROGRAMS))
    assert unaccounted == [], f"git documents program keys no glance pin accounts for: {unaccounted}"


def test_every_key_pinned_on_every_glance_is_in_the_pins() -> None:
    pinned = {k for k, why in PROGRAM_KEYS.items() if why.endswith("(GIT_PINS)")}
    pins = shlex.split(GIT_PINS)
    given = {pins[i + 1].partition("=")[0].lower() for i, word in enumerate(pins) if word == "-c"}
    assert {k.replace("<format>", "ssh") for k in pinned} - given == set()


@pytest.mark.parametrize(("key", "parts"), [
    ("filter.Evil.clean", ("filter", "Evil", "clean")),
    ("FILTER.a.b.SMUDGE", ("filter", "a.b", "smudge")),
    ("core.fsmonitor", ("core", None, "fsmonitor")),
    ("merge.x.Driver", ("merge", "x", "driver")),
])
def test_a_subsection_keeps_its_case(key: str, parts: tuple[str, str | None, str]) -> None:
    assert split_key(key) == parts


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_pins_name_filters_and_merge_drivers_exactly_as_the_repository_wrote_them(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "filter.Evil.clean", "touch x")
    _git(tmp_path, "config", "filter.Evil.Smudge", "touch x")
    _git(tmp_path, "config", "merge.Mixed Case.driver", "touch x")
    pins = shlex.split(repo_pins(tmp_path))
    values = [pins[i + 1] for i, word in enumerate(pins) if word == "-c"]
    assert {"filter.Evil.clean=", "filter.Evil.smudge=", "filter.Evil.process=", "filter.Evil.required=false",
            "merge.Mixed Case.driver=true"} <= set(values)
    assert not any(v.startswith("filter.evil.") for v in values)


@pytest.mark.parametrize("command", [
    "git log -m -p --diff-merges=remerge", "git log --diff-merges remerge -p", "git show --diff-merges=r HEAD",
    "git rev-list --diff-merges=r HEAD", "git shortlog --diff-merges=remerge HEAD", "git reflog show --diff-merges=r",
    "git show --remerge-diff", "git log --diff-merges=$X",
])
def test_a_remerge_diff_is_refused(command: str) -> None:
    assert describe_refusal(command) is not None


@pytest.mark.parametrize("command", ["git log -m -p -1", "git log --diff-merges=first-parent -p", "git show --cc"])
def test_reading_merges_stays_a_glance(command: str) -> None:
    assert describe_refusal(command) is None


@pytest.mark.parametrize("section", ["filter", "merge"])
def test_a_name_no_pin_can_reach_refuses_the_repository(tmp_path: Path, section: str) -> None:
    """`-c filter.F=G.clean=` sets the key `filter.F` to `G.clean=`, so a subsection with '=' cannot be pinned;
    nor can one whose bytes are not UTF-8 (the pin would name a replacement character)."""
    from flower.walls.glance.options import Refusal

    variable = "clean" if section == "filter" else "driver"
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", f"{section}.F=G.{variable}", "touch x")
    with pytest.raises(Refusal):
        repo_pins(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    _git(other, "init", "-q")
    with (other / ".git" / "config").open("ab") as config:
        config.write(f'[{section} "\xffE"]\n\t{variable} = touch x\n'.encode("latin-1"))
    with pytest.raises(Refusal):
        repo_pins(other)
