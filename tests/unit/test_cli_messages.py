"""The CLI's message helpers: names escaped for rich, control characters shown, faults classified
(ki/cli/common.py, ki/cli/faults.py; issue 21). In-process; the acceptance tests drive the real command."""

from __future__ import annotations

from rich.console import Console

from ki.cli.common import plain, shown
from ki.cli.faults import EXIT_USAGE, classify, report
from ki.core.errors import OrchestratorUnavailable, SourceUnavailable


def _printed(markup: str) -> str:
    console = Console(width=200, record=True, force_terminal=False)
    console.print(markup, highlight=False, soft_wrap=True)
    return console.export_text()


def test_shown_prints_markup_and_escape_sequences_as_named():
    assert _printed(f"hit {shown('Akte [red]2023[/red].txt')}") == "hit Akte [red]2023[/red].txt\n"
    assert _printed(f"[bold]{shown('a [b]c')}[/]") == "a [b]c\n"
    assert plain("Akte \x1b[31mrot\x1b[0m\n.txt\x9b") == "Akte \\x1b[31mrot\\x1b[0m\\x0a.txt\\x9b"
    assert _printed(shown("Akte \x1b[31mrot")) == "Akte \\x1b[31mrot\n"


def test_the_hatchet_hint_keeps_its_brackets(tmp_path, monkeypatch):
    monkeypatch.setenv("KI_DATA_DIR", str(tmp_path))
    console = Console(width=300, record=True, force_terminal=False)
    code = report(OrchestratorUnavailable("hatchet-sdk is not installed: pip install 'ki[hatchet]'"), console)
    assert code == EXIT_USAGE
    assert console.export_text().splitlines() == [
        "ki: configuration error: hatchet-sdk is not installed: pip install 'ki[hatchet]'",
        "what to do: fix or unset the variable or setting named above (`ki config show` lists the effective "
        "configuration)",
        f"details: {tmp_path / 'ki.log'}"]
    assert "OrchestratorUnavailable" in (tmp_path / "ki.log").read_text()


def test_classify_follows_the_exception_chain():
    try:
        try:
            raise SourceUnavailable("/mnt/akten is not mounted")
        except SourceUnavailable as inner:
            raise RuntimeError("scan failed") from inner
    except RuntimeError as exc:
        fault = classify(exc)
    assert (fault.code, fault.what) == (3, "source unavailable: /mnt/akten is not mounted")
    assert classify(ValueError("boom")).code == 1
