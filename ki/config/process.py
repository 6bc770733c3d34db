"""Process-level settings: read from the environment only, never saved (DESIGN.md "Defaults").

The flat variables the spec names stay flat (``KI_WORKERS``, ``KI_INFRASTRUCTURE_RETRY_MAX_SECONDS``,
``KI_HATCHET_*``, ``KI_RUN_*``, ``KI_PROVIDER_FAULT_COOLDOWN_SECONDS``, ...: :class:`ProcessSettings`).
The outside parts' settings are sections of their own, each with the variable prefix it always had:

========================  ===========================  ==========================================
section                   variables                    for
========================  ===========================  ==========================================
``llm``                   ``KI_LLM_*``                 the model gateway (:class:`LlmSettings`)
``ocr``                   ``KI_OCR_*``                 the built-in OCR's threads and lane
``opensearch``            ``KI_OPENSEARCH_*``          the OpenSearch index name and refresh
``hatchet``               ``HATCHET_CLIENT_*``         the Hatchet client (the SDK reads them too)
``server``                ``KI_SERVE_*``               ``ki serve``: host and port
========================  ===========================  ==========================================

An empty variable counts as unset. A value that does not parse or is out of range raises
:class:`ki.core.errors.ConfigurationError` naming the variable (``KI_WORKERS='abc': Input should be a
valid integer ...``). :func:`current` gives a section as the environment holds it now, parsed once
per distinct environment (cheap enough for every stage execution; a test that changes a variable
sees the change).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from ki.config.data_dir import default_data_dir
from ki.core.errors import ConfigurationError

Section = TypeVar("Section", bound="EnvSettings")


class EnvSettings(BaseSettings):
    """Base of every process settings model: environment only (prefix in ``model_config``), empty
    variables unset; a bad value raises :class:`~ki.core.errors.ConfigurationError` naming the variable."""

    model_config = SettingsConfigDict(extra="ignore", env_ignore_empty=True)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigurationError(describe_errors(type(self), exc)) from exc

    @classmethod
    def variable(cls, field: str) -> str:
        """The environment variable of ``field`` (``workers`` → ``KI_WORKERS``)."""
        return f"{cls.model_config.get('env_prefix', '')}{field}".upper()


def describe_errors(model: type[EnvSettings], exc: ValidationError) -> str:
    """One line per invalid value, naming its variable: ``KI_WORKERS='abc': Input should be ...``."""
    parts = []
    for error in exc.errors(include_url=False):
        field = str(error["loc"][0]) if error["loc"] else ""
        where = model.variable(field) if field else model.__name__
        value = error.get("input")
        shown = f"={value!r}" if isinstance(value, str | int | float) else ""
        parts.append(f"{where}{shown}: {error['msg']}")
    return "invalid environment variable " + "; ".join(parts)


class LlmSettings(EnvSettings):
    """The model gateway (DESIGN.md "Defaults"): ``KI_LLM_BASE_URL``, ``KI_LLM_API_KEY``, ``KI_LLM_MODEL``.

    Attributes:
        base_url: the OpenAI-compatible gateway root (with or without ``/v1``); None: no gateway, the
            model stages run their rules policies.
        api_key: sent as a bearer token; never printed.
        model: the default model of every model stage (``pipeline.stages.<stage>.model`` overrides).
    """

    model_config = SettingsConfigDict(env_prefix="KI_LLM_", extra="ignore", env_ignore_empty=True)

    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str | None = None

    @property
    def configured(self) -> bool:
        """Whether a gateway is configured (a non-blank base URL)."""
        return bool(self.base_url and self.base_url.strip())

    def key(self) -> str | None:
        """The API key in clear (for the ``Authorization`` header only), or None."""
        return self.api_key.get_secret_value() if self.api_key else None


class TracingSettings(EnvSettings):
    """OpenTelemetry's standard variables, as far as ki decides on them (:mod:`ki.adapters.observability.tracing`); the
    OTLP exporter reads the rest of ``OTEL_EXPORTER_OTLP_*`` itself.

    Attributes:
        sdk_disabled: ``OTEL_SDK_DISABLED=true`` keeps tracing off whatever else is set.
        traces_exporter: ``OTEL_TRACES_EXPORTER``: ``otlp`` turns tracing on, ``none`` keeps it off.
        exporter_otlp_endpoint / exporter_otlp_traces_endpoint: ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
            ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``: either turns tracing on (unless the exporter is ``none``).
        service_name: ``OTEL_SERVICE_NAME`` (default ``ki``).
    """

    model_config = SettingsConfigDict(env_prefix="OTEL_", extra="ignore", env_ignore_empty=True)

    sdk_disabled: bool = False
    traces_exporter: str | None = None
    exporter_otlp_endpoint: str | None = None
    exporter_otlp_traces_endpoint: str | None = None
    service_name: str = "ki"

    @property
    def wanted(self) -> bool:
        """Whether these settings ask for traces."""
        if self.sdk_disabled:
            return False
        if self.traces_exporter and self.traces_exporter.strip():
            return self.traces_exporter.strip().lower() != "none"
        return bool(self.exporter_otlp_endpoint or self.exporter_otlp_traces_endpoint)


class OcrSettings(EnvSettings):
    """The built-in OCR's process resources (``KI_OCR_*``; what it reads is ``pipeline.ocr.*``).

    Attributes:
        threads: onnxruntime intra-op threads per OCR lane (``KI_OCR_THREADS``, 1: one core per lane).
        concurrency: pages this process OCRs at once (``KI_OCR_CONCURRENCY``, 1).
    """

    model_config = SettingsConfigDict(env_prefix="KI_OCR_", extra="ignore", env_ignore_empty=True)

    threads: int = Field(default=1, ge=1, le=256)
    concurrency: int = Field(default=1, ge=1, le=256)


class WorkerPoolSettings(EnvSettings):
    """Which Hatchet worker pool this ``ki worker`` serves (``KI_WORKER_*``).

    Attributes:
        pool: ``general`` (every task; the default) or ``model`` (model-stage tasks only: the reserve worker a
            general worker starts, or one an operator starts with ``KI_WORKER_POOL=model``).
        pool_slots: the reserve worker's slots, set by the general worker that starts it (None: ``KI_WORKERS``).
    """

    model_config = SettingsConfigDict(env_prefix="KI_WORKER_", extra="ignore", env_ignore_empty=True)

    pool: str = "general"
    pool_slots: int | None = Field(default=None, ge=1, le=4096)


def child_environment(**extra: str) -> dict[str, str]:
    """This process's environment with ``extra`` set: what a ki process it starts (the reserve worker) gets."""
    return {**os.environ, **extra}


