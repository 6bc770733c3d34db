"""Every exception ki raises on purpose, in one place.

The treatment of each class (deterministic quarantine, bounded retry,
infrastructure retry) is data in :mod:`ki.core.retry` (``classify_error``);
this module only defines the classes and the evidence they carry.

Spec: insertion-pipeline.md, "Retry policy and quarantine" (error table) and
DESIGN.md "Quarantine reasons".
"""

from __future__ import annotations

from typing import Any

# Quarantine reasons (DESIGN.md "Quarantine reasons").
QUARANTINE_REASONS = (
    "password_required",
    "encrypted",
    "corrupt",
    "empty",
    "needs_ocr",
    "needs_converter",
    "unsupported_format",
    "too_large",
    "conversion_failed",
    "empty_text",
    "provider_permanent",
    "source_missing",
    # ki's additions: every quarantine names one of these reasons
    "internal_error",  # ki's own fault: its output failed its own schema, an unexplained exception
    "model_output_invalid",  # the model never produced a valid answer within max_attempts
    # faults of a dependency (or a deadline) that only this file meets while other files pass
    # (DESIGN.md / docs/design-decisions.md "Whose fault is a fault that only one file meets")
    "poison_suspected",  # an outage-looking fault, max_attempts times, while the dependency served others
    "timeout",  # the stage's deadline (pipeline.stages.<stage>.timeout_seconds) passed, while others passed
)

# Reasons caused by a missing capability rather than by the file: released
# automatically when configuration adds the capability (DESIGN.md).
CAPABILITY_REASONS = frozenset({"needs_ocr", "needs_converter", "unsupported_format"})


class KiError(Exception):
    """Base of ki's own exceptions."""


class UnsupportedDocument(ValueError, KiError):
    """The file's own content cannot be converted; deterministic quarantine.

    Attributes:
        reason: one of :data:`QUARANTINE_REASONS` (e.g. ``corrupt``, ``needs_ocr``).
        details: converter evidence (error categories, pages, ...), JSON-serialisable.
    """

    def __init__(self, message: str, *, reason: str = "conversion_failed", details: dict[str, Any] | None = None):
        if reason not in QUARANTINE_REASONS:
            raise ValueError(f"unknown quarantine reason {reason!r}")
        super().__init__(message)
        self.reason = reason
        self.details = details or {}


class ArtifactTooLarge(ValueError, KiError):
    """A blob exceeded ``pipeline.max_file_mb`` while streaming (reason ``too_large``)."""

    reason = "too_large"

    def __init__(self, message: str, *, limit_bytes: int, seen_bytes: int):
        super().__init__(message)
        self.limit_bytes = limit_bytes
        self.seen_bytes = seen_bytes


class ProviderPermanentError(ValueError, KiError):
    """A model/converter provider rejects the account (401/403/404 model, quota).

    Deterministic (quarantine on the first attempt, reason ``provider_permanent``);
    the message is written for the person who must fix the account.
    """

    reason = "provider_permanent"


class InternalError(KiError):
    """ki's own output broke ki's own rules (e.g. a policy's result failed its own schema): a bug, never
    the file's fault. Retried up to max_attempts, then quarantined with reason ``internal_error`` and
    the evidence in ``details``.

    Attributes:
        details: JSON-serialisable evidence (the schema, the offending field, its size...).
    """

    reason = "internal_error"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.details = details or {}


class ModelOutputInvalid(KiError):
    """A model's output stayed schema-invalid or never converged; retried up to max_attempts."""


class RetryableStageError(KiError):
    """A stage saw drift or a precondition not yet met; retried up to max_attempts."""


class StaleClaim(KiError):
    """A running claim went silent for longer than ``claim_timeout_seconds``."""


class StageTimeout(KiError):
    """A handler ran past its stage's deadline (``pipeline.stages.<stage>.timeout_seconds``): the claim was
    abandoned (no longer renewed; a conversion worker is killed, a thread is left to die and its late result
    refused by the fencing token) and the row failed with this error.

    Whose fault it is decides the treatment (``ki.orchestration.blame``): the dependency's when other files
    also stop passing (an outage: retried, never quarantined), the file's when other files pass the same
    stage meanwhile (counts toward ``max_attempts``, then quarantined with reason ``timeout``).

    Attributes:
        stage: the stage whose deadline passed.
        timeout_seconds: the deadline (s).
        dependencies: what the stage needs (``ki.adapters.breaker`` names: ``docling``, ``gateway``, ...); the breaker
            of a single one counts an outage timeout.
    """

    def __init__(self, stage: str, timeout_seconds: float, dependencies: tuple[str, ...] = ()):
        super().__init__(f"{stage} ran past its deadline of {timeout_seconds:g} s "
                         f"(pipeline.stages.{stage}.timeout_seconds): abandoned")
        self.stage = stage
        self.timeout_seconds = float(timeout_seconds)
        self.dependencies = tuple(dependencies)
        self.infrastructure = f"{stage} timed out after {timeout_seconds:g} s"


