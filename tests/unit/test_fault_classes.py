"""Database, system and transient faults are infrastructure; ki's own invalid output is internal_error.

Issue 14 items 6 and 8, the table of ``ki.core.retry.classify_error`` with the real exception classes of
psycopg, SQLAlchemy and pydantic (work-queue spec "Retry with Exponential Backoff").
"""

from __future__ import annotations

import errno

import psycopg.errors as pg
import pytest
import sqlalchemy.exc as sa
from pydantic import BaseModel, Field, ValidationError

from ki.core.retry import ErrorVerdict, Treatment, classify_error


def _wrapped(exc: BaseException) -> sa.DBAPIError:
    return sa.OperationalError("SELECT 1", {}, exc)


@pytest.mark.parametrize("state", ["40001", "40P01", "08000", "08006", "08003", "57P01", "57P02", "57P03",
                                   "53000", "53100", "53200", "53300"])
def test_database_faults_by_sqlstate_are_infrastructure(state):
    exc = pg.lookup(state)(f"server said {state}")
    for e in (exc, _wrapped(exc)):
        verdict = classify_error(e)
        assert verdict.treatment is Treatment.infrastructure, (state, type(e))
        assert verdict.infrastructure.startswith(f"database fault SQLSTATE {state}: ")


@pytest.mark.parametrize("state", ["23505", "22P02", "42P01", "23503"])
def test_other_sqlstates_are_bounded_retries_of_ki_s_own_fault(state):
    exc = pg.lookup(state)("no outage")
    assert classify_error(exc) == ErrorVerdict(Treatment.retry, reason="internal_error")


def test_a_lost_connection_without_sqlstate_is_infrastructure():
    verdict = classify_error(pg.OperationalError("server closed the connection unexpectedly"))
    assert verdict.treatment is Treatment.infrastructure
    assert verdict.infrastructure == "database connection lost: server closed the connection unexpectedly"


def test_the_fault_is_found_in_the_chain():
    try:
        try:
            raise pg.lookup("57P01")("terminating connection due to administrator command")
        except pg.Error as inner:
            raise RuntimeError("recording the outcome failed") from inner
    except RuntimeError as outer:
        verdict = classify_error(outer)
    assert verdict.treatment is Treatment.infrastructure
    assert "SQLSTATE 57P01" in verdict.infrastructure


@pytest.mark.parametrize("message", ["read or write conflict on key", "the transaction can be retried",
                                     "resource temporarily unavailable", "request timeout", "read timed out",
                                     "rate limit exceeded", "Too Many Requests", "connection reset by peer",
                                     "broken pipe"])
def test_the_spec_s_transient_message_patterns_are_infrastructure(message):
    verdict = classify_error(RuntimeError(message))
    assert verdict.treatment is Treatment.infrastructure
    assert verdict.infrastructure.startswith("transient fault (")


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.ESTALE, errno.EMFILE, errno.ENETDOWN])
def test_machine_and_share_errnos_are_infrastructure(code):
    verdict = classify_error(OSError(code, "failed"))
    assert verdict.treatment is Treatment.infrastructure


class _Content(BaseModel):
    """A model outside ki, as a parser's or a library's record of a document's content."""

    title: str = Field(max_length=10)


def test_a_document_s_content_failing_a_check_is_deterministic_with_evidence():
    with pytest.raises(ValidationError) as info:
        _Content(title="x" * 11)
    verdict = classify_error(info.value)
    assert (verdict.treatment, verdict.reason) == (Treatment.deterministic, "corrupt")
    assert verdict.details["schema"] == "_Content" and verdict.details["error_count"] == 1
    assert verdict.details["errors"][0]["loc"] == ["title"]
    assert verdict.details["errors"][0]["type"] == "string_too_long"


def test_ki_s_own_output_failing_its_schema_is_internal_error_with_evidence():
    from ki.adapters.convert.model import StructuredDocument

    with pytest.raises(ValidationError) as info:
        StructuredDocument.model_validate({"text": 5, "blocks": "none"})
    verdict = classify_error(info.value)
    assert (verdict.treatment, verdict.reason) == (Treatment.retry, "internal_error")
    assert verdict.details["schema"] == "StructuredDocument" and verdict.details["error_count"] >= 1
