"""Starting a run from the command line: the spec, the credentials, the environment, the live view.

Invariants:
- A spec target is `FILE.py:ATTR` or `module:attr`; whatever the user's code raises while loading becomes one
  `ConfigError` line naming the file or module (the CLI prints it; no traceback).
- A real run refuses to start without credentials, unless ANTHROPIC_BASE_URL points at a local fake API.
- The runtime gets this process's relevant environment explicitly (ANTHROPIC_*, CLAUDE_*, HOME, proxies).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click
from rich.console import Console

from flower.errors import ConfigError, FlowerError
from flower.util.loader import call
from flower.util.loader import load_target as resolve_target

if TYPE_CHECKING:
    from flower.runtime.config import RuntimeConfig
    from flower.runtime.runtime import Runtime

__all__ = [
    "check_credentials", "cli_env", "execute", "load_spec", "read_prompt", "resolve_target", "run_json", "runtime_config",
]

CREDENTIALS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
PROVIDERS = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX")
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_ENV_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "DISABLE_", "FLOWER_")
_ENV_NAMES = frozenset(
    {"HOME", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}
)


# --- loading a spec -------------------------------------------------------------------------------


def load_spec(target: str) -> Any:
    """The `AgentSpec` named by `FILE.py:ATTR` or `module:attr` (or returned by a zero-argument callable)."""
    from flower.agent.spec import AgentSpec

    value, _ = resolve_target(target)
    if not isinstance(value, AgentSpec) and callable(value):
        value = call(value, target, "an AgentSpec")
    if not isinstance(value, AgentSpec):
        raise ConfigError(f"{target} is a {type(value).__name__}, not an AgentSpec")
    return value


# --- running --------------------------------------------------------------------------------------


def check_credentials(env: Mapping[str, str]) -> None:
    """Refuse a run that could only fail at the API: no key or token, and no local fake endpoint."""
    if any(env.get(name) for name in CREDENTIALS):
        return
    if any(env.get(name, "").lower() in ("1", "true") for name in PROVIDERS):
        return
    base = env.get("ANTHROPIC_BASE_URL") or ""
    if urlsplit(base if "//" in base else f"//{base}").hostname in LOCAL_HOSTS:
        return
    raise ConfigError(
        "no credentials: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN "
        "(or point ANTHROPIC_BASE_URL at a local fake API, e.g. flower.testing)"
    )


def cli_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The part of this process's environment the Claude Code CLI needs, passed on explicitly."""
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}


def runtime_config(**flags: Any) -> RuntimeConfig:
    """The runtime's settings for a command: its flags (None: not given) over the environment, the config
    file and the defaults, with this process's environment for the Claude Code CLI."""
    from dataclasses import replace

    from flower.runtime.config import resolve_config

    return replace(resolve_config(flags).config, env=cli_env())


def read_prompt(prompt: str | None) -> str:
    if prompt is None or prompt == "-":
        stream = sys.stdin
        if stream.isatty():
            click.echo("type the prompt, then Ctrl-D:", err=True)
        prompt = stream.read()
    if not prompt.strip():
        raise ConfigError("empty prompt: give --prompt TEXT or pipe it on stdin")
    return prompt


def _summary(result: Any, threshold: int | None, run_dir: Path) -> str:
    from flower.report.text import format_elapsed, format_tokens

    tool_errors = getattr(result, "tool_errors", 0)
    mark = "x failed" if not result.ok else f"! done with {tool_errors} tool errors" if tool_errors else "+ done"
    limit = f"/{format_tokens(threshold)}" if threshold else ""
    line = (
        f"{mark} {result.step} | ${result.cost_usd:.4f} | {result.num_turns} turns | "
        f"{format_elapsed(result.duration)} | context {format_tokens(result.context)}{limit} | "
        f"session {result.session_id or '-'} | run dir {run_dir}"
    )
    samples = getattr(result, "tool_error_samples", ())
    return "\n".join([line, *(f"  tool error: {sample}" for sample in samples)])


def event_json(event: Any) -> str:
    """One event as a JSON line (`--json`)."""
    import json

    return json.dumps({"kind": event.kind, "text": event.text, "tool": event.tool, "payload": dict(event.payload)},
                      default=str, ensure_ascii=False)


class _SessionSeen:
    """Remembers the latest session id the events carried (for the Ctrl-C message)."""

    def __init__(self, resume: str | None) -> None:
        self.session = resume

    def __call__(self, event: Any) -> None:
        found = event.payload.get("session_id") or event.payload.get("retired")
        if event.payload.get("subtype") == "session":
            return  # recorded before its CLI starts: stored only once the CLI's first frame (init) comes
        if isinstance(found, str) and found and event.kind != "handoff":
            self.session = found

    def then(self, callback: Any) -> Any:
        def both(event: Any) -> None:
            self(event)
            callback(event)

        return both


