"""The `flower` command line: thin click commands over the library, the launcher, the live view, the demo.

Nothing below `flower.cli` is imported by the library: the commands depend on `flower.core`,
`flower.stores` and `flower.report`, never the other way round.
"""

from flower.cli.commands import cli, main

__all__ = ["cli", "main"]
