"""End-to-end helpers: the real bundled CLI through the real SDK, against flower.testing."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions

from flower.testing import ScriptedAPI
from tests.support.browser import find_chromium
from tests.support.fleet import fleet_database

pytestmark = pytest.mark.e2e


@pytest.fixture
def database() -> Iterator[str]:
    """A fresh PostgreSQL database of its own for a fleet test (its DSN), dropped afterwards."""
    with fleet_database() as dsn:
        yield dsn


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def make_options(scripted_api: ScriptedAPI, tmp_path: Path, workspace: Path):  # type: ignore[no-untyped-def]
    """Build options for a portable CLI run against the scripted API (extra env merged over it)."""

    def build(env: dict[str, str] | None = None, **kwargs: Any) -> ClaudeAgentOptions:
        base_env = scripted_api.cli_env(tmp_path / "home", **(env or {}))
        kwargs.setdefault("cwd", str(workspace))
        kwargs.setdefault("setting_sources", [])
        return ClaudeAgentOptions(env=base_env, **kwargs)

    return build


# --- a page served over HTTPS on 127.0.0.1, for WebFetch -----------------------------------------------

PAGE = "<html><body>" + "".join(f"<p>Paragraph {i}: plain words.</p>" for i in range(200)) + "</body></html>"


@pytest.fixture
def https_page(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A page served over HTTPS on 127.0.0.1 with a throwaway self-signed certificate.

    The CLI's WebFetch upgrades http:// to https:// and checks the domain with claude.ai first; the test
    skips that check (`skipWebFetchPreflight`) and trusts the certificate (`NODE_EXTRA_CA_CERTS`), so the
    real WebFetch code path runs against a local server and nothing leaves the machine.
    """
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1"],
        check=True, capture_output=True,
    )

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            data = PAGE.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/page", cert
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def chromium() -> str:
    """Headless Chromium for the HTML report tests (a skip without it, a failure in CI)."""
    return find_chromium()
