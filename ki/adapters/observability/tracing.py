"""OpenTelemetry traces: one span per stage attempt, its gateway, Docling and OpenSearch calls as children.

Off by default, at no cost: nothing is set up unless the standard variables ask for an exporter
(``OTEL_TRACES_EXPORTER`` other than ``none``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; ``OTEL_SDK_DISABLED=true`` wins). Then :func:`configure_from_env`
builds an SDK tracer provider with a batching OTLP/HTTP exporter (``OTEL_SERVICE_NAME``, default ``ki``;
every other ``OTEL_EXPORTER_OTLP_*`` variable as the SDK reads it) and instruments httpx (the gateway,
Docling Serve and OpenSearch clients) and, with ``KI_TRACE_DATABASE=true``, SQLAlchemy (database statements),
so their spans are children of the stage attempt's span. While off, :func:`stage_span` yields None after one
attribute check.

The span of a stage attempt is named ``ki.stage <stage>`` and carries ``ki.stage``, ``ki.source_object_id``,
``ki.attempt``, ``ki.producer_version``, ``ki.outcome`` and, for a failure, ``ki.error_class``. Its trace id
is the attempt's trace id: the agent loop (:mod:`ki.adapters.agents.loop`) takes :func:`current_trace_id` for the
``X-Ki-Trace`` tag of every gateway call of the attempt, so the usage ledger, the gateway's logs and the
trace backend name one id. Spec: insertion-pipeline.md "Agentic stages" (trace ids tagged onto each gateway
call).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ki.config.process import ProcessSettings, TracingSettings, current

_provider: Any = None  # the SDK TracerProvider while tracing is on
_tracer: Any = None
_database = False  # whether SQLAlchemy is instrumented (KI_TRACE_DATABASE)


def configure_from_env(settings: TracingSettings | None = None) -> bool:
    """Turn tracing on when the ``OTEL_*`` variables ask for it (module doc; ``settings`` default: the
    environment's :class:`ki.config.process.TracingSettings`); True when it is on.

    Idempotent: a second call while on changes nothing. Raises: ConfigurationError for an ``OTEL_*`` value
    that does not parse (``OTEL_SDK_DISABLED=maybe``).
    """
    if _provider is not None:
        return True
    settings = settings if settings is not None else TracingSettings()
    if not settings.wanted:
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    use_processor(BatchSpanProcessor(OTLPSpanExporter()), service_name=settings.service_name,
                  database=current(ProcessSettings).trace_database)
    return True


def use_processor(processor: Any, *, engines: Sequence[Any] = (), service_name: str = "ki",
                  database: bool = False) -> None:
    """Turn tracing on with this span processor (an ``opentelemetry.sdk`` one: the OTLP batch processor, or a
    ``SimpleSpanProcessor(InMemorySpanExporter())`` in tests) and instrument httpx; with ``database``
    (``KI_TRACE_DATABASE=true``) also SQLAlchemy: every engine created from now on, and ``engines`` already open.

    A span per database statement is off by default: measured with bench/claims.py (no-op handlers, 1,000
    documents), statement spans halved the executions per second, while the stage and HTTP spans alone cost
    a few percent."""
    global _provider, _tracer, _database
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(processor)
    shutdown()
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)
    if database:
        SQLAlchemyInstrumentor().instrument(tracer_provider=provider, enable_commenter=False, skip_dep_check=True,
                                            **({"engines": list(engines)} if engines else {}))
    _provider, _tracer, _database = provider, provider.get_tracer("ki"), database


def shutdown() -> None:
    """Flush and turn tracing off (uninstrumenting httpx and SQLAlchemy); nothing when it is off."""
    global _provider, _tracer, _database
    if _provider is None:
        return
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

    HTTPXClientInstrumentor().uninstrument()
    if _database:
        SQLAlchemyInstrumentor().uninstrument()
    _provider.shutdown()
    _provider = _tracer = None
    _database = False


def enabled() -> bool:
    """Whether spans are being recorded."""
    return _tracer is not None


@contextmanager
def stage_span(stage: str, source_object_id: int, attempt: int, producer_version: str | None) -> Iterator[Any]:
    """The span of one stage attempt (current while the handler runs), or None while tracing is off."""
    if _tracer is None:
        yield None
        return
    attributes = {"ki.stage": stage, "ki.source_object_id": source_object_id, "ki.attempt": attempt,
                  "ki.producer_version": producer_version or ""}
    with _tracer.start_as_current_span(f"ki.stage {stage}", attributes=attributes) as span:
        yield span


def set_outcome(span: Any, outcome: str, error_class: str | None) -> None:
    """Record a stage attempt's outcome (an ``ExecutionResult`` kind) on its span (None: tracing off)."""
    if span is None:
        return
    from opentelemetry import trace

    span.set_attribute("ki.outcome", outcome)
    if error_class:
        span.set_attribute("ki.error_class", error_class)
        if outcome in ("retry", "quarantined"):
            span.set_status(trace.Status(trace.StatusCode.ERROR, error_class))


def current_trace_id() -> str | None:
    """The current span's trace id as 32 lower-case hex digits (the ``X-Ki-Trace`` form), or None."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None
