"""`RuntimeConfig`: every option of a `Runtime` in one frozen value, and where each setting comes from.

A config is resolved once, by `resolve_config` (flag > environment > config file > default), and then
travels: a branch of a parallel step runs under a copy of its parent's config, and a fleet worker under
the config the starter recorded in the durable run, whatever the worker's own environment says.

The config file is `flower.toml` (top-level keys) or the `[tool.flower]` table of `pyproject.toml`, found in
the start directory or the nearest parent that has one (`flower.toml` wins when a directory has both).
A file inside the workspace (or in the start directory) came with the repository, so it may not set the
settings of `UNTRUSTED` (where data goes, what runs) unless `FLOWER_TRUST_CONFIG=1` says the user trusts it.

Invariants:
- `resolve_config` is the only place that reads flower's environment variables and config file; the rest
  of the library takes a `RuntimeConfig`.
- `to_dict()` is plain JSON data and `from_dict(to_dict(c)) == c`; a setting that is not plain data (a
  callable, a `Workbench` object) is one `ConfigError` line naming it, never silently dropped.
- An unknown key, or a value of the wrong type, in the config file is one `ConfigError` line naming the
  file and the key; reading the config never creates or changes a file.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from flower.errors import ConfigError
from flower.runtime.handoff import HandoffPolicy
from flower.runtime.refresh import RefreshPolicy
from flower.runtime.resilience import RetryPolicy
from flower.runtime.trust import Ignored, inside_workspace
from flower.stores.trim import EphemeralPolicy, TrimPolicy
from flower.workbench.bench import Placement, Workbench

if TYPE_CHECKING:
    from flower.agent.spec import AgentSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "SETTINGS",
    "TRUST_ENV",
    "UNTRUSTED",
    "Ignored",
    "Resolved",
    "RuntimeConfig",
    "RuntimeOptions",
    "Setting",
    "config_problems",
    "find_config",
    "load_config",
    "parse_tokens",
    "resolve_config",
    "trusted_config",
]

@dataclass(frozen=True)
class RuntimeConfig:
    """Every option of a `Runtime` except the objects of one run (workspace, store, run id)."""

    run_dir: str = "runs"
    """Where `manifest.json` (one row per step) and the default `sessions.db` live."""
    workbench: bool | Workbench = True
    """`.flower/` in the workspace; a `Workbench` object puts it elsewhere (it cannot travel to another
    process); False for none (the walls stay)."""
    spill_threshold: int | None = 4000
    """Tool output fields longer than this many characters go to the workbench's `spill/`; None or 0 off."""
    trim: bool | TrimPolicy = False
    """Whether a resume moves large old tool results out of the context (a `TrimPolicy` to tune it)."""
    ephemeral: bool | EphemeralPolicy = True
    """Whether a resume expires stale glance and Read results (an `EphemeralPolicy` to tune it)."""
    keep_denials: int = 1
    """How many of the newest denials a resume keeps; older ones are pruned."""
    handoff: bool | HandoffPolicy = True
    """Generations: hand over to a fresh session before the window fills (a `HandoffPolicy` to tune it)."""
    window: int | None = None
    """The context window in tokens when the handoff policy names none; None follows the model in use."""
    handoff_at: int | None = None
    """A cost-driven threshold in tokens when the handoff policy names none: hand off once the main
    context reaches it, whatever the window."""
    refresh: bool | RefreshPolicy = True
    """Resume a live session to drop its stale results when that pays for the cache it breaks."""
    resilience: bool | RetryPolicy = True
    """Retry transient failures with backoff and wait for a down endpoint (a `RetryPolicy` to tune it)."""
    limit_wait: float = 21_600.0
    """Seconds a step may wait, all told, for a subscription's usage limit to reset before it fails (0:
    fail at once); without retries (`resilience=False`) it never waits."""
    portable: bool = True
    """The Claude Code CLI reads no user or project settings files."""
    placement: Placement = "user"
    """Where the workbench listing goes: each session's first message (cache-stable) or the system prompt."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment for the Claude Code CLI. It belongs to the machine (credentials, HOME, proxies),
    so a fleet worker uses its own."""
    project: str | None = None
    """One project key for every session, so machines with other checkout paths resume each other's."""
    model: str | None = None
    """The model of every step whose spec names none; a spec that names a model keeps it, since a workflow
    that picks a model per step chose it on purpose. Branches and fleet workers follow the run's config."""
    fallback_model: str | None = None
    """The model a step switches to when its own is overloaded or unavailable, for every step whose spec
    names no fallback (and whose model is not this one)."""
    budget: float | None = None
    """A spend cap in dollars of each query of every step: a spec's own lower cap stays."""
    otlp: str | None = None
    """An OTLP/HTTP collector URL the command line sends OpenTelemetry spans to."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "run_dir", os.fspath(self.run_dir))
        object.__setattr__(self, "env", dict(self.env or {}))
        if self.placement not in ("user", "system"):
            raise ConfigError(f"placement must be 'user' or 'system', not {self.placement!r}")
        for name, least in (("spill_threshold", 0), ("window", 1), ("handoff_at", 1)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                raise ConfigError(f"{name} must be a whole number of at least {least}, not {value!r}")
        if isinstance(self.limit_wait, bool) or not isinstance(self.limit_wait, (int, float)) \
                or not self.limit_wait >= 0:
            raise ConfigError(f"limit_wait must be a number of seconds of at least 0, not {self.limit_wait!r}")
        if self.budget is not None and not self.budget > 0:
            raise ConfigError(f"budget must be a positive number of dollars, not {self.budget}")

    def handoff_policy(self) -> HandoffPolicy | None:
        """The effective generations policy: `handoff` with `window` and `handoff_at` filling what it leaves
        open, or None when generations are off."""
        policy = HandoffPolicy() if self.handoff is True else (self.handoff or None)
        if policy is None:
            return None
        window = policy.window if policy.window is not None else self.window
        at = policy.at if policy.at is not None else self.handoff_at
        return replace(policy, window=window, at=at) if (window, at) != (policy.window, policy.at) else policy

    def apply(self, spec: AgentSpec) -> AgentSpec:
        """`spec` under this config's model, fallback model and budget: each model where the spec names none
        (a fallback equal to the model in use is left out: the CLI refuses it), the budget as a cap (the lower
        of the spec's own and this one). `spec` itself is returned when nothing changes."""
        changes: dict[str, Any] = {}
        if self.model is not None and spec.model is None:
            changes["model"] = self.model
        model = changes.get("model", spec.model)
        if self.fallback_model is not None and spec.fallback_model is None and self.fallback_model != model:
            changes["fallback_model"] = self.fallback_model
        own = spec.max_budget_usd
        if self.budget is not None and (own is None or self.budget < own):
            changes["max_budget_usd"] = self.budget
        return replace(spec, **changes) if changes else spec

    def to_dict(self, *, local: bool = True) -> dict[str, Any]:
        """Plain JSON data; `local=False` leaves out what belongs to the machine (`env`). A setting that is
        not plain data raises one `ConfigError` line naming it."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name in _MACHINE and not local:
                continue
            out[f.name] = _plain(f.name, getattr(self, f.name))
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RuntimeConfig:
        """The config `to_dict` gave; a missing key takes its default, an unknown one is a `ConfigError`."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown runtime setting {unknown[0]!r} (known: {', '.join(sorted(known))})")
        values = dict(data)
        for name, policy in _POLICIES.items():
            if isinstance(values.get(name), Mapping):
                try:
                    values[name] = policy(**values[name])
                except TypeError as exc:
                    raise ConfigError(f"runtime setting {name}: {exc}") from None
        return cls(**values)


