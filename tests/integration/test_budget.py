"""Spending caps (``pipeline.budget``; ki.orchestration.budget) in a real insertion on the loopback gateway.

The gateway (``tests/helpers/gateway_stub.py``) answers as ``gpt-4o`` with 100,000 prompt tokens per call, so each
model call is recorded in the usage ledger at $0.25. With ``pipeline.budget.daily_usd`` = $1 the run stops claiming
the model stages once $1 is spent: the run ends, nothing is quarantined, the model-stage rows wait (``ki status
--json`` and ``GET /api/status`` show ``budget`` with the count), the re-run preview sets its estimate against the
budget left. Raising the cap to $2 lets the next run go on until $2; rolling the injected clock to the next day
lets the next run finish everything. Cost: ~30-60 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.api.app import create_app
from ki.app.launch import launch_insertion
from ki.config.loader import set_config_value
from ki.core.taxonomies import MODEL_STAGES
from ki.orchestration import budget
from tests.helpers.console import make_tokens
from tests.helpers.gateway_stub import GatewayStub
from tests.helpers.outage import stage_answer

pytestmark = pytest.mark.timeout(400)

WORKERS = 2
PER_CALL = 0.25007  # gpt-4o at $2.50 per million prompt tokens × 100,000 + 7 completion tokens at $10/M
#: calls that may pass the cap: those in flight (one per worker), and a claim racing the reading of the spend
#: after a model stage finished (ki.orchestration.budget.BudgetGate.spent): slack of two calls
OVERSHOOT_CALLS = WORKERS + 2


def _estate(root: Path, n: int) -> Path:
    root.mkdir(parents=True)
    for i in range(n):  # distinct notes in one matter folder
        (root / f"Vermerk {i:03d}.txt").write_text(f"Aktenvermerk {i}: Forderung Nr. {1000 + i}.\n", encoding="utf-8")
    return root


def _state(ctx) -> dict:
    with ctx.db.engine.connect() as conn:
        rows = conn.execute(text("SELECT stage, status, attempts FROM processing_state")).all()
        spent = float(conn.execute(text("SELECT coalesce(sum(cost_usd), 0) FROM model_usage")).scalar_one())
    model = [r for r in rows if r.stage in MODEL_STAGES]
    return {"spent": spent, "quarantined": sum(r.status == "quarantined" for r in rows),
            "model_done": sum(r.status == "done" for r in model),
            "model_pending": sum(r.status == "pending" for r in model),
            "unfinished": sum(r.status in ("pending", "running", "failed") for r in rows),
            "running": sum(r.status == "running" for r in rows)}


def _ki_status() -> dict:
    proc = subprocess.run([str(Path(sys.executable).with_name("ki")), "status", "--json"], env=dict(os.environ),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_reached_cap_holds_the_model_stages_until_raised_or_the_next_day(make_ctx, data_dir, tmp_path,
                                                                            monkeypatch):
    set_config_value(data_dir, "pipeline.budget.daily_usd", 1.0)
    with GatewayStub(default=stage_answer) as stub:
        stub.prompt_tokens = 100_000
        monkeypatch.setenv("KI_LLM_BASE_URL", stub.url)
        monkeypatch.setenv("KI_LLM_MODEL", "gpt-4o")
        from ki.app import wiring

        wiring.reset()
        ctx = make_ctx(workers=WORKERS)
        scan_source(ctx, register_local_source(ctx, _estate(tmp_path / "estate", 12)))

        first = launch_insertion(ctx, workers=WORKERS, wait_for_retries_seconds=0)
        assert first.status == "completed", first
        s1 = _state(ctx)
        # the cap held the model stages: spent at least the cap, passed by at most the calls already in flight
        assert 1.0 <= s1["spent"] <= 1.0 + PER_CALL * OVERSHOOT_CALLS, s1
        assert s1["quarantined"] == 0 and s1["running"] == 0 and s1["model_pending"] > 0, s1

        shown = _ki_status()["budget"]
        assert shown["reason"] == "budget" and shown["cap"] == "daily" and shown["limit_usd"] == 1.0
        assert shown["waiting"] == s1["model_pending"] and set(shown["stages"]) == MODEL_STAGES
        assert shown["message"].startswith("paused: daily budget $1.00 reached")
        app = create_app(ctx)
        headers = {"Authorization": f"Bearer {make_tokens(ctx.db.engine).values['operator']}"}
        with TestClient(app) as client:
            api = client.get("/api/status", headers=headers).json()["budget"]
            assert (api["reason"], api["waiting"], api["cap"]) == ("budget", s1["model_pending"], "daily")
            preview = client.get("/api/stages/classify_matter/rerun-preview", headers=headers).json()
            assert preview["budget_remaining_usd"] == 0.0
            if preview["estimate_usd"] is None:  # the stub's catalog may not price the model
                assert preview["budget_note"] == "$0.00 of the budget is left; the cost of this re-run is unknown"
            else:
                assert f"the estimated ${preview['estimate_usd']:.2f} exceeds the $0.00 budget left" in preview[
                    "budget_note"]

        set_config_value(data_dir, "pipeline.budget.daily_usd", 2.0)  # raised: the next run goes on up to $2
        second = launch_insertion(ctx, workers=WORKERS, wait_for_retries_seconds=0)
        s2 = _state(ctx)
        assert second.status == "completed" and second.counters.quarantined == 0
        assert 2.0 <= s2["spent"] <= 2.0 + PER_CALL * OVERSHOOT_CALLS, s2
        assert s2["model_done"] > s1["model_done"] and s2["model_pending"] > 0 and s2["quarantined"] == 0, s2

        tomorrow = budget.utc_now() + timedelta(days=1)
        with ctx.db.engine.connect() as conn:
            assert budget.budget_state(conn, ctx.config).reached == "daily"
            assert budget.budget_state(conn, ctx.config, now=tomorrow).reached is None
        monkeypatch.setattr(budget, "utc_now", lambda: tomorrow)  # the day rolls over: today's spend is yesterday's
        third = launch_insertion(ctx, workers=WORKERS, wait_for_retries_seconds=0)
        s3 = _state(ctx)
        assert third.status == "completed" and s3["unfinished"] == 0 and s3["quarantined"] == 0, s3
        assert _ki_status()["budget"] is not None  # the real clock still says today: the cap is reached today
        proc = subprocess.run([str(Path(sys.executable).with_name("ki")), "config", "set",
                               "pipeline.stages.classify_matter.rerun_token", "r2"], env=dict(os.environ),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        said = " ".join(proc.stderr.split())
        assert "re-runs 12 file(s) through classify_matter" in said, said
        assert ("$0.00 of the budget is left" in said) or ("exceeds the $0.00 budget left" in said), said
