"""Synthetic law-firm estates of other firms' conventions, each with a ``truth.json``.

The schema of ``truth.json`` is the one of ``shared/corpus/estate-dev`` (see its README): the
generators here write the same keys, plus ``firm.matter_reference_patterns`` and ``firm.date_order``
(the settings the firm would configure) and a practice-management matter list
(``practice_management.csv``, the file ``ki matters import`` reads).

* :mod:`bench.estates.english` — an English/international firm exporting from a DMS: document
  numbers with versions, client-matter numbers, flat folders, compare PDFs, Outlook quoted headers;
* :mod:`bench.estates.dutch` — a Dutch firm: Dutch documents, ``Ons kenmerk``, ``Van:/Verzonden:``,
  B.V./N.V., KvK numbers, Dutch month names, ``Antw:``/``Doorst:``, a few French letters.

Run ``python -m bench.estates english|dutch --seed N --matters M --out DIR [--check]``. The same
seed and matter count give byte-identical files (standard library only).
"""
