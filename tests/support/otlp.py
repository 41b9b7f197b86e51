"""A minimal OTLP/HTTP trace receiver on 127.0.0.1 for the end-to-end tests: it decodes each export request's
spans and counts every connection it accepts (so a test can also show that nothing was sent)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.paths: list[str] = []
        self.connections = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                owner.paths.append(self.path)
                try:
                    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                        ExportTraceServiceRequest,
                    )
                except ImportError:  # the otel extra is absent: still a listener that counts
                    pass
                else:
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    owner.spans.extend(s for r in request.resource_spans for sc in r.scope_spans for s in sc.spans)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        class Counting(ThreadingHTTPServer):
            def verify_request(self, request: Any, client_address: Any) -> bool:
                owner.connections += 1
                return True

        self.server = Counting(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def names(self) -> list[str]:
        return [span.name for span in self.spans]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