def available_cores() -> int:
    """The CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where there is none), ≥ 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - macOS / Windows
        return max(1, os.cpu_count() or 1)


def prefer_sleeping_omp_threads() -> None:
    """Let OpenMP threads (the in-process embedding engine's) sleep while they wait rather than spin:
    ``OMP_WAIT_POLICY=PASSIVE`` unless the environment sets it. Call before the engine loads."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


class OpenSearchSettings(EnvSettings):
    """The OpenSearch index (``KI_OPENSEARCH_*``; the node's URL is ``components.opensearch_url``).

    Attributes:
        index: the index name (``KI_OPENSEARCH_INDEX``); None: ``ki-chunks-<database name>``.
        refresh_interval: the index's refresh interval when ki creates it (``KI_OPENSEARCH_REFRESH_INTERVAL``,
            an OpenSearch time value such as ``250ms``); None: ki's default.
    """

    model_config = SettingsConfigDict(env_prefix="KI_OPENSEARCH_", extra="ignore", env_ignore_empty=True)

    index: str | None = None
    refresh_interval: str | None = None


class HatchetClientSettings(EnvSettings):
    """The Hatchet client's connection (``HATCHET_CLIENT_*``, the SDK's own variables, which it reads itself).

    ki reads them to refuse early without a token and to keep one client per connection.

    Attributes:
        token: the worker/API token (a JWT); None: no engine configured.
        host_port / server_url / namespace / tls_strategy: as the SDK documents them.
    """

    model_config = SettingsConfigDict(env_prefix="HATCHET_CLIENT_", extra="ignore", env_ignore_empty=True)

    token: SecretStr | None = None
    host_port: str | None = None
    server_url: str | None = None
    namespace: str | None = None
    tls_strategy: str | None = None

    def identity(self) -> tuple[str | None, ...]:
        """What tells two connections apart (token, address, REST URL, namespace, TLS strategy)."""
        token = self.token.get_secret_value() if self.token else None
        return (token, self.host_port, self.server_url, self.namespace, self.tls_strategy)


class ServerSettings(EnvSettings):
    """``ki serve`` (``KI_SERVE_*``).

    Attributes:
        host: the address to listen on (``KI_SERVE_HOST``, 127.0.0.1: this machine only).
        port: the TCP port (``KI_SERVE_PORT``, 8470).
    """

    model_config = SettingsConfigDict(env_prefix="KI_SERVE_", extra="ignore", env_ignore_empty=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8470, ge=1, le=65535)


class ProcessSettings(EnvSettings):
    """Process-level settings: the flat ``KI_`` variables, then one section per outside part.

    Attributes (env var = ``KI_`` + upper-case name):
        data_dir: where the embedded database, blobs and saved config live.
        database_url: an external PostgreSQL; unset → the embedded one under ``data_dir``.
        infrastructure_retry_max_seconds: cap of infrastructure backoff (s).
        provider_fault_cooldown_seconds: how long a rejected account or key fails fast without a request,
            for the gateway and Docling Serve alike (s; :mod:`ki.adapters.cooldown`).
        breaker_failures / breaker_probe_seconds / breaker_probe_max_seconds / breaker_connect_probe_seconds:
            the circuit breaker per dependency (:mod:`ki.adapters.breaker`): consecutive infrastructure faults that
            pause the stages needing it (3), the first probe's delay (1 s), doubling up to the cap (10 s),
            and the interval of the TCP connect checks while the dependency's port refuses (2 s).
        run_sweep_seconds / run_silent_minutes / run_abandoned_hours: sweeper.
        hatchet_document_concurrency / relate_model_concurrency / hatchet_sync_concurrency.
        hatchet_trigger_timeout_seconds / hatchet_trigger_retry_seconds: one trigger RPC's deadline, and how long
            a refused or unanswered trigger is retried (backoff with full jitter, capped at 30 s) before its
            caller gives up and the sweeper's early check takes over (:mod:`ki.workflows.pushback`).
        hatchet_trigger_check_seconds: the sweeper's early check of acknowledged DAGs the engine may not know,
            every this many seconds in ``ki worker``, for DAGs silent at least as long (0: off).
        workers: local provider pool size (8: stages wait mostly on commits and I/O, not CPU; bench/insert.py
            measured 32 documents/s with 4 and 58 with 8 on 2 cores).
        worker_slots: concurrent tasks of one ``ki worker`` process (Hatchet slots; ``--slots``).
        worker_cpu_slots: of those, CPU-bound stage tasks (convert; index when it embeds in-process) running at
            once (``KI_WORKER_CPU_SLOTS``; None: the CPUs the process may run on; :mod:`ki.workflows.cpu_slots`).
        insert_wait_retry_seconds: how long ``ki insert`` waits for retries falling due.
        progress: ``ki insert`` draws its progress bars even when stderr is not a terminal (``KI_PROGRESS=1``).
        metrics_port / metrics_addr: ``ki worker``, ``ki insert`` and ``ki watch`` serve Prometheus metrics on this
            port and address when the port is set (:mod:`ki.adapters.observability.exposition`; default address
            127.0.0.1).
        metrics_open: ``ki serve``'s ``/metrics`` answers without a token (default: a ``read:pipeline`` token).
        trace_database: with tracing on (``OTEL_*``), a span per database statement too (costly: off by default).
        llm / ocr / opensearch / hatchet / server: the sections (module docstring).
    """

    model_config = SettingsConfigDict(env_prefix="KI_", extra="ignore", env_ignore_empty=True)

    data_dir: Path = Field(default_factory=default_data_dir)
    database_url: str | None = None
    infrastructure_retry_max_seconds: float = Field(default=300, ge=0)
    provider_fault_cooldown_seconds: float = Field(default=60, ge=0)
    breaker_failures: int = Field(default=3, ge=1, le=1000)
    breaker_probe_seconds: float = Field(default=1, gt=0)
    breaker_probe_max_seconds: float = Field(default=10, gt=0)
    breaker_connect_probe_seconds: float = Field(default=2, gt=0, le=300)
    run_sweep_seconds: int = Field(default=300, ge=0)
    run_silent_minutes: float = Field(default=15, ge=0)
    run_abandoned_hours: float = Field(default=7, ge=0)
    hatchet_document_concurrency: int = Field(default=16, ge=1, le=1024)
    relate_model_concurrency: int = Field(default=16, ge=1, le=256)
    hatchet_sync_concurrency: int = Field(default=4, ge=1, le=64)
    hatchet_trigger_timeout_seconds: float = Field(default=30, gt=0, le=600)
    hatchet_trigger_retry_seconds: float = Field(default=600, ge=0)
    hatchet_trigger_check_seconds: float = Field(default=30, ge=0)
    workers: int = Field(default=8, ge=1, le=64)
    worker_slots: int = Field(default=8, ge=1, le=1000)
    worker_cpu_slots: int | None = Field(default=None, ge=1, le=1000)
    insert_wait_retry_seconds: float = Field(default=120, ge=0)
    progress: bool = False
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    metrics_addr: str = "127.0.0.1"
    metrics_open: bool = False
    trace_database: bool = False
    llm: LlmSettings = Field(default_factory=LlmSettings)
    ocr: OcrSettings = Field(default_factory=OcrSettings)
    opensearch: OpenSearchSettings = Field(default_factory=OpenSearchSettings)
    hatchet: HatchetClientSettings = Field(default_factory=HatchetClientSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Every environment variable of the process settings → its dotted field
        (``KI_WORKERS`` → ``workers``, ``KI_LLM_BASE_URL`` → ``llm.base_url``)."""
        out: dict[str, str] = {}
        for name, info in cls.model_fields.items():
            section = info.annotation
            if isinstance(section, type) and issubclass(section, EnvSettings):
                out.update({section.variable(f): f"{name}.{f}" for f in section.model_fields})
            else:
                out[cls.variable(name)] = name
        return out

    def value(self, dotted: str) -> Any:
        """The value of a dotted field as :meth:`variables` names it (``llm.model``)."""
        node: Any = self
        for part in dotted.split("."):
            node = getattr(node, part)
        return node


_parsed: dict[type[EnvSettings], tuple[tuple[str | None, ...], EnvSettings]] = {}
_variables: dict[type[EnvSettings], tuple[str, ...]] = {}
_parsed_lock = threading.Lock()


def _variables_of(section: type[EnvSettings]) -> tuple[str, ...]:
    names = _variables.get(section)
    if names is None:
        if section is ProcessSettings:
            names = tuple(ProcessSettings.variables())
        else:
            names = tuple(section.variable(f) for f in section.model_fields)
        _variables[section] = names
    return names


def current(section: type[Section]) -> Section:
    """``section()`` as the environment holds it now (a cached instance while its variables, spelt in
    upper case, keep their values: one ``os.environ.get`` per variable, no parsing).

    Args:
        section: :class:`ProcessSettings` or one of its section classes.
    Raises:
        ConfigurationError: a variable of the section does not parse or is out of range.
    """
    snapshot = tuple(os.environ.get(name) for name in _variables_of(section))
    with _parsed_lock:
        hit = _parsed.get(section)
        if hit is not None and hit[0] == snapshot:
            return hit[1]  # type: ignore[return-value]
    value = section()
    with _parsed_lock:
        _parsed[section] = (snapshot, value)
    return value


def forget_parsed() -> None:
    """Drop the instances :func:`current` cached (``ki.app.wiring.reset`` calls it)."""
    with _parsed_lock:
        _parsed.clear()
