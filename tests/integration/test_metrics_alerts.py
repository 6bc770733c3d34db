"""The alert rules and the dashboard, checked by Prometheus' own ``promtool`` against real scrapes.

``docs/prometheus-alerts.yaml`` must load (``promtool check rules``); its expressions must fire on a
queue that is stalled for real (a scan owes rows and nothing claims them: the scrape's runnable rows and
ages) and stay silent on a healthy run (the same queue while a real run's executions count up).
``promtool test rules`` replays series that start at the scraped values and go on as each situation
would over the next 25 minutes. Every dashboard expression must parse and name only metrics ki exports.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from ki.api.app import create_app
from tests.helpers.console import insert_estate, make_tokens, small_estate
from tests.integration.test_metrics import scrape

pytestmark = pytest.mark.timeout(600)

DOCS = Path(__file__).resolve().parents[2] / "docs"
RULES = DOCS / "prometheus-alerts.yaml"
DASHBOARD = DOCS / "grafana-dashboard.json"


def promtool() -> str:
    found = os.environ.get("KI_PROMTOOL") or shutil.which("promtool")
    if not found:
        pytest.fail("promtool is missing: .ci/install_prometheus.sh installs it (Debian's prometheus package)")
    return found


def run_promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120)


def series(name: str, labels: dict[str, str], values: str) -> dict:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{inner}}}", "values": values}


def expected(rule: str, labels: dict[str, str]) -> dict:
    """The alert ``rule`` as promtool reports it: its labels with ``labels``, its annotations rendered."""
    spec = next(r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if r["alert"] == rule)
    annotations = {k: re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], v)
                   for k, v in spec["annotations"].items()}
    return {"exp_labels": {**spec["labels"], **labels}, "exp_annotations": annotations}


def test_the_rules_load():
    checked = run_promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 5 rules found" in checked.stdout


def test_alerts_fire_on_a_stalled_queue_and_stay_silent_on_a_healthy_run(make_ctx, shared, tmp_path):
    ctx = make_ctx(workers=2)
    tokens = make_tokens(ctx.db.engine)
    from ki.adapters.sources.scan import register_local_source, scan_source

    with TestClient(create_app(ctx)) as client:
        source_id = register_local_source(ctx, small_estate(shared, tmp_path / "a"))
        scan_source(ctx, source_id)
        stalled = scrape(client, tokens.header("reader"))  # rows owed, nothing claims them
        summary = insert_estate(ctx, small_estate(shared, tmp_path / "b"))
        assert summary.status == "completed"
        healthy = scrape(client, tokens.header("reader"))

    ((labels, age),) = stalled["ki_queue_oldest_runnable_age_seconds"].items()
    queue = dict(labels)
    assert queue == {"stage": "fetch", "lane": "backfill"} and age < 600
    done = {dict(k)["stage"]: v for k, v in healthy["ki_stage_executions_total"].items()
            if dict(k)["outcome"] == "done"}
    assert done["fetch"] >= 11
    # stalled: the age grows by 60 s a minute, the executions counter stays where the scrape found it (none)
    stalled_series = [series("ki_queue_oldest_runnable_age_seconds", queue, f"{age:.0f}+60x30")]
    # healthy: the same old queue, while each minute executes as many fetches as the real run did
    healthy_series = [series("ki_queue_oldest_runnable_age_seconds", queue, f"{age + 900:.0f}+60x30"),
                      series("ki_stage_executions_total", {"stage": "fetch", "outcome": "done"},
                             f"0+{done['fetch']:.0f}x30")]
    paused = [series("ki_dependency_paused_since_timestamp_seconds", {"dependency": "gateway"}, "0x30")]
    watcher = [series("ki_watcher_up", {"source_id": str(source_id), "mode": "native"}, "0x30")]
    budget = [series("ki_budget_reached", {"cap": "daily"}, "1x30")]
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {"interval": "1m", "input_series": stalled_series + paused + watcher + budget,
             "alert_rule_test": [
                 {"eval_time": "10m", "alertname": "KiQueueNotMoving", "exp_alerts": []},
                 {"eval_time": "25m", "alertname": "KiQueueNotMoving",
                  "exp_alerts": [expected("KiQueueNotMoving", {"stage": "fetch"})]},
                 {"eval_time": "25m", "alertname": "KiDependencyPaused",
                  "exp_alerts": [expected("KiDependencyPaused", {"dependency": "gateway"})]},
                 {"eval_time": "25m", "alertname": "KiWatcherDown",
                  "exp_alerts": [expected("KiWatcherDown", {"source_id": str(source_id)})]},
                 {"eval_time": "25m", "alertname": "KiBudgetReached",
                  "exp_alerts": [expected("KiBudgetReached", {"cap": "daily"})]},
                 {"eval_time": "25m", "alertname": "KiQuarantineSpike", "exp_alerts": []},
             ]},
            {"interval": "1m", "input_series": healthy_series,
             "alert_rule_test": [
                 {"eval_time": at, "alertname": name, "exp_alerts": []}
                 for at in ("10m", "25m") for name in ("KiQueueNotMoving", "KiDependencyPaused", "KiWatcherDown",
                                                       "KiQuarantineSpike", "KiBudgetReached")]},
        ],
    }
    path = tmp_path / "alerts_test.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    tested = run_promtool("test", "rules", str(path))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_dashboard_expressions_parse_and_name_exported_metrics(tmp_path):
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 12 and dashboard["uid"] == "ki-pipeline"
    documented = set(re.findall(r"`(ki_[a-z_]+)`", (DOCS / "metrics.md").read_text()))
    for expr in exprs:
        for name in re.findall(r"\b(ki_[a-z_]+)", expr):
            base = re.sub(r"_(bucket|count|sum)$", "", name)
            assert name in documented or base in documented, f"{name} in {expr!r} is not in docs/metrics.md"
    # promtool parses every expression as a recording rule
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"ki:dashboard:{i}", "expr": e}
                                                        for i, e in enumerate(exprs)]}]}
    path = tmp_path / "dashboard_rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    checked = run_promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
