"""The attack corpus of issue #30's classes (tests/support/glance_attacks.py): every attack refused, for a
reason of its own class, and the hostile files of the disk attacks are what refuses them."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower import texts
from flower.walls.glance.judge import describe_refusal
from tests.support import glance_attacks as attacks
from tests.support.glance_corpus import ALLOWED

_PARSE = texts.GLANCE_WHY["parse"]


def test_the_corpus_is_large_and_has_no_duplicates() -> None:
    assert len(attacks.ATTACKS) + len(attacks.DISK_ATTACKS) >= 300
    assert len(set(attacks.ATTACKS)) == len(attacks.ATTACKS)
    assert not set(attacks.ATTACKS) & set(ALLOWED)


@pytest.mark.parametrize("command", attacks.ATTACKS)
def test_every_attack_is_refused(command: str) -> None:
    assert describe_refusal(command) is not None, command


@pytest.mark.parametrize("group", ["GREP", "SED_LOOPS", "GROWTH", "WIDTHS", "LOOKUPS", "SYMLINKS", "GIT", "LISTERS"])
def test_no_attack_is_refused_only_because_the_judge_failed(group: str) -> None:
    """A parse failure (or an exception inside the judge, which reads the same) would hide a hole: the
    attacks of these classes all parse, so each must be refused by the rule written for it."""
    failed = [command for command in getattr(attacks, group) if describe_refusal(command) == _PARSE]
    assert failed == []


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    for name, content in attacks.DISK_FILES.items():
        (tmp_path / name).write_text(content)
    for name, target in attacks.DISK_LINKS.items():
        (tmp_path / name).symlink_to(target)
    (tmp_path / "a").mkdir()
    return tmp_path


@pytest.mark.parametrize("command", attacks.DISK_ATTACKS)
def test_every_disk_attack_is_refused_by_the_wall(command: str, hostile: Path) -> None:
    assert describe_refusal(command, cwd=str(hostile)) is not None, command


def test_the_glob_attacks_are_refused_because_of_the_hostile_names(tmp_path: Path, hostile: Path) -> None:
    """Control: in a workspace without the hostile names, the same globs are glances."""
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "app.py").write_text("x")
    globs = [command for command in attacks.DISK_ATTACKS if command.startswith("grep -n x ")]
    assert globs and all(describe_refusal(command, cwd=str(clean)) is None for command in globs)
    reasons = [describe_refusal(command, cwd=str(hostile)) or "" for command in globs if not command.endswith(" *")]
    assert all("matches -" in reason for reason in reasons), reasons  # `*` also matches the link to /dev/zero