_MACHINE = ("env",)
"""Fields that belong to the machine a runtime runs on, not to the run."""
_POLICIES: dict[str, type] = {
    "trim": TrimPolicy, "ephemeral": EphemeralPolicy, "handoff": HandoffPolicy, "refresh": RefreshPolicy,
    "resilience": RetryPolicy,
}


class RuntimeOptions(TypedDict, total=False):
    """The keywords `Runtime(...)` takes besides its config: one per `RuntimeConfig` field."""

    run_dir: str | os.PathLike[str]
    workbench: bool | Workbench
    spill_threshold: int | None
    trim: bool | TrimPolicy
    ephemeral: bool | EphemeralPolicy
    keep_denials: int
    handoff: bool | HandoffPolicy
    window: int | None
    handoff_at: int | None
    refresh: bool | RefreshPolicy
    resilience: bool | RetryPolicy
    limit_wait: float
    portable: bool
    placement: Placement
    env: Mapping[str, str] | None
    project: str | None
    model: str | None
    fallback_model: str | None
    budget: float | None
    otlp: str | None


def _plain(name: str, value: Any) -> Any:
    """`value` as JSON data (a policy as its fields), or a `ConfigError` naming the setting."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(f"{name}.{k}", v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(f"{name}[{i}]", v) for i, v in enumerate(value)]
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(f"{name}.{f.name}", getattr(value, f.name)) for f in fields(value)}
    what = "a callable" if callable(value) else f"a {type(value).__name__} object"
    raise ConfigError(f"setting {name} cannot travel to another process: it is {what}, not plain data")


# --- resolving: flag > environment > config file > default ----------------------------------------


@dataclass(frozen=True)
class Setting:
    """A setting the command line, the environment and the config file can give."""

    name: str
    """The key in the config file (and the `RuntimeConfig` field, for runtime settings)."""
    env: str | None
    """The environment variable that sets it."""
    kind: type
    help: str


SETTINGS: tuple[Setting, ...] = (
    Setting("workspace", "FLOWER_WORKSPACE", str, "the agent's working directory"),
    Setting("run_dir", "FLOWER_RUN_DIR", str, "where manifest.json and sessions.db live"),
    Setting("store", "FLOWER_STORE", str, "session store: a postgresql:// DSN or a SQLite file"),
    Setting("model", "FLOWER_MODEL", str, "model id or alias for run and once"),
    Setting("fallback_model", "FLOWER_FALLBACK_MODEL", str,
            "model run and once switch to when the model is overloaded or unavailable"),
    Setting("budget", "FLOWER_BUDGET", float, "spend cap in dollars of each query of run and once"),
    Setting("window", "FLOWER_WINDOW", int, "context window in tokens (handoff threshold, report)"),
    Setting("handoff_at", "FLOWER_HANDOFF_AT", int,
            "hand off once the main context reaches this many tokens, whatever the window (cost-driven)"),
    Setting("limit_wait", "FLOWER_LIMIT_WAIT", float,
            "seconds a step may wait for a subscription's usage limit to reset (0: fail at once)"),
    Setting("trim", "FLOWER_TRIM", bool, "trim large old tool results on resume"),
    Setting("spill_threshold", "FLOWER_SPILL_THRESHOLD", int,
            "tool outputs longer than this many chars are spilled to the workbench"),
    Setting("otlp", "FLOWER_OTLP", str, "OTLP/HTTP collector URL for tracing"),
)
_BY_NAME = {s.name: s for s in SETTINGS}
_WHERE = {"workspace": ".", "store": None}
"""Settings that name the run's place rather than configure the runtime, with their defaults."""
_TOKENS = {"window": "200000 or 200k", "handoff_at": "40000 or 40k"}
"""Token counts (`200k`, `1m` and `200_000` are accepted), with the example an error gives."""


