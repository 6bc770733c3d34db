"""The process's Prometheus metrics that code increments as things happen.

Spec: insertion-pipeline.md "The console page" (what an operator watches) and the prior art's metrics
conventions (``notes/prior-art.md`` §8: ``*_total`` counters, ``*_duration_seconds`` and queue-wait
histograms, last-success times, never a document id, path or principal as a label). Each metric is
documented in ``docs/metrics.md``.

Everything here lives in :data:`REGISTRY`, ki's own registry (not prometheus-client's global one, so
a test or a second app in one process never meets a "duplicated timeseries" error). The metrics read
from PostgreSQL at scrape time (buckets, queue age, pauses, spend, watchers, runs) are not here: they
are :class:`ki.adapters.observability.scrape.StateCollector`, registered next to these by whoever serves them
(:func:`ki.adapters.observability.exposition.serving_registry`).

Labels are bounded sets: ``stage`` (the seven stage ids), ``outcome`` (:data:`OUTCOMES`), ``reason`` (the
quarantine reasons of DESIGN.md), ``dependency`` (:data:`DEPENDENCY_LABELS`), ``backend`` (``embedded``,
``opensearch``). Recording costs one lock per counter (prometheus-client's own), no I/O.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

#: Outcomes of one stage execution (``ki_stage_executions_total{outcome}``): ``done``, ``skipped``,
#: ``retried`` (failed, will be retried), ``quarantined``, ``stale`` (the completion was refused: the
#: claim had been recovered or the row asked to run again), ``timeout`` (the stage ran past its deadline).
OUTCOMES = ("done", "skipped", "retried", "quarantined", "stale", "timeout")

#: Dependencies an infrastructure fault is counted against (``ki_infrastructure_faults_total``).
#: (LibreOffice, the legacy-format converter, has none: a conversion it fails or times out on is that file's
#: fault, ``ki.adapters.convert.soffice``.)
DEPENDENCY_LABELS = ("gateway", "docling", "opensearch", "source", "database", "other")

#: Seconds; a stage execution runs from milliseconds (a skip) to minutes (OCR of a long scan).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
                    900.0)
#: Seconds a row waited between becoming runnable and being claimed (a backfill can queue for hours).
WAIT_BUCKETS = (0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0)
SEARCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REGISTRY = CollectorRegistry(auto_describe=True)

STAGE_EXECUTIONS = Counter("ki_stage_executions", "Stage executions by stage and outcome.",
                           ["stage", "outcome"], registry=REGISTRY)
QUARANTINES = Counter("ki_quarantines", "Rows quarantined, by stage and quarantine reason.",
                      ["stage", "reason"], registry=REGISTRY)
INFRASTRUCTURE_FAULTS = Counter("ki_infrastructure_faults", "Infrastructure faults (outages: retried, never "
                                "quarantined) by the dependency at fault.", ["dependency"], registry=REGISTRY)
STAGE_DURATION = Histogram("ki_stage_duration_seconds", "Wall time of one stage execution (claim to recorded "
                           "outcome), by stage.", ["stage"], buckets=DURATION_BUCKETS, registry=REGISTRY)
QUEUE_WAIT = Histogram("ki_queue_wait_seconds", "Time a row waited between becoming runnable and being claimed, "
                       "by stage.", ["stage"], buckets=WAIT_BUCKETS, registry=REGISTRY)
LAST_SUCCESS = Gauge("ki_stage_last_success_timestamp_seconds", "Unix time of the last stage execution this "
                     "process completed as done, by stage.", ["stage"], registry=REGISTRY)
SEARCH_DURATION = Histogram("ki_search_duration_seconds", "Wall time of one search (ranking, confirmation and "
                            "snippets), by backend.", ["backend"], buckets=SEARCH_BUCKETS, registry=REGISTRY)
MODEL_TOKENS = Counter("ki_model_tokens", "Model tokens used, by stage, model and kind (prompt, completion).",
                       ["stage", "model", "kind"], registry=REGISTRY)
MODEL_COST = Counter("ki_model_cost_usd", "Model spend in US dollars (priced calls only), by stage and model.",
                     ["stage", "model"], registry=REGISTRY)
WATCH_FILES = Counter("ki_watch_files", "Settled files the folder watcher passed to a sync (handed_over) or whose "
                      "sync failed (sync_failed, retried by the next full rescan).", ["event"], registry=REGISTRY)


def outcome_of(kind: str, error_class: str | None) -> str | None:
    """The ``outcome`` label of an :class:`ki.orchestration.execute.ExecutionResult` kind, or None for a
    call that ran nothing (``not_claimed``)."""
    if error_class == "StageTimeout" and kind in ("retry", "quarantined"):
        return "timeout"
    return {"done": "done", "skipped": "skipped", "retry": "retried", "quarantined": "quarantined",
            "claim_lost": "stale"}.get(kind)


def record_execution(stage: str, kind: str, error_class: str | None, seconds: float, *,
                     queue_wait_seconds: float | None = None, now: float | None = None) -> None:
    """Count one stage execution.

    Args:
        stage: the stage id; kind / error_class: the ``ExecutionResult``'s.
        seconds: wall time from claim to the recorded outcome.
        queue_wait_seconds: how long the row was runnable before this claim, when known.
        now: Unix time of the outcome (default: the wall clock), for the last-success gauge.
    """
    outcome = outcome_of(kind, error_class)
    if outcome is None:
        return
    STAGE_EXECUTIONS.labels(stage, outcome).inc()
    STAGE_DURATION.labels(stage).observe(max(0.0, seconds))
    if queue_wait_seconds is not None:
        QUEUE_WAIT.labels(stage).observe(max(0.0, queue_wait_seconds))
    if outcome == "done":
        LAST_SUCCESS.labels(stage).set(time.time() if now is None else now)


def record_quarantine(stage: str, reason: str | None) -> None:
    """Count one quarantined row (``reason`` None is counted as ``unclassified``)."""
    QUARANTINES.labels(stage, reason or "unclassified").inc()


def record_infrastructure_fault(dependency: str | None) -> None:
    """Count one infrastructure fault against ``dependency`` (unknown names are counted as ``other``)."""
    INFRASTRUCTURE_FAULTS.labels(dependency if dependency in DEPENDENCY_LABELS else "other").inc()


def count_usage(stage: str, model: str, prompt_tokens: int, completion_tokens: int, cost_usd: Any) -> None:
    """Count one model call's tokens and cost (``cost_usd`` a Decimal or float; None: the model has no price)."""
    MODEL_TOKENS.labels(stage, model, "prompt").inc(max(0, prompt_tokens))
    MODEL_TOKENS.labels(stage, model, "completion").inc(max(0, completion_tokens))
    if cost_usd is not None:
        MODEL_COST.labels(stage, model).inc(max(0.0, float(cost_usd)))


def record_search(backend: str, seconds: float) -> None:
    """Observe one search's wall time on ``backend`` (``embedded`` or ``opensearch``)."""
    SEARCH_DURATION.labels(backend).observe(max(0.0, seconds))


def counter_value(counter: Counter, *labels: str) -> float:
    """The current value of one labelled counter child (0.0 when it was never incremented)."""
    for metric in counter.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and tuple(sample.labels.values()) == labels:
                return float(sample.value)
    return 0.0
