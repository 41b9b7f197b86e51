"""Raw HTTP to flower.testing's scripted API, for the tests that check its answers byte by byte."""

from __future__ import annotations

import http.client
import json
from typing import Any

from flower.testing import ScriptedAPI

USER = {"role": "user", "content": "hi"}


def post(api: ScriptedAPI, body: dict[str, Any], path: str = "/v1/messages",
         headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json", **(headers or {})})
    response = conn.getresponse()
    return response.status, response.read()
