"""The document's own date (ki.domain.metadata.dates, issue 16 item 6), as a table: own date before cited dates,
the firm's date order, English ordinals, draft stamps, German, Dutch and French month names."""

from __future__ import annotations

import datetime as dt

import pytest

from ki.domain.metadata.dates import date_order_of, document_date, parse_date

D = dt.date


@pytest.mark.parametrize("text, expected, source", [
    # draft stamps: the stamp's date, not the draft it is marked against
    ("KH Draft (3): 16 June 2022 (marked against draft of 6 June 2022)\nSHARE PURCHASE AGREEMENT",
     D(2022, 6, 16), "label"),
    ("DRAFT 2 – 8 November 2023 – SUBJECT TO CONTRACT\nLEASE", D(2023, 11, 8), "label"),
    ("Draft 3: 16/06/2022\nLEASE", D(2022, 6, 16), "label"),
    ("ENTWURF v1 – Stand: 06.03.2023 – Änderungen gegenüber Entwurf v0 vom 01.02.2023 markiert", D(2023, 3, 6),
     "label"),
    ("CONCEPT 2 – 27 december 2023 – wijzigingen t.o.v. concept van 18 december gemarkeerd\nHUUROVEREENKOMST",
     D(2023, 12, 27), "label"),
    ("Concept d.d. 05-07-2022\nHUUROVEREENKOMST", D(2022, 7, 5), "label"),
    ("Versie 3 (5 juli 2022)\nSTATUTEN", D(2022, 7, 5), "label"),
    ("EXECUTION VERSION – 16 June 2022\nLEASE", D(2022, 6, 16), "label"),
    ("THIS AGREEMENT is dated 9th May 2022\nSETTLEMENT AGREEMENT", D(2022, 5, 9), "label"),
    ("Getekend te Amsterdam op 5 juli 2022\nKOOPOVEREENKOMST AANDELEN", D(2022, 7, 5), "label"),
    ("DEFINITIEVE VERSIE – 1 maart 2023\nRAAMOVEREENKOMST", D(2023, 3, 1), "label"),
    # letters: the place-and-date line, not the letter they answer
    ("ASHDOWN PRYCE\nOur ref: 104233-0007\nLondon, 5th July 2022\nWe refer to your letter dated 20 June 2022.",
     D(2022, 7, 5), "place_date"),
    ("Rotterdam, 27 mei 2024\nWij reageren op uw brief van 20 mei 2024.", D(2024, 5, 27), "place_date"),
    ("Bruxelles, le 5 juillet 2022\nNous nous référons à votre courrier du 20 juin 2022.", D(2022, 7, 5),
     "place_date"),
    ("Our ref: 1/2\n5th July 2022\nDear Sirs", D(2022, 7, 5), "date_line"),
    # invoices, extracts, notices, judgments, minutes
    ("INVOICE\nInvoice no.: 22/01038\nInvoice date: 5th July 2022", D(2022, 7, 5), "label"),
    ("Companies House\nExtract produced on 3 March 2023", D(2023, 3, 3), "label"),
    ("Uittreksel Handelsregister\nUittreksel vervaardigd op 3 maart 2023", D(2023, 3, 3), "label"),
    ("VONNIS\nuitgesproken op 12 april 2024\n1. De rechtbank", D(2024, 4, 12), "label"),
    ("MINUTES OF A MEETING OF THE BOARD\nheld on 5th July 2022 at 1 King Street\n1. The chair reported on the "
     "agreement dated 9th May 2022.", D(2022, 7, 5), "meeting"),
    ("DAGVAARDING\nHeden, 11 juni 2024, op verzoek van X B.V.", D(2024, 6, 11), "label"),
    ("HEADS OF TERMS\nSUBJECT TO CONTRACT – 2 May 2022\nParties: A Ltd and B Ltd", D(2022, 5, 2), "label"),
    ("Model – bijgewerkt op 21 april 2021\nGEHEIMHOUDINGSOVEREENKOMST", D(2021, 4, 21), "label"),
    ("Precedent – last updated 11 April 2021", D(2021, 4, 11), "label"),
    ("VOLMACHT\nDe ondergetekende verleent volmacht.\nGetekend op 29 augustus 2022.", D(2022, 8, 29), "label"),
    ("BLUEFIELD MEDIA INC.\nWilmington, Delaware, 14th September 2023\nDear Sirs", D(2023, 9, 14), "place_date"),
    # a pleading dated at its foot; the contract it cites is not its date
    ("PARTICULARS OF CLAIM\n1. By an agreement dated 5th May 2021 the Defendant engaged the Claimant.\n" + "x\n" * 800
     + "Dated 20th June 2022", D(2022, 6, 20), "label_anywhere"),
])
def test_own_date_before_cited_dates(text, expected, source):
    assert document_date({"text": text}, None) == (expected, source)


def test_mail_header_and_mtime_fallback():
    assert document_date({"text": "x", "mail": {"date": "2022-07-05T23:30:00+01:00"}}, None) == (D(2022, 7, 5),
                                                                                                 "mail")
    mtime = int(dt.datetime(2025, 3, 1, 12, tzinfo=dt.UTC).timestamp() * 1e9)
    assert document_date({"text": "no date at all, only the draft of 6 June"}, mtime) == (D(2025, 3, 1), "mtime")
    assert document_date({"text": ""}, None) == (None, None)


@pytest.mark.parametrize("value, order, expected", [
    ("05/07/2022", "dmy", D(2022, 7, 5)), ("05/07/2022", "mdy", D(2022, 5, 7)),
    ("13/06/2022", "mdy", D(2022, 6, 13)), ("06/13/2022", "dmy", D(2022, 6, 13)),
    ("5-7-2022", "dmy", D(2022, 7, 5)), ("05.07.2022", "dmy", D(2022, 7, 5)),
    ("5th July 2022", "dmy", D(2022, 7, 5)), ("5th of July 2022", "dmy", D(2022, 7, 5)),
    ("July 5th, 2022", "dmy", D(2022, 7, 5)), ("July 5, 2022", "dmy", D(2022, 7, 5)),
    ("1st March 2023", "dmy", D(2023, 3, 1)), ("22nd Sept 2023", "dmy", D(2023, 9, 22)),
    ("5 juli 2022", "dmy", D(2022, 7, 5)), ("1 mrt. 2023", "dmy", D(2023, 3, 1)),
    ("17 mei 2024", "dmy", D(2024, 5, 17)),
    ("1er juillet 2022", "dmy", D(2022, 7, 1)), ("15 août 2023", "dmy", D(2023, 8, 15)),
    ("8. März 2023", "dmy", D(2023, 3, 8)), ("2023-11-08", "mdy", D(2023, 11, 8)),
    ("31/02/2022", "dmy", None), ("13/13/2022", "dmy", None),
])
def test_parse_date(value, order, expected):
    assert parse_date(value, order) == expected


def test_date_order_from_the_firm_or_the_text():
    assert date_order_of("anything", "mdy") == "mdy"
    assert date_order_of("Signed on July 5, 2022. Date: 07/05/2022", None) == "mdy"
    assert date_order_of("Signed on 5 July 2022. Date: 07/05/2022", None) == "dmy"
    assert document_date({"text": "Date: 07/05/2022"}, None, date_order="mdy") == (D(2022, 7, 5), "label")
    assert document_date({"text": "Date: 07/05/2022"}, None) == (D(2022, 5, 7), "label")
