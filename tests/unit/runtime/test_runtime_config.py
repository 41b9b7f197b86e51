"""`RuntimeConfig`: one value with every runtime option, resolved once (flag > env > file > default), that
travels as plain data to branches and fleet workers; a setting that cannot travel is refused in one line."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from typing import get_type_hints

import anyio
import pytest

from flower.agent.spec import AgentSpec
from flower.errors import ConfigError
from flower.runtime.config import RuntimeConfig, RuntimeOptions, resolve_config
from flower.runtime.handoff import HandoffPolicy
from flower.runtime.refresh import RefreshPolicy
from flower.runtime.resilience import RetryPolicy
from flower.runtime.runtime import Runtime
from flower.stores.trim import EphemeralPolicy, TrimPolicy
from flower.workbench.bench import Workbench

TUNED = RuntimeConfig(
    run_dir="/srv/runs", workbench=False, spill_threshold=300, trim=TrimPolicy(keep_recent=3, min_chars=500),
    ephemeral=EphemeralPolicy(keep_recent=2, reads=False), keep_denials=0,
    handoff=HandoffPolicy(headroom=5_000, max_generations=4), window=200_000, handoff_at=30_000,
    refresh=RefreshPolicy(min_tokens=2_000, share=0.5), resilience=RetryPolicy(max_attempts=2, base=0.1),
    portable=False, placement="system", env={"ANTHROPIC_MODEL": "claude-haiku-4-5"}, project="fleet",
    model="claude-haiku-4-5", fallback_model="claude-sonnet-4-5", budget=1.5, otlp="http://127.0.0.1:4318",
)


def test_precedence_is_flag_then_env_then_file_then_default(tmp_path: Path) -> None:
    (tmp_path / "flower.toml").write_text('spill_threshold = 9000\nhandoff_at = "35k"\nmodel = "opus"\ntrim = true\n')
    env = {"FLOWER_SPILL_THRESHOLD": "123", "FLOWER_WINDOW": "300k"}
    resolved = resolve_config({"spill_threshold": 7, "model": None}, env=env, start=tmp_path)
    config, sources = resolved.config, resolved.sources
    assert config.spill_threshold == 7 and sources["spill_threshold"] == "flag"  # the flag beats env and file
    assert config.window == 300_000 and sources["window"] == "env FLOWER_WINDOW"
    assert config.handoff_at == 35_000 and sources["handoff_at"] == str(tmp_path / "flower.toml")
    assert config.model == "opus" and sources["model"] == str(tmp_path / "flower.toml")  # None: no flag
    assert config.trim is True and config.run_dir == "runs" and sources["run_dir"] == "default"
    assert resolved.workspace == "." and resolved.store is None and resolved.file == tmp_path / "flower.toml"
    env_only = resolve_config({}, env=env, start=tmp_path)
    assert env_only.config.spill_threshold == 123 and env_only.sources["spill_threshold"] == "env FLOWER_SPILL_THRESHOLD"
    rows = {row["name"]: row for row in env_only.rows()}  # what `flower config` prints
    assert rows["spill_threshold"] == {"name": "spill_threshold", "value": 123, "source": "env FLOWER_SPILL_THRESHOLD",
                                       "env": "FLOWER_SPILL_THRESHOLD", "help": rows["spill_threshold"]["help"]}
    assert rows["handoff_at"]["value"] == 35_000 and rows["workspace"]["source"] == "default"


def test_the_resolved_window_and_threshold_reach_the_runtime(tmp_path: Path) -> None:
    config = resolve_config({}, env={"FLOWER_WINDOW": "200k", "FLOWER_HANDOFF_AT": "40k"}, start=tmp_path).config
    rt = Runtime(tmp_path, config=replace(config, run_dir=str(tmp_path / "runs")))
    spec = AgentSpec(name="s", instructions="x", model="claude-opus-5-5")
    assert rt.window(spec) == 200_000 and rt.threshold(spec) == 40_000
    own = Runtime(tmp_path, config=rt.config, handoff=HandoffPolicy(window=100_000))
    assert own.window(spec) == 100_000  # a policy's own window wins over the setting


def test_bad_values_are_one_line_naming_their_source(tmp_path: Path) -> None:
    for env, named in (({"FLOWER_SPILL_THRESHOLD": "big"}, "FLOWER_SPILL_THRESHOLD must be a whole number"),
                       ({"FLOWER_WINDOW": "0"}, "FLOWER_WINDOW must be a token count")):
        with pytest.raises(ConfigError, match=named) as caught:
            resolve_config({}, env=env, start=tmp_path)
        assert "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match="unknown flower setting 'colour'"):
        resolve_config({"colour": "red"}, env={}, start=tmp_path)
    with pytest.raises(ConfigError, match="placement must be 'user' or 'system'"):
        RuntimeConfig(placement="side")  # type: ignore[arg-type]


@pytest.mark.parametrize("config", [RuntimeConfig(), TUNED, replace(TUNED, handoff=False, refresh=False,
                                                                     resilience=False, ephemeral=False,
                                                                     spill_threshold=None, trim=True)])
def test_to_dict_and_from_dict_round_trip_through_json(config: RuntimeConfig) -> None:
    data = json.loads(json.dumps(config.to_dict()))
    assert RuntimeConfig.from_dict(data) == config
    travelling = config.to_dict(local=False)
    assert "env" not in travelling  # the machine's environment stays on the machine
    assert RuntimeConfig.from_dict(travelling) == replace(config, env={})


def test_policies_are_plain_data() -> None:
    data = TUNED.to_dict()
    assert data["handoff"] == {"window": None, "headroom": 5_000, "max_generations": 4, "at": None,
                               "auto": True, "min_turns": 30}
    assert data["ephemeral"] == {"keep_recent": 2, "predicate": None, "reads": False}
    assert data["resilience"]["max_attempts"] == 2 and data["workbench"] is False
    with pytest.raises(ConfigError, match="unknown runtime setting 'colour'"):
        RuntimeConfig.from_dict({"colour": 1})
    with pytest.raises(ConfigError, match="runtime setting handoff"):
        RuntimeConfig.from_dict({"handoff": {"size": 1}})


def test_a_setting_that_cannot_travel_is_refused_in_one_line(tmp_path: Path) -> None:
    expiring = RuntimeConfig(ephemeral=EphemeralPolicy(predicate=lambda command: command.startswith("ls")))
    with pytest.raises(ConfigError) as caught:
        expiring.to_dict()
    assert str(caught.value) == ("setting ephemeral.predicate cannot travel to another process: it is a callable, "
                                 "not plain data")
    with pytest.raises(ConfigError, match="setting workbench cannot travel .* a Workbench object"):
        RuntimeConfig(workbench=Workbench(tmp_path)).to_dict(local=False)


def test_a_durable_run_refuses_such_a_setting_at_its_start(tmp_path: Path) -> None:
    from flower.flow.step import Step
    from flower.flow.workflow import Workflow

    rt = Runtime(tmp_path, run_dir=tmp_path / "runs",
                 ephemeral=EphemeralPolicy(predicate=lambda command: True))
    flow = Workflow([Step("only", AgentSpec(name="a", instructions="x"), "go")], name="refused")
    with pytest.raises(ConfigError) as caught:
        anyio.run(lambda: flow.run(rt))
    assert "ephemeral.predicate cannot travel" in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "runs" / "dbos.sqlite").exists()  # refused before anything was started


def test_runtime_keywords_override_the_config(tmp_path: Path) -> None:
    base = replace(TUNED, run_dir=str(tmp_path / "runs"))
    rt = Runtime(tmp_path, config=base, spill_threshold=50, env=None)
    assert rt.config == replace(base, spill_threshold=50, env={})
    assert rt.spill_threshold == 50 and rt.workbench is None and rt.placement == "system" and not rt.portable
    assert rt.handoff_policy == HandoffPolicy(window=200_000, headroom=5_000, max_generations=4, at=30_000)
    assert rt.refresh == TUNED.refresh and rt.retry == TUNED.resilience and rt.env == {}  # env=None: none
    assert Runtime(tmp_path, config=base).env == TUNED.env
    with pytest.raises(TypeError, match="unexpected keyword argument 'spill'"):
        Runtime(tmp_path, run_dir=tmp_path / "runs", spill=1)  # type: ignore[call-arg]
    assert Runtime(tmp_path, run_dir=tmp_path / "runs", handoff=False).handoff_policy is None


def test_runtime_options_name_every_field() -> None:
    assert set(get_type_hints(RuntimeOptions, localns={"Workbench": Workbench})) == {f.name for f in fields(RuntimeConfig)}


PLAIN = AgentSpec(name="plain", instructions="x")
PINNED = AgentSpec(name="pinned", instructions="x", model="opus", max_budget_usd=0.5)


@pytest.mark.parametrize(("spec", "model", "budget", "expected"), [
    (PLAIN, None, None, (None, None)),
    (PLAIN, "m", 2.0, ("m", 2.0)),            # a spec that names neither takes both
    (PINNED, "m", None, ("opus", 0.5)),       # a spec that names a model keeps it
    (PINNED, None, 2.0, ("opus", 0.5)),       # the budget is a cap: a spec's own lower cap stays
    (PINNED, "m", 0.1, ("opus", 0.1)),        # ... and a lower budget lowers it
    (PINNED, None, 0.5, ("opus", 0.5)),
])
def test_apply_fills_the_model_and_caps_the_budget(spec: AgentSpec, model: str | None, budget: float | None,
                                                   expected: tuple[str | None, float | None]) -> None:
    got = RuntimeConfig(model=model, budget=budget).apply(spec)
    assert (got.model, got.max_budget_usd) == expected
    assert (got is spec) == (expected == (spec.model, spec.max_budget_usd))  # unchanged: the spec itself
    assert (PLAIN.model, PLAIN.max_budget_usd, PINNED.model, PINNED.max_budget_usd) == (None, None, "opus", 0.5)
    assert replace(got, model=spec.model, max_budget_usd=spec.max_budget_usd) == spec  # nothing else changes


def test_the_window_follows_the_model_a_step_runs_on(tmp_path: Path) -> None:
    """What the live view shows as a step's limit: the config's model for a spec that names none."""
    rt = Runtime(tmp_path, run_dir=tmp_path / "runs", model="claude-haiku-4-5", env={})
    assert rt.window(PLAIN) == 200_000 and rt.window(replace(PLAIN, model="opus")) == 1_000_000
    assert Runtime(tmp_path, run_dir=tmp_path / "runs", env={}).window(PLAIN) == 1_000_000


def test_the_budget_setting_is_resolved_like_the_others(tmp_path: Path) -> None:
    (tmp_path / "flower.toml").write_text("budget = 3\n")
    from_file = resolve_config({}, env={}, start=tmp_path)
    assert from_file.config.budget == 3.0 and isinstance(from_file.config.budget, float)
    assert from_file.sources["budget"] == str(tmp_path / "flower.toml")
    from_env = resolve_config({}, env={"FLOWER_BUDGET": "0.25"}, start=tmp_path)
    assert from_env.config.budget == 0.25 and from_env.sources["budget"] == "env FLOWER_BUDGET"
    assert {row["name"]: row["value"] for row in from_env.rows()}["budget"] == 0.25  # `flower config` shows it
    assert resolve_config({"budget": 1.5}, env={"FLOWER_BUDGET": "0.25"}, start=tmp_path).config.budget == 1.5
    for raw, named in (("0", "FLOWER_BUDGET must be a positive number"), ("nan", "FLOWER_BUDGET must be a positive"),
                       ("lots", "FLOWER_BUDGET must be a number")):
        with pytest.raises(ConfigError, match=named) as caught:
            resolve_config({}, env={"FLOWER_BUDGET": raw}, start=tmp_path)
        assert "\n" not in str(caught.value)
    (tmp_path / "flower.toml").write_text("budget = -1\n")
    with pytest.raises(ConfigError, match="flower.toml: budget must be a positive number"):
        resolve_config({}, env={}, start=tmp_path)


def test_a_branch_runs_under_its_parents_config(tmp_path: Path) -> None:
    from flower.flow import durable
    from flower.flow.isolation import branch_runtime

    parent = Runtime(tmp_path, config=replace(TUNED, run_dir=str(tmp_path / "runs")), run_id="r1")
    live = durable.Live(workflow=None, runtime=parent, on_event=None, run_id="r1", meta={})
    branch = branch_runtime(live, "each[0]", isolate=False)
    assert branch.config == parent.config and branch.workbench is None  # workbench=False stays off
    assert branch.store is parent.store and branch.run_id == "r1" and branch.spill_threshold == 300


def test_a_worker_adopts_the_recorded_config_whatever_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flower.flow import durable

    (tmp_path / "flow.py").write_text('from flower import AgentSpec, Step, Workflow\n'
                                      'flow = Workflow([Step("a", AgentSpec(name="a", instructions="x"), "go")])\n')
    monkeypatch.setenv("FLOWER_SPILL_THRESHOLD", "9999")
    monkeypatch.setenv("FLOWER_HANDOFF_AT", "90k")
    recorded = replace(TUNED, run_dir=str(tmp_path / "runs"), workbench=True).to_dict(local=False)
    meta = {"source": f"{tmp_path / 'flow.py'}:flow", "workspace": str(tmp_path), "run_dir": str(tmp_path / "runs"),
            "config": recorded}
    (tmp_path / "runs").mkdir()
    try:
        live = durable._adopt("adopted-1", meta)
        assert live.runtime.config == replace(RuntimeConfig.from_dict(recorded), run_dir=str(tmp_path / "runs"))
        assert live.runtime.spill_threshold == 300 and live.runtime.handoff_policy is not None
        assert live.runtime.handoff_policy.at == 30_000 and live.runtime.env == {}
    finally:
        durable._LIVE.pop("adopted-1", None)


@pytest.mark.parametrize("field", ["window", "handoff_at"])
def test_a_zero_window_or_threshold_is_refused_in_one_line(field: str) -> None:
    with pytest.raises(ConfigError, match=f"{field} must be a whole number of at least 1"):
        RuntimeConfig(**{field: 0})  # type: ignore[arg-type]


def test_a_pyproject_whose_tool_is_not_a_table_is_one_config_error(tmp_path: Path) -> None:
    from flower.runtime.config import find_config

    (tmp_path / "pyproject.toml").write_text("tool = 1\n")
    with pytest.raises(ConfigError, match=r"\[tool\] must be a table"):
        find_config(tmp_path)


def test_the_fallback_model_is_one_setting_applied_like_the_model(tmp_path: Path) -> None:
    """Issue #28 item 3: flag > FLOWER_FALLBACK_MODEL > flower.toml; applied to a spec that names no fallback,
    left out where it is the model the spec runs on (the CLI refuses a fallback equal to the model)."""
    (tmp_path / "flower.toml").write_text('fallback_model = "from-file"\n')
    assert resolve_config({}, env={}, start=tmp_path).config.fallback_model == "from-file"
    from_env = resolve_config({}, env={"FLOWER_FALLBACK_MODEL": "from-env"}, start=tmp_path)
    assert from_env.config.fallback_model == "from-env"
    assert from_env.sources["fallback_model"] == "env FLOWER_FALLBACK_MODEL"
    assert resolve_config({"fallback_model": "flag"}, env={"FLOWER_FALLBACK_MODEL": "e"},
                          start=tmp_path).config.fallback_model == "flag"
    config = RuntimeConfig(model="opus", fallback_model="sonnet")
    assert (config.apply(PLAIN).model, config.apply(PLAIN).fallback_model) == ("opus", "sonnet")
    assert config.apply(replace(PLAIN, fallback_model="haiku")).fallback_model == "haiku"  # the spec's own stays
    assert config.apply(replace(PLAIN, model="sonnet")).fallback_model is None  # not the model it runs on
    with pytest.raises(ConfigError, match="fallback_model is the same as model"):
        AgentSpec(name="x", instructions="", model="m", fallback_model="m")


def test_config_problems_lists_every_bad_setting_of_the_file_and_the_environment(tmp_path: Path) -> None:
    from flower.runtime.config import config_problems

    assert config_problems(tmp_path, env={}) == []
    (tmp_path / "flower.toml").write_text('model = "opus"\nbudget = -1\nhandoff_at = "soon"\n')
    assert config_problems(tmp_path, env={"FLOWER_SPILL_THRESHOLD": "lots", "FLOWER_MODEL": "sonnet"}) == [
        f"{tmp_path / 'flower.toml'}: budget must be a positive number of dollars, not -1",
        f"{tmp_path / 'flower.toml'}: handoff_at must be a token count like 40000 or 40k, not 'soon'",
        "FLOWER_SPILL_THRESHOLD must be a whole number, not 'lots'",
    ]
    (tmp_path / "flower.toml").write_text("model = \n")
    [line] = config_problems(tmp_path, env={})
    assert line.startswith(f"{tmp_path / 'flower.toml'} is not valid TOML")
