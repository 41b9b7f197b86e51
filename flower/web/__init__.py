"""`flower web`: watch and steer every run of a run dir or store from a browser, live (issue #29).

- `source`: where runs are read from (a run dir or a PostgreSQL store), opened per read.
- `runs`, `detail`: the runs list and one run as plain data, computed by the report's own readers.
- `steer`: answer, mail, cancel, through the mailbox and run functions the CLI commands use.
- `page`, `static/`: the HTML shells and the page's script and style (no build step).
- `guard`: the bind rule, the token, the host and action checks. `app`: the Starlette app. `serve`: uvicorn.
"""

from flower.web.app import create_app
from flower.web.serve import serve
from flower.web.source import Source

__all__ = ["Source", "create_app", "serve"]