class ClaimLost(KiError):
    """The row no longer holds this worker's claim token: the completion is refused (fencing)."""


class InfrastructureError(KiError):
    """An outage that says nothing about the file (never quarantines).

    Attributes:
        infrastructure: short human reason recorded in ``last_error.infrastructure``,
            e.g. ``"gateway answered HTTP 503"`` or ``"source root missing"``.
        retry_after_seconds: how long the dependency asked to be left alone (its ``Retry-After``), or None;
            an open circuit breaker probes no sooner (``ki.adapters.breaker``).
    """

    def __init__(self, message: str, *, infrastructure: str | None = None, retry_after_seconds: float | None = None):
        super().__init__(message)
        self.infrastructure = infrastructure or message
        self.retry_after_seconds = retry_after_seconds


class SourceUnavailable(InfrastructureError):
    """A source root (or a file's folder) is missing or unreadable: an outage, recorded as ``source_missing``."""

    reason = "source_missing"


class SourceReadDenied(InfrastructureError):
    """A file under a readable folder cannot be read for permissions (mode 000, an ACL): a fault of the
    source, not of the file's content. The row is parked waiting with reason ``source_unreadable`` (never
    quarantined, not retried by every run) and released when a scan sees the file's mode, owner or ACL
    change (``ki.store.unreadable``).

    Attributes:
        details: the file's ``path``, ``mode`` (octal text), ``uid``, ``gid`` and ``ctime_ns`` when it could
            be stat'ed (the scan compares them to release the file), else ``{"path": ...}``.
    """

    reason = "permission_denied"

    def __init__(self, message: str, *, infrastructure: str | None = None, details: dict[str, Any] | None = None):
        super().__init__(message, infrastructure=infrastructure)
        self.details = details or {}


class SourceReadFailed(InfrastructureError):
    """Another I/O error opening or reading a file under a present root and folder (EIO, ESTALE, a
    network share's transport error): an outage, retried."""


class SourceEscaped(ValueError, KiError):
    """A stored name now resolves outside its source root (a symlink retargeted since the scan): the
    document is no longer in the source; deterministic, reason ``source_missing``."""

    reason = "source_missing"


class AclReadError(InfrastructureError):
    """A connector's ACL (a grants file, the source's configured principals) could not be read.

    An outage, never the file's fault: the index stage fails and retries (never quarantines), and
    the object's chunks keep their previous permissions. ``infrastructure`` names what failed.
    Raised by :mod:`ki.domain.access`.
    """


class ConfigurationError(KiError):
    """Configuration is invalid or refuses an edit (the API maps it to 409/422)."""


class SchemaNewerThanCode(KiError):
    """The database was migrated by a newer ki: ``alembic_version`` holds revisions this code has no
    migration for (``unknown``), so it must not run on that schema (``heads``: this code's newest)."""

    def __init__(self, unknown: list[str], heads: list[str]):
        super().__init__(f"the database was migrated by a newer ki (schema revision {', '.join(unknown)}; "
                         f"this ki knows up to {', '.join(heads)})")
        self.unknown = unknown
        self.heads = heads


class EnvPinnedError(ConfigurationError):
    """An edit targets a field pinned by an environment variable (API: 409)."""

    def __init__(self, field: str, env_var: str):
        super().__init__(f"{field} is pinned by the environment variable {env_var}; unset it to edit")
        self.field = field
        self.env_var = env_var


class StaleConfigVersion(ConfigurationError):
    """An edit was based on a configuration version that is no longer current (API: 409).

    Attributes: ``expected`` (the version the editor read), ``current`` (the version now).
    """

    def __init__(self, expected: str, current: str):
        super().__init__(f"the configuration changed since version {expected} was read (now {current}); "
                         "reload it and apply the edit again")
        self.expected = expected
        self.current = current