UNTRUSTED: dict[str, str] = {
    "workspace": "where the agents work",
    "run_dir": "where the run's state is written",
    "store": "where sessions are written",
    "otlp": "where traces are sent",
}
"""Settings that choose where data goes or what runs: a config file inside the workspace came with the
repository, not from the user, so its value for one of these is ignored. A later setting of that kind
is added here."""
TRUST_ENV = "FLOWER_TRUST_CONFIG"
"""Set to 1 to let a config file inside the workspace set the settings of `UNTRUSTED` too."""


@dataclass(frozen=True)
class Resolved:
    """The outcome of `resolve_config`: the config, the run's place, and each setting's source."""

    config: RuntimeConfig
    workspace: str
    store: str | None
    sources: Mapping[str, str]
    """Setting name -> `flag`, `env NAME`, the config file's path, or `default`."""
    file: Path | None
    """The config file read, if any."""
    ignored: tuple[Ignored, ...] = ()
    """The file's settings left out because the file lies inside the workspace (flag and env ones included:
    they win anyway, but the file still tried)."""

    def value(self, name: str) -> Any:
        return getattr(self, name) if name in _WHERE else getattr(self.config, name)

    def rows(self) -> list[dict[str, Any]]:
        """What `flower config` prints: each setting's value, source, variable and help."""
        return [{"name": s.name, "value": self.value(s.name), "source": self.sources[s.name], "env": s.env,
                 "help": s.help} for s in SETTINGS]


