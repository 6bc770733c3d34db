"""Quality of the rules policies on ``shared/corpus/estate-dev`` against its ``truth.json``.

Issue "Model stages I", Tests: matter accuracy ≥ 0.95, duplicate precision 1.0, version-pair F1 ≥ 0.9,
e-mail-thread F1 ≥ 0.95, relation F1 ≥ 0.8, scored by ``bench/quality.py`` (the same scorer the
bench prints; there it runs ``ki insert`` in a throw-away data directory, here the pipeline runs
in-process on the test database).
"""

from __future__ import annotations

import importlib.util
import json

from ki.adapters.sources.scan import register_local_source, scan_source
from ki.app.export import export_rows
from ki.app.launch import launch_insertion
from tests.helpers.paths import REPO_ROOT


def _bench_quality():
    spec = importlib.util.spec_from_file_location("bench_quality", REPO_ROOT / "bench" / "quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_estate_dev_meets_the_quality_targets(make_ctx, shared, monkeypatch):
    estate = shared / "corpus" / "estate-dev"
    truth = json.loads((estate / "truth.json").read_text(encoding="utf-8"))
    monkeypatch.setenv("KI_FIRM__NAME", truth["firm"]["name"])
    monkeypatch.setenv("KI_FIRM__ALIASES", json.dumps(truth["firm"]["aliases"]))
    monkeypatch.delenv("KI_LLM_BASE_URL", raising=False)  # the rules policies, offline
    ctx = make_ctx(workers=4)
    sid = register_local_source(ctx, estate / "estate")
    scan_source(ctx, sid)
    summary = launch_insertion(ctx, source_id=sid, workers=4, wait_for_retries_seconds=60)
    assert summary.status == "completed" and summary.counters.quarantined == 0
    quality = _bench_quality()
    scores = quality.score(truth, list(export_rows(ctx.db)))
    print({k: round(scores[k], 3) for k in quality.TARGETS})
    assert scores["exported"] == len(truth["files"])
    for key, target in quality.TARGETS.items():
        assert scores[key] >= target, (key, scores[key], scores.get("matter_misses"))
