"""The main language of a text: ``de`` or ``en`` (or None when neither is evident). Pure.

Spec: insertion-pipeline.md "Extract metadata" (language). Counts frequent function words of each
language over the text (quoted e-mail lines included: a reply quoting a German thread in English is
rare enough); ties and texts without function words give None.
"""

from __future__ import annotations

import re
from collections import Counter

GERMAN = frozenset("""der die das und ist nicht mit den dem des ein eine einer eines zu von für auf im
sich wir sie ihr ihre unsere unser wird werden wurde sind bei oder als auch nach vom zum zur über
gemäß bitte vielen dank mit freundlichen grüßen sehr geehrte geehrter anbei hiermit""".split())
ENGLISH = frozenset("""the and of to in is for with on that this be by as are we our your you it from
at shall will an or please find attached dear regards kind best which has have been not any""".split())
WORD = re.compile(r"[a-zäöüß]+")


def detect_language(text: str, *, max_chars: int = 20_000) -> str | None:
    """``de`` / ``en`` by function-word counts over the first ``max_chars`` characters; None if unclear."""
    counts = Counter(WORD.findall((text or "")[:max_chars].casefold()))
    de = sum(n for w, n in counts.items() if w in GERMAN)
    en = sum(n for w, n in counts.items() if w in ENGLISH)
    if de == en:
        return None
    return "de" if de > en else "en"
