"""``ki config set|unset|show`` as the real command: values checked before anything is written (a negative
number is a value, not an option), field errors without pydantic's links, secrets hidden, and what a change
means for documents already processed (issue 21, "Configuration edits that fail early"; ki/cli/config.py).

Two small text files inserted on the embedded PostgreSQL of a fresh data directory (~1-2 min under load).
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(900)

def test_config_edits_fail_early_hide_secrets_and_say_what_they_change(ki):
    data, base = ki.data_dir, ki.base

    refused = ki("config", "set", "pipeline.max_file_mb", "-5", code=2)
    assert refused.stderr.splitlines() == ["refused: pipeline.max_file_mb: Input should be greater than or equal to 1",
                                           "nothing was changed"]
    assert "errors.pydantic.dev" not in refused.stderr
    assert not (data / "config.json").exists()
    refused = ki("config", "set", "components.docling_url", "localhost:5001", code=2)
    assert refused.stderr.splitlines() == [
        "refused: components.docling_url: 'localhost:5001' is not an http:// or https:// URL with a host",
        "nothing was changed"]
    assert ki("config", "set", "pipeline.nosuch", "1", code=2).stderr.splitlines() == [
        "refused: pipeline.nosuch: unknown configuration field", "nothing was changed"]
    assert ki("config", "set", "pipeline.max_file_mb", "64").stdout == "pipeline.max_file_mb = 64\n"

    assert ki("config", "set", "components.docling_api_key", "s3cret-key").stdout == \
        "components.docling_api_key = ***\n"
    shown = ki("config", "show").stdout
    assert "s3cret-key" not in shown
    assert json.loads(shown)["config"]["components"]["docling_api_key"] == "***"
    assert ki("config", "unset", "components.docling_api_key").stdout == \
        "components.docling_api_key unset (default: null)\n"
    assert ki("config", "unset", "components.docling_api_key").stdout == \
        "components.docling_api_key was not set in the saved configuration (it has its default)\n"
    assert json.loads((data / "config.json").read_text()) == {"pipeline": {"max_file_mb": 64}}

    estate = base / "estate"
    estate.mkdir()
    for i in range(2):
        (estate / f"akte-{i}.txt").write_text(f"Akte {i}: Liefervertrag.\n")
    ki("insert", str(estate))
    renamed = ki("config", "set", "firm.name", "Kanzlei Beispiel")
    assert renamed.stdout == 'firm.name = "Kanzlei Beispiel"\n'
    assert renamed.stderr.splitlines() == [
        "note: this changes nothing for the 2 documents already processed (files processed from now on use it); to "
        "apply it to them, `ki config set pipeline.stages.classify_matter.rerun_token NEW` re-runs Classify and "
        "every later stage for them at the next run"]
    bumped = ki("config", "set", "pipeline.stages.relate.rerun_token", "2")
    assert bumped.stdout == 'pipeline.stages.relate.rerun_token = "2"\n'
    assert bumped.stderr.splitlines() == [
        "takes effect at the next run (`ki source rescan` or `ki insert`): a new rerun_token bumps the Relate "
        "version: its files and every later stage re-run"]
    assert ki("config", "set", "pipeline.claim_timeout_seconds", "600").stderr == ""  # operational: no note
