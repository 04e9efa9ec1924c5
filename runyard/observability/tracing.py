"""OpenTelemetry tracing of one instance: off unless configured, owned by the runtime.

One trace covers a run end to end: the HTTP request that created it (FastAPI
instrumentation), the queue hop (the W3C `traceparent` is stored in the run's kwargs under
`trace_context` when the run is created, and restored by the worker that claims it), and the
graph's execution (a span around it in the executor). The OpenTelemetry packages are the
optional `tracing` extra; nothing here imports them unless tracing is on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from runyard.domain.run import RunRecord
from runyard.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger("runyard.tracing")

TRACE_CONTEXT_KEY = "trace_context"
# Probes and scrapes would drown the traces that matter.
UNTRACED_URLS = "/ok$,/health$,/livez$,/readyz$,/metrics$"
# The `tracing` extra's packages, named as PyPI has them: Runyard itself is on no index, so a
# hint that names Runyard with its extra would fail wherever Runyard came from.
TRACING_PACKAGES = (
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp",
    "opentelemetry-instrumentation-fastapi",
)
INSTALL_HINT = "pip install " + " ".join(TRACING_PACKAGES)
SHUTDOWN_TIMEOUT = 5.0


class Tracing:
    """The tracer provider (None when tracing is off) and the spans Runyard opens itself."""

    def __init__(self, provider: Any | None = None) -> None:
        self.provider = provider
        self._tracer = provider.get_tracer("runyard") if provider is not None else None

    @property
    def enabled(self) -> bool:
        """True when spans are recorded and exported."""
        return self.provider is not None

    @classmethod
    def from_settings(cls, settings: Settings, instance_id: str) -> Tracing:
        """Build from RUNYARD_TRACING / OTEL_EXPORTER_OTLP_* (off when neither is set)."""
        mode = tracing_mode(settings)
        if mode == "off":
            return cls()
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            if settings.tracing is None:
                # Only an OTEL_* variable asked for it: do not refuse to start over it.
                log.warning("tracing_unavailable reason=missing_packages hint=%s", INSTALL_HINT)
                return cls()
            raise RuntimeError(
                f"RUNYARD_TRACING={mode} needs the OpenTelemetry packages: {INSTALL_HINT}"
            ) from None
        resource = Resource.create(
            {"service.name": settings.otel_service_name, "service.instance.id": instance_id}
        )
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(_exporter(settings, mode)))
        log.info("tracing_enabled exporter=%s", mode)
        return cls(provider)

    def add_span_processor(self, processor: Any) -> None:
        """Send spans to one more processor too (tests use an in-memory exporter)."""
        if self.provider is None:
            raise RuntimeError("tracing is off; set RUNYARD_TRACING")
        self.provider.add_span_processor(processor)

    def instrument(self, app: FastAPI) -> None:
        """Give every HTTP request a server span (no-op when tracing is off)."""
        if self.provider is None:
            return
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(
            app,
            tracer_provider=self.provider,
            excluded_urls=UNTRACED_URLS,
            # One span per SSE chunk would bury the request span of a long stream.
            exclude_spans=["receive", "send"],
        )

    def run_kwargs(self) -> dict[str, Any]:
        """`{"trace_context": {"traceparent": ...}}` for the current span, or {} when none."""
        if self.provider is None:
            return {}
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
        return {TRACE_CONTEXT_KEY: carrier} if carrier else {}

    def run_span(self, run: RunRecord) -> Any:
        """A context manager spanning a claimed run's execution, child of its creator's span."""
        if self._tracer is None:
            return nullcontext()
        return self._run_span(run)

    @contextmanager
    def _run_span(self, run: RunRecord) -> Iterator[Any]:
        from opentelemetry.trace import SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        assert self._tracer is not None
        kwargs = run.kwargs or {}
        carrier = kwargs.get(TRACE_CONTEXT_KEY) if isinstance(kwargs, Mapping) else None
        parent = TraceContextTextMapPropagator().extract(carrier) if carrier else None
        graph_id = str(kwargs.get("graph_id", ""))
        attributes: dict[str, str | int] = {
            "runyard.run_id": run.run_id,
            "runyard.thread_id": run.thread_id,
            "runyard.attempt": run.attempt,
            "runyard.graph_id": graph_id,
        }
        with self._tracer.start_as_current_span(
            f"run {graph_id}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
        ) as span:
            yield span

    def step_span(self, name: str) -> Any:
        """A child span of the current one (claim, finalize), or a no-op."""
        if self._tracer is None:
            return nullcontext()
        return self._tracer.start_as_current_span(name)

    async def shutdown(self) -> None:
        """Flush pending spans and stop the exporter (idempotent, at most a few seconds)."""
        provider, self.provider, self._tracer = self.provider, None, None
        if provider is None:
            return
        # An unreachable collector makes the final flush retry for seconds: off the loop.
        flush = asyncio.create_task(asyncio.to_thread(provider.shutdown), name="tracing-flush")
        done, _ = await asyncio.wait({flush}, timeout=SHUTDOWN_TIMEOUT)
        if not done:
            log.warning("tracing_flush_timeout seconds=%s", SHUTDOWN_TIMEOUT)


def _exporter(settings: Settings, mode: str) -> Any:
    if mode == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if settings.otlp_protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        return GrpcExporter(endpoint=settings.otlp_traces_endpoint or settings.otlp_endpoint)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    # Given explicitly (an .env file is not the process environment), the base endpoint
    # needs the signal path the exporter would otherwise append itself.
    endpoint = settings.otlp_traces_endpoint
    if endpoint is None and settings.otlp_endpoint:
        endpoint = settings.otlp_endpoint.rstrip("/") + "/v1/traces"
    return OTLPSpanExporter(endpoint=endpoint)


def tracing_mode(settings: Settings) -> str:
    """`off`, `otlp` or `console`: RUNYARD_TRACING, else OTLP once an OTLP endpoint is set."""
    if settings.tracing is not None:
        return settings.tracing
    return "otlp" if (settings.otlp_endpoint or settings.otlp_traces_endpoint) else "off"
