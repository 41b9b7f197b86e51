"""The first thing the Claude Code CLI child runs (POSIX): it puts itself in a session of its own, arranges to
die with flower, records who it is, then becomes the CLI (`exec`, same pid).

Run as `python -I -S _cli_launch.py ARGS...` by the small shell script `flower.runtime.child` hands the SDK
as its `cli_path`; the real CLI is `$FLOWER_CLI_REAL`. It imports nothing of flower or of site-packages
(startup stays a few tens of milliseconds), and `flower.runtime.child` reads process identities with the
same `started` so the two never disagree.

- `setsid()`: the CLI leads its own session and process group, so the terminal's Ctrl-C reaches flower
  alone (flower decides: a cooperative interrupt, or a stop) and flower can end the whole group.
- Linux: `prctl(PR_SET_PDEATHSIG, SIGTERM)`: the kernel signals the CLI the moment flower dies, even by
  SIGKILL, where no handler of flower's can run. SIGTERM rather than SIGKILL because the CLI answers it by
  ending the tool commands it runs in sessions of their own (its Bash) and exiting within a fraction of a
  second; SIGKILL would leave those commands running. The kernel's "parent" is the thread that spawned
  the child: flower spawns it from its event loop's thread, which lives as long as the run.
- The record (JSON, written atomically to `$FLOWER_CLI_RECORD`): pid, process group, start time, host, and
  the parent's pid and start time, so a later flower can tell a CLI orphaned by a dead flower (and check
  it is still that process) from one a live flower runs; and its `CLAUDE_CONFIG_DIR`, where it writes its
  transcript (a store-backed resume's temp folder, which a killed flower leaves behind).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def started(pid: int) -> str | None:
    """The start time of process `pid` as an opaque string (None: no such process). With the pid it names
    one process for as long as the machine runs: a pid reused later has another start time."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except FileNotFoundError:
        return None
    except OSError:  # no /proc (macOS, BSD): ps says when it started, to the second
        found = subprocess.run(["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True,
                               check=False)
        return found.stdout.strip() or None
    fields = stat[stat.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    if fields[0] == "Z":
        return None  # a zombie has ended: it only waits to be reaped
    return fields[19]  # starttime, in clock ticks since boot


def _die_with_parent(parent: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # flower died before the line above: nobody will signal us
        os._exit(1)


def _record(path: str, parent: int, real: str) -> None:
    me = os.getpid()
    record = {"pid": me, "pgid": os.getpgid(0), "start": started(me), "host": socket.gethostname(),
              "parent": parent, "parent_start": started(parent), "cli": real,
              "config": os.environ.get("CLAUDE_CONFIG_DIR")}
    tmp = f"{path}.{me}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
    os.replace(tmp, path)


def main(argv: list[str]) -> None:
    real = os.environ.pop("FLOWER_CLI_REAL")
    record = os.environ.pop("FLOWER_CLI_RECORD", "")
    parent = int(os.environ.pop("FLOWER_CLI_PARENT", "0") or 0) or os.getppid()
    os.setsid()
    _die_with_parent(parent)
    if record:
        try:
            _record(record, parent, real)
        except OSError as exc:  # the CLI still runs; only a later flower cannot end it if this one dies
            print(f"flower: cannot record the CLI process in {record}: {exc}", file=sys.stderr)
    os.execv(real, [real, *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
