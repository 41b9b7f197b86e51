"""The rewrite stages are one ordered registry: the rewrite, the manifest and `flower preview` read it."""

from __future__ import annotations

from pathlib import Path

from flower.report.preview import build_preview, preview_json, rewrite_stages
from flower.stores.rewrite import RewritingSessionStore
from flower.stores.sqlite import SqliteSessionStore
from flower.stores.stages import STAGES, RewriteOptions, stage_names
from flower.stores.trim import EphemeralPolicy, TrimPolicy


def test_the_registry_is_the_rewrite_order() -> None:
    assert [stage.name for stage in STAGES] == ["expiry", "trim", "denials", "api errors", "interrupts",
                                                "orphans"]
    assert all(stage.about for stage in STAGES)


def test_settings_switch_stages_off_but_never_the_residue_cleanup(tmp_path: Path) -> None:
    assert stage_names(RewriteOptions()) == ["denials", "api errors", "interrupts", "orphans"]
    everything = RewriteOptions(EphemeralPolicy(), TrimPolicy(), 1, tmp_path)
    assert stage_names(everything) == [stage.name for stage in STAGES]
    assert stage_names(RewriteOptions(keep_denials=None)) == ["api errors", "interrupts", "orphans"]


def test_a_store_the_manifest_and_the_preview_name_the_same_stages(tmp_path: Path) -> None:
    from flower.runtime.runtime import Runtime

    store = RewritingSessionStore(SqliteSessionStore(tmp_path / "s.db"), workspace=tmp_path, trim=True,
                                  keep_denials=None)
    assert store.stages == ["expiry", "trim", "api errors", "interrupts", "orphans"]
    runtime = Runtime(tmp_path, run_dir=tmp_path / "runs", workbench=False, trim=True)
    recorded = runtime._policies
    assert recorded["stages"] == ["expiry", "trim", "denials", "api errors", "interrupts", "orphans"]
    assert rewrite_stages(recorded) == tuple(recorded["stages"])
    assert rewrite_stages(None) == ("expiry", "denials", "api errors", "interrupts", "orphans")  # the defaults
    preview = build_preview("s", [], policies=recorded)
    assert preview_json(preview)["stages"] == recorded["stages"]
