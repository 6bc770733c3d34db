"""Bounded text windows (issue 14 item 7c): :mod:`ki.core.text_window` and the stages' bounded helpers."""

from __future__ import annotations

import hashlib

import pytest

from ki.adapters.convert.model import StructuredDocument
from ki.config.settings import KiConfig
from ki.core.text_window import normalised_digest, window_of_parts, window_text, windowed_body
from ki.domain.metadata.policy import MAX_IDENTIFIERS, MAX_PARTIES, MetadataRulesPolicy, read_document
from ki.domain.relate.facts import FileFacts
from ki.stages.index import header_title, profile_text


def test_a_short_text_is_read_whole_and_unchanged() -> None:
    text = "Landgericht München I\n\nKlageschrift\n" * 10
    window, bound = window_text(text, head_chars=1_000, tail_chars=200)
    assert window is text
    assert bound.as_dict() == {"read_chars": len(text), "total_chars": len(text), "truncated": False,
                               "head_chars": 1_000, "tail_chars": 200}
    exactly = "x" * 1_200
    assert window_text(exactly, head_chars=1_000, tail_chars=200)[1].truncated is False
    assert window_text(None, head_chars=1_000, tail_chars=200)[0] == ""


def test_a_long_text_keeps_its_head_and_tail_cut_at_line_boundaries() -> None:
    lines = [f"Zeile {i:06d} mit Text" for i in range(20_000)]  # 22 chars + newline each
    text = "\n".join(lines)
    window, bound = window_text(text, head_chars=10_000, tail_chars=3_000)
    assert bound.truncated and bound.total_chars == len(text)
    head, tail = window.split("\n\n")
    assert text.startswith(head) and text.endswith(tail)
    assert text[len(head)] == "\n" and 10_000 - 30 < len(head) <= 10_000  # at a line end, near the bound
    assert tail.startswith("Zeile ") and len(tail) <= 3_000 and len(tail) > 3_000 - 30
    assert bound.read_chars == len(head) + len(tail)
    assert lines[0] in window and lines[-1] in window and lines[10_000] not in window


@pytest.mark.parametrize("sep", ["\n", " ", ""])
@pytest.mark.parametrize(("head", "tail"), [(10_000, 3_000), (10_000, 0), (0, 3_000), (9_999, 2_999)])
def test_the_window_of_the_head_and_tail_parts_is_the_window_of_the_text(sep: str, head: int, tail: int) -> None:
    """What relate's paging reader computes from two page ranges (ki.domain.relate.policy.read_whole) is the window of
    the whole text, breaks or none."""
    import random

    rng = random.Random(head + tail + len(sep))
    text = sep.join("".join(rng.choice("abcdef") for _ in range(rng.randint(1, 40))) for _ in range(3_000))
    assert len(text) > head + tail
    parts = window_of_parts(text[:head], text[len(text) - tail:] if tail else "", len(text),
                            head_chars=head, tail_chars=tail)
    assert parts == window_text(text, head_chars=head, tail_chars=tail)


def test_a_text_without_breaks_is_cut_at_the_bound() -> None:
    text = "x" * 50_000
    window, bound = window_text(text, head_chars=10_000, tail_chars=0)
    assert window == "x" * 10_000 and bound.read_chars == 10_000 and bound.truncated


def test_windowed_body_copies_and_windows_text_and_original_text() -> None:
    body = {"format": "txt", "title": "T", "text": "a " * 20_000, "original_text": "b " * 20_000, "mail": None}
    out, bound = windowed_body(body, head_chars=1_000, tail_chars=500)
    assert bound.truncated and len(out["text"]) <= 1_502 and len(out["original_text"]) <= 1_502
    assert body["text"] == "a " * 20_000  # the artifact body itself is untouched
    small = {"text": "kurz"}
    assert windowed_body(small, head_chars=1_000, tail_chars=500)[0] is small


@pytest.mark.parametrize("text", ["", "  a \n\n b\tc  ", "wort " * 300_000, "x" * 3_000_000 + "  y\n z"])
def test_normalised_digest_is_the_digest_of_the_collapsed_text(text: str) -> None:
    assert normalised_digest(text) == hashlib.sha1(" ".join(text.split()).encode()).hexdigest()


def test_file_facts_read_a_window_but_digest_the_whole_text() -> None:
    middle_a, middle_b = "Vertragstext A. " * 50_000, "Vertragstext B. " * 50_000
    a = FileFacts.from_artifact(ref="F1", path="a.txt", body={"text": "Kopf\n" + middle_a + "Ende\n"},
                                head_chars=10_000, tail_chars=1_000)
    b = FileFacts.from_artifact(ref="F2", path="b.txt", body={"text": "Kopf\n" + middle_b + "Ende\n"},
                                head_chars=10_000, tail_chars=1_000)
    assert len(a.text) < 11_100 and a.window["truncated"] and a.window["total_chars"] > 800_000
    assert a.text_digest != b.text_digest  # two texts that differ only in the middle stay different versions
    short = FileFacts.from_artifact(ref="F3", path="c.txt", body={"text": "kurz"})
    assert short.text == "kurz" and short.window["truncated"] is False


def test_the_default_window_is_configured_under_pipeline() -> None:
    cfg = KiConfig.model_validate({"pipeline": {"text_window": {"head_chars": 50_000, "tail_chars": 5_000}}})
    assert (cfg.pipeline.text_window.head_chars, cfg.pipeline.text_window.tail_chars) == (50_000, 5_000)
    default = KiConfig().pipeline.text_window
    assert default.head_chars >= 100_000 and default.tail_chars >= 10_000


def test_the_rules_never_submit_more_than_the_schema_allows() -> None:
    """A long text names hundreds of identifiers and parties: the rules' result still validates."""
    text = "\n".join(f"Aktenzeichen {i} O {1000 + i}/24, HRB {50_000 + i}, Firma Nummer{i} Bau GmbH"
                     for i in range(400))
    reading = read_document({"text": text, "format": "txt"}, "akte.txt", None, firm_names=[], known=[])
    assert len(reading.identifiers) > MAX_IDENTIFIERS and len(reading.mentions) > MAX_PARTIES

    class NoTools:
        tool_calls: list = []

        def call(self, name, **kwargs):
            return {"results": [], "children": [], "node": None}

    result = MetadataRulesPolicy(reading).decide([], NoTools())
    assert len(result.identifiers) == MAX_IDENTIFIERS and len(result.parties) == MAX_PARTIES


def test_index_helpers_read_only_the_opening_of_a_huge_text() -> None:
    text = "\n\n   \n  Klageschrift der Müller Bau GmbH  \n" + "Absatz mit Text. " * 200_000
    doc = StructuredDocument.model_validate({"format": "txt", "converter": "text", "text": text})
    assert header_title(doc) == "Klageschrift der Müller Bau GmbH"
    opening = profile_text("T", None, None, text).split("\n", 1)[1]
    assert " ".join(text.split()).startswith(opening[:-1]) and 300 < len(opening) <= 600
