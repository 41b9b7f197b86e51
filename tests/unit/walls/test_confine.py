"""The confinement's pure parts: the seccomp program and the kill deadline (the sandbox itself is tested
through the real CLI in tests/e2e/test_confinement_e2e.py)."""

from __future__ import annotations

import struct

import pytest

from flower.walls import confine


def _rows(program: bytes) -> list[tuple[int, int, int, int]]:
    return [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]


def _verdict(program: bytes, arch: int, nr: int, family: int = 0) -> int:
    """Run the classic BPF program on one seccomp_data (a tiny interpreter of the four opcodes it uses)."""
    data = struct.pack("=IIQ6Q", nr, arch, 0, family, 0, 0, 0, 0, 0)
    rows, pc, acc = _rows(program), 0, 0
    while True:
        code, jt, jf, k = rows[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif code in (0x15, 0x35):
            taken = acc == k if code == 0x15 else acc >= k
            pc += jt if taken else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unknown opcode {code:#x}")
        pc += 1


@pytest.mark.parametrize(("machine", "arch", "socket_nr"), [("x86_64", 0xC000003E, 41), ("aarch64", 0xC00000B7, 198)])
def test_the_filter_refuses_unix_sockets_io_uring_and_foreign_calls_only(machine: str, arch: int, socket_nr: int) -> None:
    program = confine.seccomp_program(machine)
    assert program is not None
    allow, eperm = 0x7FFF0000, 0x00050001
    assert _verdict(program, arch, socket_nr, family=1) == eperm  # AF_UNIX
    assert _verdict(program, arch, socket_nr, family=2) == allow  # AF_INET: the empty network namespace's
    assert _verdict(program, arch, 425) == eperm  # io_uring_setup
    assert _verdict(program, arch, 0) == allow
    assert _verdict(program, 0x40000003, socket_nr) == eperm  # a 32-bit binary (socketcall)
    if machine == "x86_64":
        assert _verdict(program, arch, 0x40000000 + 41, family=2) == eperm  # x32


def test_no_filter_where_the_numbers_are_unknown() -> None:
    assert confine.seccomp_program("riscv64") is None


@pytest.mark.parametrize(("timeout_ms", "seconds"), [(120_000, 115.0), (4000, 3.0), (100, 0.8)])
def test_a_confined_command_ends_before_the_bash_timeout(timeout_ms: int, seconds: float) -> None:
    assert confine.kill_after(timeout_ms) == seconds