class ConfigValidationError(ConfigurationError):
    """An edit has invalid values (API: 422); nothing was written.

    Attributes: ``errors``: dotted field name → list of messages.
    """

    def __init__(self, errors: dict[str, list[str]]):
        detail = "; ".join(f"{k}: {' / '.join(v)}" for k, v in errors.items())
        super().__init__(f"invalid configuration edit: {detail}")
        self.errors = errors


class RunAborted(KiError):
    """A run stopped because continuing cannot succeed (e.g. a converter rejects ki's request: 422).

    Raised out of ``run_stage_for_object``; the run is marked failed with this message.
    """


class SyncAlreadyRunning(KiError):
    """A sync of this source is already queued or running (``uq_pipeline_runs_active_sync``): a second one
    is refused, not queued twice. ``run_id`` is the unfinished sync run."""

    def __init__(self, source_id: int, run_id: int | None):
        super().__init__(f"source {source_id} is already being synced (run {run_id}); try again when it ends")
        self.source_id = source_id
        self.run_id = run_id


class OrchestratorUnavailable(ConfigurationError):
    """The configured orchestrator provider cannot run here (fails closed)."""


# --- Docling Serve (ki.adapters.convert.docling) ------------------------------------------------------


class OpenSearchUnavailable(InfrastructureError):
    """The OpenSearch node did not answer (connection error, timeout, HTTP 408/429/5xx): an outage."""


class DoclingUnavailable(InfrastructureError):
    """Docling Serve is down, slow, crashed on the task or answered garbage (never quarantines).

    ``infrastructure`` is the short cause, e.g. ``"docling answered HTTP 504"``.
    """


class DoclingRequestRejected(UnsupportedDocument):
    """Docling Serve refused the request for this file (HTTP 422): the file's own verdict, quarantined
    ``conversion_failed`` with the server's detail — never a run-wide stop (other files convert with the
    same options; a wrong option shows as every file quarantined with the same detail).

    Attributes:
        detail: the server's validation detail (FastAPI/pydantic ``detail``), as parsed JSON or text.
    """

    def __init__(self, message: str, *, detail: Any = None):
        super().__init__(message, reason="conversion_failed", details={"http_status": 422, "detail": detail})
        self.detail = detail


class DoclingKeyRejected(ProviderPermanentError):
    """Docling Serve refused the API key (HTTP 401/403); deterministic, with a process-wide cooldown."""


# --- raised by one part of ki, defined here with the rest -------------------------------------------


class GatewayUnavailable(InfrastructureError):
    """The gateway is unreachable, timed out or overloaded: an outage, never the file's fault.

    ``infrastructure`` reads e.g. ``"gateway answered HTTP 503"`` or
    ``"gateway timed out (ReadTimeout after 120 s)"``; ``status`` is the HTTP status or None.
    """

    def __init__(self, message: str, *, infrastructure: str, status: int | None = None,
                 retry_after_seconds: float | None = None):
        super().__init__(message, infrastructure=infrastructure, retry_after_seconds=retry_after_seconds)
        self.status = status


class GatewayRequestRejected(KiError):
    """The gateway refused this request with a status that is neither an outage nor an account fault
    (400, 413, 422, ...): e.g. a context too long. Retried up to max_attempts, then quarantined."""

    def __init__(self, message: str, *, status: int):
        super().__init__(message)
        self.status = status


class ToolError(Exception):
    """A tool failure the model (or a rules policy) should read and work around.

    ``chat_agent`` returns ``{"error": str(exc)}`` as the tool's result; ``AgentState.call``
    re-raises it to a policy. Any other exception from a tool ends the loop.
    """


class OntologyError(ValueError):
    """The ontology document is malformed (unknown parent, duplicate id, cycle, bad shape)."""


class Contended(Exception):
    """A document lock is held by another materialization: roll back and try again."""


class TaskCancelled(Exception):  # noqa: N818 - Hatchet's word
    """The orchestrator cancelled the task while it waited."""


class WorkItemRefused(KiError):
    """An operator action on work items was refused; ``code`` names why and ``status`` is
    the HTTP status the API answers with: ``not_found`` (404), ``running`` (409: a running item is never
    retried or cancelled), ``not_retryable`` / ``not_cancellable`` (409: nothing to do in its state),
    ``confirmation_required`` / ``confirmation_mismatch`` (409: a bulk action needs the token of a dry run of
    the same filter, count and limit), ``filter_required`` (422: a bulk action with an empty filter needs
    an explicit ``all=true``)."""

    STATUS = {"not_found": 404, "filter_required": 422}

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = self.STATUS.get(code, 409)
