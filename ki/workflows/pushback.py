"""Sending a trigger RPC until the engine acknowledges it: deadline, retries with jitter, the run's AIMD window.

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider) and docs/design-decisions.md "Triggers the
engine refuses". Measured on engine v0.105.0: under load the engine refuses ``BulkTriggerWorkflow`` with gRPC
INTERNAL ``could not trigger workflows: no trigger slots available`` (a trigger carrying idempotency keys
needs one of ``SERVER_GRPC_TRIGGER_WRITE_SLOTS``, default 5, and does not wait for one). That is normal
operation, so :func:`send`:

* gives every attempt a deadline (``KI_HATCHET_TRIGGER_TIMEOUT_SECONDS``; the SDK sets none): an attempt
  left unanswered counts as refused (if the engine acted on it after all, the retry collides on the stable
  idempotency key and returns the existing run, so nothing starts twice);
* retries every failure but the permanent ones (:func:`retryable`) with exponential backoff and full jitter
  (tenacity's ``wait_random_exponential``, 0.5 s doubling, capped at :data:`BACKOFF_CAP_SECONDS`) for up to
  ``KI_HATCHET_TRIGGER_RETRY_SECONDS``, then re-raises the last error;
* records each refusal on the run (:func:`ki.store.pushback.refused`: its window halves, AIMD) and each
  acknowledgement (:func:`ki.store.pushback.regrow`: the window grows by one again).

The trigger client attempts each RPC once (``hatchet_client(once=True)``), so every refusal is seen here and
retried with jitter, instead of five quick SDK retries in lock-step across all callers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from ki.core.errors import OrchestratorUnavailable
from ki.domain.context import PipelineContext
from ki.store import pushback

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Longest wait between two attempts of one trigger (s).
BACKOFF_CAP_SECONDS = 30.0
#: First wait's scale (s): waits are uniform in [0, min(cap, 0.5 × 2^attempt)].
BACKOFF_BASE_SECONDS = 0.5
#: gRPC codes that no retry can change (a wrong request, a bad token, an engine without the call).
PERMANENT_CODES = frozenset({"INVALID_ARGUMENT", "UNAUTHENTICATED", "PERMISSION_DENIED", "UNIMPLEMENTED"})


class TriggerUnanswered(Exception):
    """A trigger RPC got no answer within ``KI_HATCHET_TRIGGER_TIMEOUT_SECONDS``."""


class PartialTrigger(Exception):
    """The engine acknowledged fewer workflow runs than the bulk trigger asked for."""


def retryable(exc: BaseException) -> bool:
    """Whether a failed trigger is worth another attempt: everything but ki's own configuration errors and the
    permanent gRPC codes (:data:`PERMANENT_CODES`)."""
    if isinstance(exc, (OrchestratorUnavailable, ValueError, TypeError)):
        return False
    code = getattr(exc, "code", None)
    if callable(code):
        try:
            name = getattr(code(), "name", "")
        except Exception:  # noqa: BLE001 - not a gRPC error after all
            name = ""
        return name not in PERMANENT_CODES
    return True


def _within(call: Callable[[], T], seconds: float) -> T:
    """``call()`` on a thread of its own, waiting at most ``seconds``. Raises its error, or
    :class:`TriggerUnanswered` (the call goes on in the background; its late result is dropped)."""
    box: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="ki-trigger-rpc", daemon=True).start()
    if not done.wait(seconds):
        raise TriggerUnanswered(f"no answer from the engine within {seconds:g} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def cause(exc: BaseException) -> str:
    """A refusal in words: the gRPC code and details when there are, else the exception's class and text."""
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    if callable(code) and callable(details):
        try:
            return f"{getattr(code(), 'name', code())}: {details()}"
        except Exception:  # noqa: BLE001
            pass
    return f"{type(exc).__name__}: {exc}"


def send(ctx: PipelineContext, run_id: int | None, call: Callable[[], T], *, what: str) -> T:
    """Run the trigger RPC ``call`` until the engine acknowledges it (see the module doc).

    Args:
        run_id: the run whose window and refusal count record the engine's back-pressure (None: record nothing).
        call: one attempt; it must be safe to repeat (a stable idempotency key on every item).
        what: the trigger in words, for the log (``"3 document DAG(s) of run 7"``).
    Returns: ``call()``'s result.
    Raises: the last error once it is permanent (:func:`retryable`) or ``KI_HATCHET_TRIGGER_RETRY_SECONDS``
        have passed (:class:`TriggerUnanswered` when the engine never answered).
    """
    import tenacity

    settings = ctx.settings
    timeout = settings.hatchet_trigger_timeout_seconds

    def attempt() -> T:
        try:
            return _within(call, timeout)
        except Exception as exc:
            if retryable(exc):
                _record_refusal(ctx, run_id, exc, what)
            raise

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(retryable),
        wait=tenacity.wait_random_exponential(multiplier=BACKOFF_BASE_SECONDS, max=BACKOFF_CAP_SECONDS),
        stop=tenacity.stop_after_delay(settings.hatchet_trigger_retry_seconds),
        reraise=True,
    )
    result = retrying(attempt)
    if run_id is not None:
        with ctx.db.engine.begin() as conn:
            pushback.regrow(conn, run_id)
    return result


def _record_refusal(ctx: PipelineContext, run_id: int | None, exc: BaseException, what: str) -> None:
    why = cause(exc)
    window = None
    if run_id is not None:
        try:
            with ctx.db.engine.begin() as conn:
                window = pushback.refused(conn, run_id, why)
        except Exception as db_exc:  # noqa: BLE001 - the retry goes on without the record
            log.warning("run %s: recording a refused trigger failed: %s", run_id, db_exc)
    log.warning("the engine refused the trigger of %s (%s); retrying with backoff%s", what, why,
                f", window now {window}" if window is not None else "")
