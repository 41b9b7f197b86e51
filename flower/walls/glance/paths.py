"""What a glance's words may name: no endless device, no pipe, no network peer (S-9, issue #16).

Concept. A glance reads files, and some "files" never end (`/dev/zero`, `/dev/urandom`), block forever
(`/dev/stdin`, `/dev/tty`, a FIFO, `/proc/self/fd/0`) or open a connection (gawk's `/inet/...`). Two
checks close that class:

- `device_word(value, literal)`, lexical and pure, runs inside the glance predicate on every word of
  every command and every redirection target, in any position (operand, `--opt=VALUE`, `-fVALUE`): a
  path through `/dev` or `/proc` is refused, except `/dev/null` and a few plain `/proc` reports; a glob
  that could match one is refused too.
- `root_word(value)`: a reader may not start from `/` (recursing, it walks /proc and /dev).
- `special_file(path, cwd)` runs in the wall only, where the Bash call's working directory is known:
  a word naming an existing path that resolves to anything but a regular file or a directory (a symlink
  to a device, a FIFO, a socket) is refused.

Network peers: tools that resolve host names send chosen data in DNS queries. `numeric_local(text)`
accepts only a literal loopback or private address, so no name is ever resolved.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import re
import stat
from pathlib import Path

__all__ = ["device_word", "inet_word", "numeric_local", "root_word", "special_file"]

_SAFE_PROC = (
    "cpuinfo meminfo loadavg uptime version stat mounts filesystems partitions swaps diskstats vmstat"
    " cgroups devices"
).split()
_SAFE = re.compile(
    r"/dev/null(?![\w.+-])|/proc/(?:" + "|".join(_SAFE_PROC) + r"|[0-9]+/(?:status|cmdline|limits))(?![\w/.+-])"
)
_DEVICE = re.compile(r"/(?:dev|proc)(?![\w.+-])|/sys/kernel/(?:debug|tracing)(?![\w.+-])")
_INET = re.compile(r"/inet[46]?(?![\w.+-])")
_GLOB = re.compile(r"[*?[]")


def _collapse(value: str) -> str:
    value = re.sub(r"/+", "/", value)
    while True:
        shorter = re.sub(r"/\./|/\.$", "/", value)
        if shorter == value:
            return value
        value = shorter


def inet_word(value: str) -> bool:
    """Whether a word names one of gawk's network special files (`/inet/tcp/...`), bash's `/dev/tcp`, or
    an automounter's `/net/HOST` (looking there mounts HOST, resolving its name)."""
    text = _collapse(value)
    return bool(_INET.search(text) or re.search(r"/dev/(?:tcp|udp)(?![\w.+-])|^/net/", text))


def device_word(value: str, literal: bool = True) -> bool:
    """Whether a word may name a device, a process file descriptor or a gawk network file."""
    text = _collapse(value)
    if _INET.search(text):
        return True
    if _DEVICE.search(_SAFE.sub("", text)):
        return True
    if literal or not _GLOB.search(text):
        return False
    # A glob leaving the working directory may match a device: `/d?v/zero`, `/*/urandom`, `../../*`.
    parts = text.split("/")
    if ".." in parts:
        return True
    if text.startswith("/") and len(parts) > 1:
        first = re.sub(r"\[[^]]*\]", "?", parts[1])
        return any(fnmatch.fnmatchcase(root, first) for root in ("dev", "proc", "inet", "inet4", "inet6"))
    return False


_ABOVE_DEVICES = frozenset(("/", "/sys", "/sys/kernel"))


def root_word(value: str) -> bool:
    """Whether a word names the root directory or a folder above `/sys/kernel/tracing`: a reader recursing
    from it walks /proc, /dev or the trace pipes (`grep -r x /` blocks on /proc/kmsg, `grep -r x /sys`
    on trace_pipe)."""
    if value[:1] == "~":  # bash turns `~/..` into the home folder's parent (`/` for root's `/root`)
        value = os.path.expanduser(value)
        if value[:1] == "~" or ".." in value.split("/"):
            return True  # a home we cannot resolve, or one climbed out of: refuse rather than guess
    text = _collapse(value)
    return text.startswith("/") and os.path.normpath(text) in _ABOVE_DEVICES


def special_file(path: str, cwd: str | os.PathLike[str]) -> bool:
    """Whether `path` (relative to `cwd`) exists and is, or leads to, something other than a regular
    file or directory: a device, FIFO or socket, or anything under /dev or /proc but /dev/null."""
    try:
        full = Path(os.path.expanduser(path)) if path.startswith("~") else Path(cwd) / path
        if not os.path.lexists(full):
            return False
        real = os.path.realpath(full)
        if real == os.devnull:
            return False
        if device_word(real):
            return True
        mode = os.stat(full).st_mode
        return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))
    except (OSError, ValueError):
        return True


def numeric_local(text: str) -> bool:
    """Whether `text` is a literal loopback or private IP address (`127.0.0.1`, `[::1]`, `10.0.0.5`)."""
    text = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    # Not `is_private` alone: it includes benchmark and reserved ranges (198.18/15, 240/4) that are routed
    # to the default gateway, i.e. out of the host.
    return address.is_loopback or any(address in net for net in _LOCAL_NETS if net.version == address.version)


_LOCAL_NETS = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "fc00::/7", "fe80::/10",
))
