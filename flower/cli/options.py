"""The options several `flower` commands share, each defined once, with one environment variable each.

A command takes an option from here rather than declaring its own, so `--run-dir` means the same on
`flower run`, `flower runs` and `flower logs`, and `FLOWER_RUN_DIR` sets it on every one of them. A command
may give the help its own words (what the store is *for* differs) and, where it has no fixed default
(`flower go` keeps its state in WORKSPACE/runs), its own default; the flag, its short form, its type and
its environment variable never change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import click

from flower.errors import ConfigError

__all__ = [
    "ENV", "budget", "continue_last", "events_output", "fallback_model", "json_output", "model", "new", "on_workers", "otlp",
    "run_dir", "store", "verbose", "workspace",
]

F = TypeVar("F", bound=Callable[..., Any])


class Decorator(Protocol):
    """What `click.option(...)` gives: a decorator that returns the function it was given."""

    def __call__(self, function: F, /) -> F: ...


ENV: dict[str, str | None] = {
    "workspace": "FLOWER_WORKSPACE",
    "run_dir": "FLOWER_RUN_DIR",
    "store": "FLOWER_STORE",
    "model": "FLOWER_MODEL",
    "fallback_model": "FLOWER_FALLBACK_MODEL",
    "budget": "FLOWER_BUDGET",
    "as_json": None,
    "events": None,
    "continue_": None,
    "new": None,
    "otlp": "FLOWER_OTLP",
    "verbose": None,
    "on_workers": None,
}
"""Each shared option's parameter name and the environment variable that sets it (None: the flag only)."""


def workspace(*, default: str | None = ".", help: str = "The agents' working directory.") -> Decorator:
    return click.option("--workspace", "-w", envvar=ENV["workspace"], show_envvar=True, default=default,
                        show_default=default is not None, metavar="DIR", type=click.Path(file_okay=False),
                        help=help)


def run_dir(*, default: str | None = "runs",
            help: str = "Where the manifest, sessions.db and dbos.sqlite live.") -> Decorator:
    return click.option("--run-dir", "-r", envvar=ENV["run_dir"], show_envvar=True, default=default,
                        show_default=default is not None, metavar="DIR", type=click.Path(file_okay=False),
                        help=help)


def store(*, required: bool = False, metavar: str = "DSN|PATH",
          help: str = "Session store: a postgresql:// DSN or a SQLite file (default RUN_DIR/sessions.db).",
          ) -> Decorator:
    return click.option("--store", envvar=ENV["store"], show_envvar=True, default=None, required=required,
                        metavar=metavar, help=help)


def model(*, help: str = "Model id or alias, over the spec's.") -> Decorator:
    return click.option("--model", "-m", envvar=ENV["model"], show_envvar=True, default=None, metavar="MODEL",
                        help=help)


def fallback_model(*, help: str = "Model to switch to when the model is overloaded or unavailable, over the "
                                   "spec's.") -> Decorator:
    return click.option("--fallback-model", envvar=ENV["fallback_model"], show_envvar=True, default=None,
                        metavar="MODEL", help=help)


def _positive(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not ctx.resilient_parsing and not value > 0:  # `not >` refuses nan too
        raise ConfigError(f"--budget must be positive, not {value}")
    return value


def budget(*, help: str = "Spend cap in dollars of each query (its max_budget_usd).", per_query: bool = True) -> Decorator:
    """`--budget USD`; FLOWER_BUDGET sets it only where it means a per-query cap (`flower go`'s whole-run
    budget is another setting and reads no variable)."""
    return click.option("--budget", envvar=ENV["budget"] if per_query else None, show_envvar=per_query, type=float,
                        default=None, metavar="USD", callback=_positive, help=help)


def json_output(*, help: str = "Print JSON instead of tables.") -> Decorator:
    return click.option("--json", "as_json", is_flag=True, help=help)


def events_output(*, help: str = "Print every event as one JSON line, then each step's whole result.") -> Decorator:
    return click.option("--events", is_flag=True, help=help)


def continue_last(*, help: str = "Continue the last session this agent had in this workspace and run dir.",
                  ) -> Decorator:
    return click.option("--continue", "-c", "continue_", is_flag=True, help=help)


def new(*, help: str = "Start a fresh run, even when this workflow's last run here is unfinished or has ended.",
        ) -> Decorator:
    return click.option("--new", is_flag=True, help=help)


def _endpoint(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value and not ctx.resilient_parsing:
        from flower.cli.otel import otlp_endpoint

        otlp_endpoint(value)  # a bad URL is refused before anything runs
    return value or None


def otlp(*, help: str = "Send OpenTelemetry spans to this OTLP/HTTP collector (needs the otel extra).") -> Decorator:
    return click.option("--otlp", envvar=ENV["otlp"], show_envvar=True, default=None, metavar="URL",
                        callback=_endpoint, help=help)


def verbose(*, help: str = "Show DBOS's own log lines.") -> Decorator:
    return click.option("--verbose", "-v", is_flag=True, help=help)


def on_workers(*, help: str = "Leave the parallel steps (parallel(...), over=) to `flower worker` processes: "
                              "this process takes none of them (needs a PostgreSQL --store).") -> Decorator:
    return click.option("--on-workers", "on_workers", is_flag=True, help=help)