def resolve_config(
    flags: Mapping[str, Any] | None = None, *, env: Mapping[str, str] | None = None, start: Path | None = None,
) -> Resolved:
    """Each setting from its flag (None counts as not given), else its environment variable (`env`, default
    the process's), else the config file found from `start` (default: the current directory), else its
    default; a bad value is one `ConfigError` line naming where it came from."""
    flags = flags or {}
    unknown = sorted(set(flags) - set(_BY_NAME))
    if unknown:
        raise ConfigError(f"unknown flower setting {unknown[0]!r} (known: {', '.join(_BY_NAME)})")
    env = os.environ if env is None else env
    path, values, ignored = trusted_config(start, env=env, workspace=flags.get("workspace"))
    chosen: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for s in SETTINGS:
        if flags.get(s.name) is not None:
            chosen[s.name], sources[s.name] = _parse(s, flags[s.name], f"--{s.name.replace('_', '-')}"), "flag"
        elif s.env and env.get(s.env):
            chosen[s.name], sources[s.name] = _parse(s, env[s.env], s.env), f"env {s.env}"
        elif s.name in values:
            chosen[s.name], sources[s.name] = _parse(s, values[s.name], f"{path}: {s.name}"), str(path)
        else:
            sources[s.name] = "default"
    where = {name: chosen.pop(name, default) for name, default in _WHERE.items()}
    return Resolved(RuntimeConfig(**chosen), workspace=str(where["workspace"]), store=where["store"],
                    sources=sources, file=path, ignored=ignored)


def _parse(setting: Setting, raw: Any, where: str) -> Any:
    """A setting's value from a flag, a variable's text or the file's TOML value, checked."""
    if setting.name in _TOKENS:
        return parse_tokens(raw, where, _TOKENS[setting.name])
    if setting.kind is bool:
        if isinstance(raw, str):
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if isinstance(raw, bool):
            return raw
        raise ConfigError(f"{where} must be true or false, not {raw!r}")
    if setting.kind in (int, float):
        try:
            number = setting.kind(raw.replace("_", "")) if isinstance(raw, str) else raw
        except ValueError:
            number = None
        if isinstance(number, bool) or not isinstance(number, (int, float) if setting.kind is float else int):
            what = "a whole number" if setting.kind is int else "a number"
            raise ConfigError(f"{where} must be {what}, not {raw!r}")
        if setting.name == "limit_wait" and not number >= 0:
            raise ConfigError(f"{where} must be a number of seconds of at least 0, not {raw!r}")
        if setting.name == "budget":
            if not number > 0:  # `not >` refuses nan too
                raise ConfigError(f"{where} must be a positive number of dollars, not {raw!r}")
            return float(number)
        return number
    if not isinstance(raw, str):
        raise ConfigError(f"{where} must be a string, not {raw!r}")
    return raw


def parse_tokens(raw: Any, where: str, example: str = "200000 or 200k") -> int:
    """A positive token count: an int, or text like `200000`, `200k`, `1m`, `200_000`."""
    if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
        return raw
    text = raw.strip().lower().replace("_", "") if isinstance(raw, str) else ""
    match = re.fullmatch(r"(\d+)(k|m)?", text)
    if not match or int(match.group(1)) <= 0:
        raise ConfigError(f"{where} must be a token count like {example}, not {raw!r}")
    return int(match.group(1)) * {"k": 1_000, "m": 1_000_000}.get(match.group(2) or "", 1)


