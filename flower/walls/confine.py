"""Confinement of the coordinator's own commands by mechanism (the wall in depth).

Concept. The glance judge (`flower.walls.glance.judge`) reads a command and decides whether it is a
read-only look; a judge of arbitrary programs can be wrong. So whatever the judge lets the main thread (or a
lead) run is also run confined, where even a wrongly allowed command cannot act: the wall hands the CLI the
command wrapped in bubblewrap (through the hook's `updatedInput`; the transcript keeps the model's own
command, so the judge still decides what expires). Inside: the whole filesystem read-only, a fresh `/dev`
(null, zero, random, tty), a fresh `/proc` of its own PID namespace, no network namespace but its own
loopback (no DNS either), no Unix sockets (a seccomp filter refuses `socket(AF_UNIX, ...)`, so a socket
anywhere on disk, `/tmp` included, cannot be reached; the usual socket folders `/run`, `/dev/shm`, X11's are
empty as well), no io_uring, no capabilities, a new session (no terminal to push keys into); CPU time, data size, file size (the CLI writes the output to a file, so this
bounds the output too) and core dumps limited by `ulimit`; killed by `timeout` before the Bash tool's own
timeout, so the CLI never moves it to the background; when the sandbox ends, everything in it ends.

Where no mechanism works (no `bwrap`, or the kernel refuses its namespaces), flower says so once and the
wall lets through only glances made of `FALLBACK_PROGRAMS`, a few programs that cannot write, connect or
run another program whatever their arguments (the judge still checks those arguments); it never runs an
unconfined command of any other program.

Invariants.
- `mechanism()` probes once per process by running the sandbox itself; a failed probe means "none".
- `confine(command, ...)` returns a bash command line whose only program run outside the sandbox is
  `timeout` (and `bwrap`); the model's command reaches the sandboxed shell as one quoted word.
- Workers are not confined: the wall never calls this for a subagent's command.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import shlex
import shutil
import struct
import subprocess
import tempfile

__all__ = [
    "CPU_SECONDS",
    "DATA_BYTES",
    "FALLBACK_PROGRAMS",
    "FILE_BYTES",
    "confine",
    "kill_after",
    "mechanism",
    "notice_once",
    "seccomp_program",
]

log = logging.getLogger(__name__)

CPU_SECONDS = 30
"""CPU time a confined command may use (`ulimit -t`)."""
DATA_BYTES = 2 << 30
"""Data segment and private writable mappings of each process (`ulimit -d`); not `-v`: the CLI's own
grep (ugrep inside the CLI's binary) reserves far more address space than it uses."""
FILE_BYTES = 16 << 20
"""Largest file a confined command may write (`ulimit -f`): the CLI sends its output to a file, so this
bounds the output as well."""
FALLBACK_PROGRAMS = frozenset("ls cat head tail wc pwd echo stat du df date true false basename dirname".split())
"""What the main thread may run where no confinement works: programs that only read and print."""

_SOCKET_DIRS = ("/run", "/var/run", "/tmp/.X11-unix", "/dev/shm")
_BASE = (
    "--ro-bind", "/", "/",
    "--dev", "/dev",
    "--proc", "/proc",
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
    "--cap-drop", "ALL",
    "--unsetenv", "BASH_ENV",
    "--unsetenv", "ENV",
)


# Classic BPF for seccomp (linux/filter.h, linux/seccomp.h): what each syscall of the sandbox may do.
_LD_W_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_ALLOW, _EPERM = 0x7FFF0000, 0x00050001
_X32 = 0x40000000
_AF_UNIX = 1
_IO_URING_SETUP = 425
# machine -> (audit arch, socket syscall number); elsewhere no filter is made and the folders' masks remain.
_ARCHES = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198), "arm64": (0xC00000B7, 198)}


