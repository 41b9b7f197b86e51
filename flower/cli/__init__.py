"""The `flower` command line: thin click commands over the library, the launcher, the live view, the demo.

Nothing below `flower.cli` is imported by the library: the commands depend on the library's packages,
never the other way round. `flower.cli.app` builds the group from its one list of commands.
"""

from flower.cli.app import cli, main

__all__ = ["cli", "main"]