# --- the config file ------------------------------------------------------------------------------


def find_config(start: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The nearest config file from `start` (default: the current directory) up, and its flower table."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for name in ("flower.toml", "pyproject.toml"):
            path = folder / name
            if not path.is_file():
                continue
            data = _read(path)
            tool = data.get("tool", {})
            if not isinstance(tool, dict):
                raise ConfigError(f"{path}: [tool] must be a table, not {type(tool).__name__}")
            table = data if name == "flower.toml" else tool.get("flower")
            if isinstance(table, dict):
                return path, table
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data: dict[str, Any] = tomllib.load(handle)
            return data
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None


def load_config(start: Path | None = None) -> tuple[Path | None, dict[str, Any]]:
    """The config file's checked values by setting name ({} without a file)."""
    found = find_config(start)
    if found is None:
        return None, {}
    path, table = found
    values: dict[str, Any] = {}
    for key, value in table.items():
        setting, checked = _file_value(path, key, value)
        values[setting.name] = checked
    return path, values


def _file_value(path: Path, key: str, value: Any) -> tuple[Setting, Any]:
    """One key of the config file: its setting and its checked value."""
    setting = _BY_NAME.get(key.replace("-", "_"))
    if setting is None:
        raise ConfigError(f"{path}: unknown flower setting {key!r} (known: {', '.join(_BY_NAME)})")
    if isinstance(value, str) and setting.kind is not str:
        return setting, _file_text(setting, value, path, key)
    return setting, _parse(setting, value, f"{path}: {key}")


def config_problems(start: Path | None = None, *, env: Mapping[str, str] | None = None) -> list[str]:
    """Every bad setting of the config file found from `start` and of the environment, one line each (what
    `resolve_config` would stop at, all of them); [] when every setting is valid."""
    env = os.environ if env is None else env
    problems: list[str] = []
    try:
        found = find_config(start)
    except ConfigError as exc:
        found, problems = None, [str(exc)]
    if found is not None:
        path, table = found
        for key, value in table.items():
            try:
                _file_value(path, key, value)
            except ConfigError as exc:
                problems.append(str(exc))
    for setting in SETTINGS:
        try:
            if setting.env and env.get(setting.env):
                _parse(setting, env[setting.env], setting.env)
        except ConfigError as exc:
            problems.append(str(exc))
    return problems


def trusted_config(
    start: Path | None = None, *, env: Mapping[str, str] | None = None, workspace: str | None = None,
) -> tuple[Path | None, dict[str, Any], tuple[Ignored, ...]]:
    """`load_config` without the `UNTRUSTED` settings of a file that lies inside the workspace, and those
    left out (see `flower.runtime.trust.inside_workspace` for what counts as inside)."""
    env = os.environ if env is None else env
    path, values = load_config(start)
    if path is None or env.get(TRUST_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return path, values, ()
    own = values.get("workspace")
    given = workspace or env.get("FLOWER_WORKSPACE") or None
    if not inside_workspace(path, start or Path.cwd(), given, own if isinstance(own, str) else None):
        return path, values, ()
    ignored = tuple(Ignored(name, path, f"--{name.replace('_', '-')}", _BY_NAME[name].env or "", what, TRUST_ENV)
                    for name, what in UNTRUSTED.items() if name in values)
    return path, {k: v for k, v in values.items() if k not in UNTRUSTED}, ignored


def _file_text(setting: Setting, value: str, path: Path, key: str) -> Any:
    """A string in the file where a number or a flag belongs: only a token count may be written so."""
    if setting.name in _TOKENS:
        return parse_tokens(value, f"{path}: {key}", _TOKENS[setting.name])
    kind = {bool: "true or false", int: "a whole number", float: "a number"}[setting.kind]
    raise ConfigError(f"{path}: {key} must be {kind}, not {value!r}")

