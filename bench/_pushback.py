"""The engine back-pressure part of ``bench/hatchet.py``: a fault-injecting gRPC proxy in front of the engine and
what a refused trigger cost (``--refuse-every N``).

Spec: insertion-pipeline.md "Orchestration" (Hatchet provider); docs/design-decisions.md "Triggers the engine
refuses". :func:`start_proxy` puts ``tests/helpers/grpc_fault_proxy.py`` between ki (this process and the
workers it starts: ``HATCHET_CLIENT_HOST_PORT``) and the engine, refusing every ``n``-th ``BulkTriggerWorkflow``
with the engine's own ``no trigger slots available``; :func:`report` reads, per refused document, the time from
the refusal to its first task (the first ``fetch`` attempt's start) and what the run recorded.
"""

from __future__ import annotations

import os
import statistics

from sqlalchemy import text


def start_proxy(upstream: str, every: int):
    """A started proxy refusing every ``every``-th bulk trigger (from the first); sets ``HATCHET_CLIENT_HOST_PORT``."""
    from tests.helpers.grpc_fault_proxy import GrpcFaultProxy, every_nth

    proxy = GrpcFaultProxy(upstream, every_nth(every, ["refuse"])).start()
    os.environ["HATCHET_CLIENT_HOST_PORT"] = proxy.address
    return proxy


def report(proxy, ctx, run_id: int) -> dict:
    """Refusals injected and recorded, the window's low point, and refused trigger → first task (s)."""
    from ki.store.pushback import pushback

    with ctx.db.engine.connect() as conn:
        pb = pushback(conn, run_id)
        first = dict(conn.execute(text("SELECT source_object_id, extract(epoch FROM min(started_at)) "
                                       "FROM work_item_attempt WHERE stage = 'fetch' AND run_id = :r GROUP BY 1"),
                                  {"r": run_id}).all())
    refused = proxy.faults("refuse")
    delays = sorted(float(first[int(o)]) - c.at for c in refused for o in c.object_ids if o and int(o) in first)
    calls = [c for c in proxy.log if c.method == "BulkTriggerWorkflow"]
    return {"bulk_trigger_calls": len(calls), "refused_calls": len(refused),
            "refused_documents": sum(len(c.object_ids) for c in refused),
            "refusals_recorded": pb.refusals if pb else None,
            "window": {"limit": pb.window_limit, "min": pb.window_min, "end": pb.window} if pb else None,
            "refused_to_first_task_s": {
                "n": len(delays), "median": round(statistics.median(delays), 2) if delays else None,
                "p90": round(delays[int(0.9 * (len(delays) - 1))], 2) if delays else None,
                "max": round(delays[-1], 2) if delays else None}}
