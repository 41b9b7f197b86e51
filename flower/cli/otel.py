"""`--otlp URL`: export a CLI run's spans to an OTLP/HTTP collector (B-14).

Invariants:
- Needs the `otel` extra (the OpenTelemetry SDK and its OTLP exporter); without it, one line says so.
- A URL without a path gets the standard `/v1/traces`.
- The spans are flushed before the command returns, also when the run failed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from urllib.parse import urlsplit

from flower.errors import ConfigError
from flower.runtime import tracing

__all__ = ["otlp_endpoint", "otlp_tracing"]


def otlp_endpoint(url: str) -> str:
    """The traces endpoint of an OTLP/HTTP collector URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"--otlp needs an http(s) URL like http://localhost:4318, not {url!r}")
    return url if parts.path.strip("/") else url.rstrip("/") + "/v1/traces"


@contextlib.contextmanager
def otlp_tracing(url: str | None, run_id: str, name: str) -> Iterator[None]:
    """Send the spans of the block to `url` (nothing happens without a URL), under one run span."""
    if not url:
        with tracing.run_span(run_id, name):
            yield
        return
    endpoint = otlp_endpoint(url)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ConfigError("--otlp needs the otel extra: pip install 'flower-runtime[otel]'") from None
    provider = TracerProvider(resource=Resource.create({"service.name": "flower"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    previous = tracing.set_provider(provider)
    try:
        with tracing.run_span(run_id, name):
            yield
    finally:
        tracing.set_provider(previous)
        provider.shutdown()  # flushes
