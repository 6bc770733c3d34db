"""Dates from file and folder names, and the mtime as weak evidence (ki.domain.metadata.path_dates)."""

from __future__ import annotations

import datetime as dt

import pytest

from ki.domain.metadata.path_dates import dated, name_date, path_date, uniform_mtimes

D = dt.date


@pytest.mark.parametrize(("name", "expected"), [
    ("2023-11-03 Kündigung Arbeitgeber.pdf", D(2023, 11, 3)),            # ISO first
    ("2023_11_03 Vermerk.docx", D(2023, 11, 3)),                         # ISO with underscores
    ("2023.11.03 Vermerk.docx", D(2023, 11, 3)),                         # ISO with dots
    ("20240117_Schreiben.docx", D(2024, 1, 17)),                         # compact, year first
    ("Board minutes Larkspur Holdings 05.07.2022.docx", D(2022, 7, 5)),  # day first, four-digit year
    ("Aktennotiz 05-07-2022.txt", D(2022, 7, 5)),
    ("Note 5/7/2022.txt", D(2022, 7, 5)),
    ("DD report 16.05.22.docx", D(2022, 5, 16)),                         # two-digit year
    ("Vermerk 16-05-22.docx", D(2022, 5, 16)),
    ("Protokoll vom 3. März 2024.pdf", D(2024, 3, 3)),                   # German month
    ("Attendance note 3 March 2024.docx", D(2024, 3, 3)),                # English month
    ("Attendance note 5th July 2022.docx", D(2022, 7, 5)),               # ordinal
    ("March 3, 2024 memo.pdf", D(2024, 3, 3)),                           # month first
    ("Dossiernotitie 5 juli 2022.docx", D(2022, 7, 5)),                  # Dutch month
    ("Note du 1er juillet 2022.docx", D(2022, 7, 1)),                    # French month
    ("Memo 13.06.2022.docx", D(2022, 6, 13)),                            # day over 12: no doubt
])
def test_a_name_states_its_date(name, expected):
    assert name_date(name) == expected


def test_numeric_name_dates_follow_the_firms_date_order():
    assert name_date("Board minutes 05.07.2022.docx", "mdy") == D(2022, 5, 7)
    assert name_date("Board minutes 05.07.22.docx", "mdy") == D(2022, 5, 7)
    assert name_date("Board minutes 13.07.2022.docx", "mdy") == D(2022, 7, 13)


@pytest.mark.parametrize("name", [
    "Rundschreiben 2024-01 Fristenkontrolle.txt",   # a year and a month
    "2024-031 Halvorsen Properties Ltd",            # a matter reference
    "2023-112 Kessler, Johanna - Kündigungsschutz",
    "104233-0007 Engagement letter.docx",           # client-matter number
    "4811234_3.docx", "#4811234v3 - Lease.docx",    # DMS document numbers
    "Lieferschein 4711.pdf", "Rechnung RE-2024-0042.pdf",
    "20230145 Dossier.docx",                        # eight digits that are no valid date
    "Scan 2024-13-45.pdf",                          # no such day
])
def test_numbers_that_are_no_dates(name):
    assert name_date(name) is None


def test_the_file_name_before_the_folder_names():
    assert path_date("Mandate/2023-05-07 Board meeting/2023-05-09 Minutes.pdf") == (D(2023, 5, 9), "file_name")
    assert path_date("Mandate/2023-05-07 Board meeting/Minutes.pdf") == (D(2023, 5, 7), "folder_name")
    assert path_date("Mandate/2024-031 Halvorsen/Minutes.pdf") == (None, None)


BODY_DATED = {"text": "AKTENNOTIZ\nStand: 06.03.2023\nTelefonat mit der Mandantin."}
BODY_UNDATED = {"text": "AKTENNOTIZ\nTelefonat mit der Mandantin über die Kündigung."}
MTIME = int(dt.datetime(2026, 12, 4, 9, 0, tzinfo=dt.UTC).timestamp() * 1e9)


def test_content_then_file_name_then_folder_then_mtime():
    assert dated(BODY_DATED, "M/2024-02-06 Notiz.txt", MTIME) == (D(2023, 3, 6), "label")
    assert dated(BODY_UNDATED, "M/2024-02-06 Notiz.txt", MTIME) == (D(2024, 2, 6), "file_name")
    assert dated(BODY_UNDATED, "M/Sitzung 2024-02-01/Notiz.txt", MTIME) == (D(2024, 2, 1), "folder_name")
    assert dated(BODY_UNDATED, "M/Notiz.txt", MTIME) == (D(2026, 12, 4), "mtime")
    assert dated(BODY_UNDATED, "M/Notiz.txt", MTIME, mtime_trusted=False) == (None, None)


def test_a_mail_keeps_its_date_header_over_a_dated_file_name():
    body = {"text": "Hallo", "mail": {"date": "2024-02-05T10:00:00+01:00"}}
    assert dated(body, "M/20240301 1200 Re Hallo.eml", MTIME) == (D(2024, 2, 5), "mail")


def test_a_folder_copied_at_once_shares_one_mtime():
    base = MTIME
    assert uniform_mtimes([base, base + 10**9, base + 5 * 10**9]) is True          # a copy: seconds apart
    assert uniform_mtimes([base, base + 86400 * 10**9, base + 3 * 86400 * 10**9]) is False  # edits over days
    assert uniform_mtimes([base, base]) is None                                      # too few to tell
