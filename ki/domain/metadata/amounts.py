"""Money amounts a document states (``EUR 25,000``, ``€ 1.350,00``, ``25.000 EUR``). Pure.

Spec: insertion-pipeline.md "Extract metadata" (identifiers and facts of the document); case R07
("amount ``EUR 25,000`` [is] available to metadata extraction"). Stored in ``document_metadata.facts``.
"""

from __future__ import annotations

import re

CURRENCY = r"(?:EUR|USD|GBP|CHF|SEK|€|\$|£)"
NUMBER = r"\d{1,3}(?:[.,\u00a0 ]\d{3})*(?:[.,]\d{2})?|\d+(?:[.,]\d{2})?"
AMOUNT = re.compile(rf"(?<![\w])(?:(?P<c1>{CURRENCY})\s?(?P<n1>{NUMBER})|(?P<n2>{NUMBER})\s?(?P<c2>{CURRENCY}))"
                    r"(?![\w])")
SYMBOLS = {"€": "EUR", "$": "USD", "£": "GBP"}


def find_amounts(text: str, limit: int = 100) -> list[dict[str, str]]:
    """``[{currency, value, text}]`` in order of appearance, without repeats (value as written)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for m in AMOUNT.finditer(text or ""):
        currency = m.group("c1") or m.group("c2")
        value = (m.group("n1") or m.group("n2")).strip()
        key = (SYMBOLS.get(currency, currency), value)
        if key in seen:
            continue
        seen.add(key)
        out.append({"currency": key[0], "value": value, "text": " ".join(m.group(0).split())})
        if len(out) >= limit:
            break
    return out
