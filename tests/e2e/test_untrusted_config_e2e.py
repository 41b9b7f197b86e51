"""A repository's own flower.toml cannot choose where data goes (issue #30): through the real CLI and SDK
against the scripted API, a workspace whose flower.toml sends traces and the session store to listeners
the test runs and puts the run dir outside the workspace gets none of it; `FLOWER_TRUST_CONFIG=1` (the
user's explicit word) restores the file's settings, which shows the listener would have been reached."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from flower.cli import cli
from flower.flow import engine
from flower.testing import ScriptedAPI, text
from tests.support.otlp import OtlpReceiver

pytestmark = [pytest.mark.e2e]

SPEC = """\
from flower import AgentSpec

lead = AgentSpec(name="lead", instructions="You answer.", allowed_tools=["Read"])
"""
CLEAN = {"FLOWER_RUN_DIR": None, "FLOWER_OTLP": None, "FLOWER_STORE": None, "FLOWER_WORKSPACE": None,
         "FLOWER_TRUST_CONFIG": None}


class Silent:
    """A TCP listener on 127.0.0.1 that counts connections and closes them (a stand-in PostgreSQL)."""

    def __init__(self) -> None:
        self.connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            client.close()

    def stop(self) -> None:
        self.sock.close()


@pytest.fixture
def listeners() -> Iterator[tuple[OtlpReceiver, Silent]]:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    pair = OtlpReceiver(), Silent()
    yield pair
    pair[0].stop()
    pair[1].stop()


@pytest.fixture(autouse=True)
def fresh_engine() -> Iterator[None]:
    yield
    if engine.current() is not None:
        engine.destroy()


def _run(scripted_api: ScriptedAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str,
         **env: str) -> tuple[Path, Result]:
    (tmp_path / "targets.py").write_text(SPEC)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "flower.toml").write_text(toml)
    monkeypatch.chdir(ws)  # `flower run` from the checkout, as a user would
    scripted_api.script([text("answered")])
    result = CliRunner().invoke(cli, ["run", f"{tmp_path / 'targets.py'}:lead", "-p", "hi"],
                                env={**scripted_api.cli_env(tmp_path / "home"), **CLEAN, **env},
                                catch_exceptions=False)
    return ws, result


def test_a_workspace_flower_toml_cannot_send_traces_or_move_the_run_dir(
    scripted_api: ScriptedAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listeners: tuple[OtlpReceiver, Silent],
) -> None:
    traces, postgres = listeners
    outside = tmp_path / "outside"
    toml = (f'otlp = "{traces.url}"\nrun_dir = "{outside}"\n'
            f'store = "postgresql://flower@127.0.0.1:{postgres.port}/flower"\nspill_threshold = 1234\n')
    ws, result = _run(scripted_api, tmp_path, monkeypatch, toml)
    assert result.exit_code == 0, result.output
    assert traces.connections == 0 and postgres.connections == 0
    assert not outside.exists() and (ws / "runs" / "manifest.json").is_file()
    notes = [line for line in result.stderr.splitlines() if line.startswith("flower: ignored: ")]
    assert [n.split()[2] for n in notes] == ["run_dir", "store", "otlp"], result.stderr
    assert all(f"from {ws / 'flower.toml'}" in n for n in notes)
    assert "Traceback" not in result.output and len(scripted_api.requests) == 1


def test_the_user_can_trust_the_file_explicitly(
    scripted_api: ScriptedAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listeners: tuple[OtlpReceiver, Silent],
) -> None:
    traces, _ = listeners
    outside = tmp_path / "outside"
    ws, result = _run(scripted_api, tmp_path, monkeypatch, f'otlp = "{traces.url}"\nrun_dir = "{outside}"\n',
                      FLOWER_TRUST_CONFIG="1")
    assert result.exit_code == 0, result.output
    assert traces.connections > 0 and (outside / "manifest.json").is_file() and not (ws / "runs").exists()
    assert "ignored" not in result.stderr
