"""The `flower` command: thin click commands over the library (grown by later layers)."""

from __future__ import annotations

import click


@click.group()
@click.version_option(package_name="flower-runtime")
def cli() -> None:
    """flower: long Claude agent runs with a clean coordinator context."""


def main() -> None:
    cli()
