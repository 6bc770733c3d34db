"""The summary lines of ``ki insert`` and the ``ki worker`` advice, for the cases the acceptance test
(tests/acceptance/test_cli_summaries.py) cannot reach cheaply: renamed and untaken files, the hatchet
extra missing, a refused client configuration."""

from __future__ import annotations

from ki.adapters.sources.local import SkippedEntry
from ki.adapters.sources.scan import ScanReport
from ki.cli.insert import scan_counts
from ki.cli.worker import no_engine


def test_scan_counts_add_up_with_renamed_and_untaken_files():
    report = ScanReport(source_id=1, listed=9, new=2, changed=1, unchanged=3, reappeared=1, renamed=1,
                        skipped=[SkippedEntry("a.txt", "unreadable_file", "gone"),
                                 SkippedEntry("sub", "unreadable_folder", "denied")])
    assert scan_counts(report) == "9 files: 2 new, 1 changed, 3 unchanged, 1 restored, 1 renamed, 1 not taken"
    assert report.listed == (report.new + report.changed + report.unchanged + report.reappeared + report.renamed
                             + report.not_taken)
    assert scan_counts(ScanReport(source_id=1, listed=1, unchanged=1)) == "1 file: 0 new, 0 changed, 1 unchanged, " \
                                                                          "0 restored"


def test_worker_advice_for_a_missing_extra_and_a_refused_configuration():
    what, todo = no_engine("hatchet-sdk is not installed: pip install 'ki[hatchet]'", "hatchet")
    assert what == "`ki worker` cannot serve a Hatchet engine: hatchet-sdk is not installed: pip install 'ki[hatchet]'"
    assert todo == ("either install the Hatchet SDK (pip install 'ki[hatchet]'), start an engine and set "
                    "HATCHET_CLIENT_TOKEN (README, section Hatchet); or go without a worker: `ki config set "
                    "components.orchestrator_provider local` and `ki insert` runs every stage in its own process")
    what, _ = no_engine("Hatchet client configuration refused: 1 validation error for ClientConfig\n  Value error, "
                        "Token must be a valid JWT. [type=value_error, input_value={}]\n    For further information "
                        "visit https://errors.pydantic.dev/2.14/v/value_error", "local")
    assert what == ("`ki worker` cannot serve a Hatchet engine: Hatchet client configuration refused: 1 validation "
                    "error for ClientConfig; Value error, Token must be a valid JWT.")