def interrupted_message(session: str | None, again: str) -> str:
    """What Ctrl-C prints: the stored session and the command that resumes it."""
    if not session:
        return "interrupted before the first session started; nothing to resume"
    return (f"interrupted: session {session} is stored; resume it with\n"
            f"  {again} --resume {session[:8]}")


def _stored_session(runtime: Runtime, resume: str | None) -> str | None:
    """The stored session `resume` names: its full id, or a unique prefix of one; one line when none or many."""
    from flower.report.rundata import resolve_session

    find = getattr(runtime.store, "find_session", None)
    if resume and callable(find) and find(resume) is None:
        try:  # a unique prefix of a stored session id names it
            return resolve_session(runtime.store, resume, runtime.run_dir, runtime.workspace)
        except ConfigError as exc:
            if "ambiguous" in str(exc):
                raise
            raise ConfigError(f"unknown session {resume}: nothing to resume") from None
    return resume


def run_json(run_id: str, results: Any, *, state: str, run_dir: Path, error: str | None = None) -> str:
    """`--json`: the whole outcome as one JSON object, for a script: the run, its state, the final text (the
    last step's, never cut) and its typed output, cost, tokens and session ids, and each step's own."""
    import json

    results = list(results)
    usage: dict[str, int] = {}
    for one in results:
        for key, value in (getattr(one, "usage", None) or {}).items():
            usage[key] = usage.get(key, 0) + int(value)
    sessions = [s for one in results for s in (*one.retired, one.session_id) if s]
    return json.dumps({
        "run_id": run_id, "state": state, "ok": state == "finished", "error": error,
        "text": results[-1].text if results else "", "output": results[-1].to_dict()["output"] if results else None,
        "cost_usd": round(sum(r.cost_usd for r in results), 6),
        "usage": usage, "session_ids": list(dict.fromkeys(sessions)), "run_dir": str(run_dir),
        "steps": [one.to_dict() for one in results],
    }, default=str, ensure_ascii=False)


def execute(
    spec: Any, prompt: str, *, workspace: str, run_dir: str, store: str | None, resume: str | None,
    otlp: str | None = None, as_json: bool = False, events: bool = False, again: str = "flower run",
) -> None:
    """Run one step with the live view, one JSON object (`as_json`) or JSON lines (`events`). `again` is the
    command line that resumes it, for the message a Ctrl-C prints."""
    import dataclasses
    import json

    from flower.runtime.runtime import Runtime
    from flower.stores.opening import close_store, open_store

    check_credentials(os.environ)
    base = open_store(store, None, create=True) if store else None
    # the command already put the models and the budget into the spec
    config = dataclasses.replace(runtime_config(run_dir=run_dir, otlp=otlp), model=None, fallback_model=None,
                                 budget=None)
    runtime = Runtime(workspace, config=config, store=base)
    try:
        resume = _stored_session(runtime, resume)
        threshold = runtime.threshold(spec)
        result, shown = _run_one(runtime, spec, prompt, resume, otlp=otlp, as_json=as_json, events=events,
                                 again=again)
        if as_json:
            click.echo(run_json(runtime.run_id, [result], state="finished" if result.ok else "failed",
                                run_dir=runtime.run_dir, error=result.error))
        elif events:
            click.echo(json.dumps({"kind": "summary", "run_dir": str(runtime.run_dir),
                                   **result.to_dict()}, default=str))
        else:
            click.echo(_summary(result, threshold, runtime.run_dir))
            if not result.ok and result.error and not (shown and shown in result.error):
                click.echo(f"x {result.error}", err=True)  # not shown by the live view yet
    finally:
        close_store(runtime.store)
    if not result.ok:
        if not (as_json or events):  # the live view showed the error and the summary says "x failed": once is enough
            raise SystemExit(1)
        raise FlowerError(f"step {result.step} failed: {result.error or 'no result'}")


def _run_one(runtime: Runtime, spec: Any, prompt: str, resume: str | None, *, otlp: str | None, as_json: bool,
             events: bool, again: str) -> tuple[Any, str]:
    """The step's result, and the error the live view showed (if any)."""
    import anyio

    from flower.cli.live import LiveView, answer_target
    from flower.cli.otel import otlp_tracing

    seen = _SessionSeen(resume)
    try:
        with otlp_tracing(otlp, runtime.run_id, spec.name):
            if as_json or events:
                def print_event(event: Any) -> None:
                    seen(event)
                    if events:
                        click.echo(event_json(event))

                return anyio.run(partial(runtime.run, spec, prompt, resume=resume, on_event=print_event)), ""
            with LiveView(threshold=runtime.threshold(spec), console=Console(highlight=False),
                          answer_to=answer_target(runtime)) as view:
                result = anyio.run(partial(runtime.run, spec, prompt, resume=resume, on_event=seen.then(view.update)))
            return result, getattr(view, "_last_error", None) or ""
    except KeyboardInterrupt:
        click.echo(interrupted_message(seen.session, again), err=True)
        raise SystemExit(130) from None