def seccomp_program(machine: str) -> bytes | None:
    """The filter for `machine` (as `platform.machine()` names it), or None where its numbers are unknown.

    Any other architecture (a 32-bit binary, whose `socketcall` would dodge the check) and x32 calls get
    EPERM for everything; `io_uring_setup` (its rings make socket calls no filter sees) and `socket` with
    family AF_UNIX get EPERM; everything else is allowed. args[0] is read at its low 32 bits (offset 16),
    both architectures being little-endian.
    """
    if machine not in _ARCHES:
        return None
    arch, socket_nr = _ARCHES[machine]
    rows = [
        (_LD_W_ABS, 0, 0, 4),             # 0: arch
        (_JEQ, 1, 0, arch),                # 1: native -> 3
        (_RET, 0, 0, _EPERM),              # 2
        (_LD_W_ABS, 0, 0, 0),              # 3: syscall number
        (_JGE, 5, 0, _X32),                # 4: x32 -> 10
        (_JEQ, 4, 0, _IO_URING_SETUP),     # 5: -> 10
        (_JEQ, 0, 2, socket_nr),           # 6: socket -> 7, else -> 9
        (_LD_W_ABS, 0, 0, 16),            # 7: its family
        (_JEQ, 1, 0, _AF_UNIX),            # 8: AF_UNIX -> 10
        (_RET, 0, 0, _ALLOW),              # 9
        (_RET, 0, 0, _EPERM),              # 10
    ]
    return b"".join(struct.pack("=HBBI", *row) for row in rows)


@functools.cache
def _filter_folder() -> str:
    return tempfile.mkdtemp(prefix="flower-seccomp-")


def seccomp_file() -> str | None:
    """A file holding this machine's filter (written again if it went away), or None without one."""
    program = seccomp_program(platform.machine())
    if program is None:
        return None
    path = os.path.join(_filter_folder(), "glance.bpf")
    try:
        with open(path, "rb") as existing:
            if existing.read() == program:
                return path
    except OSError:
        pass
    fd, temp = tempfile.mkstemp(dir=_filter_folder(), prefix="glance-", suffix=".tmp")
    with os.fdopen(fd, "wb") as out:  # a fresh, private name: two threads never write one file
        out.write(program)
    os.chmod(temp, 0o400)
    os.replace(temp, path)
    return path


def _filter_args(path: str | None) -> tuple[list[str], str]:
    """bwrap's `--seccomp` option and the shell redirection that opens the filter on its descriptor."""
    return (["--seccomp", "9"], f" 9<{shlex.quote(path)}") if path else ([], "")


@functools.cache
def mechanism() -> str | None:
    """The path of a working `bwrap` on this machine, or None (probed once per process, with the filter)."""
    path = shutil.which("bwrap")
    if path is None:
        return None
    try:
        options, redirect = _filter_args(seccomp_file())
    except OSError:
        return None
    argv = shlex.join([path, *_BASE, *options, "--", "true"]) + redirect
    try:
        probe = subprocess.run(["bash", "-c", argv], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return path if probe.returncode == 0 else None


@functools.cache
def notice_once() -> str | None:
    """Say once per process that this machine has no sandbox for glances; the text said, or None."""
    if mechanism() is not None:
        return None
    text = ("flower: no sandbox for the coordinator's glances on this machine (bubblewrap missing or refused); "
            "its glances are limited to " + ", ".join(sorted(FALLBACK_PROGRAMS)))
    log.warning(text)
    return text


def kill_after(timeout_ms: int) -> float:
    """Seconds after which flower ends a confined command whose Bash call waits `timeout_ms`: a little
    before, so the CLI's own timer never fires (it would move the command to the background)."""
    seconds = max(timeout_ms, 1000) / 1000
    return round(max(0.5, seconds - min(5.0, seconds / 4)), 1)


def _masks() -> list[str]:
    args: list[str] = []
    for folder in _SOCKET_DIRS:
        if os.path.isdir(folder) and not os.path.islink(folder):
            args += ["--tmpfs", folder, "--remount-ro", folder]
    return args


def confine(command: str, *, bwrap: str, cwd: str, timeout_ms: int) -> str:
    """A bash command line that runs `command` in the sandbox, in `cwd`, ended after `kill_after`."""
    limits = (f"ulimit -t {CPU_SECONDS} -d {DATA_BYTES // 1024} -f {FILE_BYTES // 512} -c 0 2>/dev/null "
              "|| exit 126\n")
    seconds = kill_after(timeout_ms)
    options, redirect = _filter_args(seccomp_file())
    sandbox = [bwrap, *_BASE, *options, *_masks(), "--chdir", cwd, "--", "/bin/bash", "-c", limits + command]
    # The CLI's grep, find and rg are shell functions of its snapshot: exported, the sandboxed shell has them.
    return (
        "export -f grep find rg >/dev/null 2>&1; "
        f"timeout -k 2 {seconds} {shlex.join(sandbox)}{redirect}; __flower_rc=$?; "
        f'[ "$__flower_rc" -eq 124 ] && echo "flower: stopped after {seconds}s (a glance is quick)" >&2; '
        '(exit "$__flower_rc")'
    )
