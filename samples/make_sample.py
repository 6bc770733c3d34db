"""Write ki's sample estate: a small German/English law-firm file share (``samples/estate/``).

    python samples/make_sample.py [--out samples/estate]

Three matters of an invented firm (Brandt Hoffmann Rechtsanwälte, ``brandt-hoffmann.example``) and its
office folder: Word drafts with tracked changes and comments, e-mails with attachments (and one mbox),
PDFs with a text layer, two scans (image-only PDFs that ki's built-in OCR reads) and plain-text notes.
Every name, company and address is invented; every domain is ``.example``. The output is deterministic
(same bytes on every run) and committed with this script; ``tests/unit/test_sample_estate.py`` checks both.
``--out`` is replaced entirely.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # formats.py beside this script, run from anywhere

from formats import Comment, Del, Docx, Ins, Mail, docx_bytes, eml_bytes, mbox_bytes, pdf_bytes, scan_pdf_bytes

DEFAULT_OUT = Path(__file__).resolve().parent / "estate"

FIRM = "Brandt Hoffmann Rechtsanwälte PartG mbB"
BRANDT = ("Dr. Jana Brandt", "j.brandt@brandt-hoffmann.example")
HOFFMANN = ("Malte Hoffmann", "m.hoffmann@brandt-hoffmann.example")
OKAFOR = ("Grace Okafor", "g.okafor@brandt-hoffmann.example")
LINDQVIST = ("Karin Lindqvist", "k.lindqvist@lindqvist-moebel.example")
NORDLICHT = ("Sören Albers", "s.albers@nordlicht-logistik.example")
HALVORSEN = ("Erik Halvorsen", "erik.halvorsen@halvorsen-properties.example")
SPEICHER = ("Petra Voss", "p.voss@speicherhaus-verwaltung.example")
KESSLER = ("Johanna Kessler", "johanna.kessler@posteo.example")

A = "Mandate/2024-017 Lindqvist Möbel GmbH gg. Nordlicht Logistik AG"
B = "Mandate/2024-031 Halvorsen Properties Ltd - Office Lease Speicherstadt"
C = "Mandate/2023-112 Kessler, Johanna - Kündigungsschutz"
OFFICE = "Kanzlei"


def matter_lindqvist(files: dict[str, bytes]) -> None:
    """Supply dispute: a framework supply contract, late deliveries, a draft amendment and a statement of claim."""
    lieferschein = pdf_bytes("Lieferschein Nr. 4711", [
        "Nordlicht Logistik AG, Hafenstraße 12, 20457 Hamburg – an Lindqvist Möbel GmbH, Werkstraße 3, 24103 Kiel.",
        "Lieferdatum: 12.01.2024. Position 1: 24 Eichentische Modell Fjord. Position 2: 96 Stühle Modell Skagen.",
        "Vereinbarter Liefertermin laut Rahmenliefervertrag: 15.12.2023. Die Lieferung erfolgte 28 Tage verspätet.",
    ], author="Nordlicht Logistik AG", date="D:20240112090000+01'00'")
    files[f"{A}/04 Belege/Lieferschein 4711.pdf"] = lieferschein
    files[f"{A}/04 Belege/Scan Lieferschein 4711 mit Empfangsvermerk.pdf"] = scan_pdf_bytes(
        "Lieferschein Nr. 4711 - Empfangsvermerk", [
            "Ware erhalten am 12.01.2024 in Kiel. Zwei Eichentische mit Transportschaden an der Tischplatte.",
            "Empfang unter Vorbehalt bestätigt. Unterschrift: K. Lindqvist, Geschäftsführerin.",
        ], date="D:20240115081500+01'00'")
    files[f"{A}/04 Belege/Rechnung RE-2024-0042.pdf"] = pdf_bytes("Rechnung RE-2024-0042", [
        "Lindqvist Möbel GmbH an Hotel Seeblick Travemünde: Ausstattung Restaurant, 24 Eichentische, 96 Stühle.",
        "Rechnungsbetrag 48.960,00 € brutto. Der Liefertermin 20.12.2023 konnte wegen verspäteter Zulieferung "
        "nicht gehalten werden; das Hotel kürzt die Rechnung um 4.200,00 €.",
    ], author="Lindqvist Möbel GmbH", date="D:20240131120000+01'00'")
    files[f"{A}/02 Verträge/Rahmenliefervertrag 2022 (unterzeichnet).pdf"] = pdf_bytes(
        "Rahmenliefervertrag zwischen Lindqvist Möbel GmbH und Nordlicht Logistik AG", [
            "§ 1 Gegenstand. Nordlicht Logistik AG übernimmt die Beschaffung und Anlieferung von Möbelteilen "
            "aus Skandinavien nach Kiel.",
            "§ 4 Liefertermine. Die in der Einzelbestellung genannten Liefertermine sind verbindlich. Bei "
            "absehbarer Verzögerung informiert der Lieferant unverzüglich in Textform.",
            "§ 9 Haftung. Die Haftung für leichte Fahrlässigkeit ist auf den vorhersehbaren, vertragstypischen "
            "Schaden begrenzt.",
            "Kiel, den 14.03.2022. Für Lindqvist Möbel GmbH: Karin Lindqvist. Für Nordlicht Logistik AG: Sören Albers.",
        ], author="Lindqvist Möbel GmbH", date="D:20220314150000+01'00'")
    nachtrag = Docx("Nachtrag Nr. 1 zum Rahmenliefervertrag vom 14.03.2022 – Entwurf v2", BRANDT[0],
                    "2024-03-11T09:30:00Z")
    nachtrag.add("§ 1 Die Parteien ergänzen § 4 des Rahmenliefervertrags wie folgt.")
    nachtrag.add("Überschreitet der Lieferant einen verbindlichen Liefertermin, schuldet er für jede angefangene "
                 "Woche des Lieferverzugs eine ",
                 Ins("Vertragsstrafe von 0,5 % des Netto-Bestellwerts", BRANDT[0], "2024-03-11T10:02:00Z"),
                 Del("angemessene Entschädigung", BRANDT[0], "2024-03-11T10:02:00Z"), ".")
    nachtrag.add(Comment("Die Vertragsstrafe ist insgesamt auf 5 % des Bestellwerts begrenzt.",
                         "Deckelung mit Mandantin abstimmen – Nordlicht wird 3 % verlangen.", HOFFMANN[0],
                         "2024-03-11T14:40:00Z"))
    nachtrag.add("§ 2 Weitergehende Schadensersatzansprüche bleiben unberührt; die Vertragsstrafe wird auf sie "
                 "angerechnet.", Ins(" Dies gilt nicht für Folgeschäden bei Endkunden.", HOFFMANN[0],
                                     "2024-03-12T08:15:00Z"))
    files[f"{A}/02 Verträge/Rahmenliefervertrag Nachtrag Nr. 1 - Entwurf v2.docx"] = docx_bytes(nachtrag)
    files[f"{A}/01 Korrespondenz/2024-03-13 Nachtrag zur Abstimmung.eml"] = eml_bytes(Mail(
        BRANDT, (LINDQVIST,), "Nachtrag zum Rahmenliefervertrag – Ihre Freigabe", "Wed, 13 Mar 2024 09:05:00 +0100",
        "Sehr geehrte Frau Lindqvist,\n\nanbei der Entwurf des Nachtrags mit unseren Änderungen. Bitte prüfen Sie "
        "insbesondere die Höhe der Deckelung.\n\nMit freundlichen Grüßen\nDr. Jana Brandt\n" + FIRM + "\n",
        (("Nachtrag Nr. 1 - Entwurf v2.docx", docx_bytes(nachtrag)),)))
    files[f"{A}/01 Korrespondenz/2024-03-04 Antwort Nordlicht.pdf"] = pdf_bytes(
        "Ihr Schreiben vom 20.02.2024 – Lieferung Lindqvist Möbel", [
            "Sehr geehrte Frau Dr. Brandt, wir weisen die geltend gemachten Ansprüche zurück. Die Verzögerung "
            "beruhte auf einem Streik im Hafen Göteborg, den wir nicht zu vertreten haben.",
            "Mit freundlichen Grüßen, Sören Albers, Nordlicht Logistik AG.",
        ], author="Nordlicht Logistik AG", date="D:20240304140000+01'00'")
    klage = Docx("Klage – Lindqvist Möbel GmbH gegen Nordlicht Logistik AG (Entwurf)", BRANDT[0],
                 "2024-04-10T08:00:00Z")
    klage.add("An das Landgericht Kiel – Kammer für Handelssachen.")
    klage.add("Namens und in Vollmacht der Klägerin beantragen wir, die Beklagte zu verurteilen, an die Klägerin ",
              Del("4.200,00 €", BRANDT[0], "2024-04-11T09:10:00Z"),
              Ins("6.850,00 €", BRANDT[0], "2024-04-11T09:10:00Z"),
              " nebst Zinsen in Höhe von neun Prozentpunkten über dem Basiszinssatz zu zahlen.")
    klage.add("Begründung: Die Beklagte hat die Lieferung gemäß Lieferschein Nr. 4711 erst am 12.01.2024 und "
              "damit 28 Tage nach dem verbindlichen Liefertermin erbracht. ",
              Comment("Der Endkunde hat die Rechnung um 4.200,00 € gekürzt.", "Kürzungsschreiben des Hotels als "
                      "Anlage K 5 beifügen.", OKAFOR[0], "2024-04-10T16:20:00Z"))
    klage.add("Hinzu kommen die Kosten für die Reparatur von zwei Eichentischen mit Transportschaden.")
    files[f"{A}/03 Schriftsätze/2024-04-10 Klageschrift Entwurf.docx"] = docx_bytes(klage)
    files[f"{A}/03 Schriftsätze/2024-05-15 Klageerwiderung Nordlicht.pdf"] = pdf_bytes(
        "Klageerwiderung – Landgericht Kiel, Az. 14 HKO 27/24", [
            "Die Beklagte beantragt, die Klage abzuweisen. Die Verzögerung beruhte auf einem Streik im Hafen "
            "Göteborg und damit auf höherer Gewalt; die Klägerin wurde am 10.12.2023 per E-Mail informiert.",
            "Der Transportschaden an zwei Tischen wurde nicht unverzüglich gerügt.",
        ], author="Kanzlei Vesterby & Partner", date="D:20240515110000+02'00'")
    mahnung = Docx("Lindqvist Möbel GmbH ./. Nordlicht Logistik AG – Lieferverzug", BRANDT[0], "2024-02-20T10:00:00Z")
    mahnung.add("Sehr geehrter Herr Albers,")
    mahnung.add("wir vertreten die Lindqvist Möbel GmbH. Die mit Einzelbestellung vom 02.11.2023 zugesagte "
                "Lieferung zum 15.12.2023 ist erst am 12.01.2024 erfolgt. Unserer Mandantin ist dadurch ein "
                "Schaden von 4.200,00 € entstanden, den wir Sie bis zum 05.03.2024 zu ersetzen bitten.")
    mahnung.add("Mit freundlichen Grüßen – Dr. Jana Brandt, Rechtsanwältin")
    files[f"{A}/01 Korrespondenz/2024-02-20 Schreiben an Nordlicht - Lieferverzug.docx"] = docx_bytes(mahnung)
    anfrage = Mail(LINDQVIST, (BRANDT,), "Mandatsanfrage: verspätete Lieferung Nordlicht",
                   "Mon, 05 Feb 2024 08:12:00 +0100",
                   "Sehr geehrte Frau Dr. Brandt,\n\nunser Logistikpartner Nordlicht hat die Tische und Stühle für das "
                   "Hotel Seeblick vier Wochen zu spät geliefert. Das Hotel kürzt nun unsere Rechnung. Den "
                   "Lieferschein hänge ich an. Können Sie uns vertreten?\n\nViele Grüße\nKarin Lindqvist\n"
                   "Lindqvist Möbel GmbH, Kiel\n", (("Lieferschein 4711.pdf", lieferschein),))
    files[f"{A}/01 Korrespondenz/2024-02-05 Mandatsanfrage Lindqvist.eml"] = eml_bytes(anfrage)
    vollmacht = Docx("Vollmacht", BRANDT[0], "2024-02-06T09:00:00Z")
    vollmacht.add("Hiermit wird der Kanzlei Brandt Hoffmann Rechtsanwälte PartG mbB Vollmacht erteilt in Sachen "
                  "Lindqvist Möbel GmbH gegen Nordlicht Logistik AG wegen Schadensersatz aus Lieferverzug.")
    vollmacht.add("Ort, Datum, Unterschrift: ______________________")
    files[f"{A}/01 Korrespondenz/2024-02-06 Re Mandatsanfrage - Vollmacht.eml"] = eml_bytes(Mail(
        BRANDT, (LINDQVIST,), "Re: Mandatsanfrage: verspätete Lieferung Nordlicht", "Tue, 06 Feb 2024 11:40:00 +0100",
        "Sehr geehrte Frau Lindqvist,\n\nvielen Dank für Ihre Anfrage. Wir übernehmen das Mandat gern. Bitte senden "
        "Sie uns die unterschriebene Vollmacht und den Rahmenliefervertrag von 2022.\n\nMit freundlichen Grüßen\n"
        "Dr. Jana Brandt\n" + FIRM + "\n", (("Vollmacht Lindqvist.docx", docx_bytes(vollmacht)),),
        in_reply_to=anfrage.message_id))
    files[f"{A}/Aktennotiz 2024-02-06 Telefonat Lindqvist.txt"] = (
        "Aktennotiz – Telefonat mit Frau Lindqvist am 06.02.2024, 10:30 Uhr (Dr. Brandt)\n\n"
        "- Hotel Seeblick kürzt die Rechnung RE-2024-0042 um 4.200 EUR.\n"
        "- Zwei Eichentische beschädigt, Reparatur durch Tischlerei Holm ca. 2.650 EUR.\n"
        "- Frist für Schreiben an Nordlicht: 20.02.2024.\n").encode()


def matter_halvorsen(files: dict[str, bytes]) -> None:
    """Office lease in Hamburg for a Norwegian client: English drafts, a German lease, a handover scan."""
    heads = Docx("Heads of Terms – Office Lease, Speicherstadt Block W, 3rd floor", OKAFOR[0], "2024-02-27T09:00:00Z",
                 language="en-GB")
    heads.add("Landlord: Speicherhaus Verwaltung GmbH. Tenant: Halvorsen Properties Ltd, Oslo branch Hamburg.")
    heads.add("Premises: approximately 640 square metres of office space on the third floor, Block W.")
    heads.add("Term: ten years from 1 July 2024. Rent: 19.50 EUR per square metre per month, indexed to the "
              "German consumer price index.")
    files[f"{B}/Correspondence/2024-03-01 Heads of terms for review.eml"] = eml_bytes(Mail(
        OKAFOR, (HALVORSEN,), "Heads of terms for review – Speicherstadt office", "Fri, 01 Mar 2024 15:05:00 +0100",
        "Dear Erik,\n\nplease find attached the heads of terms we discussed. The landlord has not yet agreed to a "
        "rent-free period; we suggest asking for four months.\n\nKind regards\nGrace Okafor\n" + FIRM + "\n",
        (("Heads of Terms Speicherstadt.docx", docx_bytes(heads)),), language="en-GB"))
    comments_pdf = pdf_bytes("Anmerkungen der Vermieterin zu den Heads of Terms", [
        "Speicherhaus Verwaltung GmbH stimmt einer mietfreien Zeit von zwei Monaten zu. Eine Sonderkündigung "
        "(break option) nach fünf Jahren wird nur gegen Zahlung von sechs Monatsmieten akzeptiert.",
    ], author="Speicherhaus Verwaltung GmbH", date="D:20240312100000+01'00'")
    files[f"{B}/Correspondence/2024-03-12 RE Heads of terms - landlord comments.eml"] = eml_bytes(Mail(
        SPEICHER, (OKAFOR,), "AW: Heads of terms for review – Speicherstadt office", "Tue, 12 Mar 2024 10:30:00 +0100",
        "Sehr geehrte Frau Okafor,\n\nanbei unsere Anmerkungen. Wir bitten um Rückmeldung bis Ende März.\n\n"
        "Mit freundlichen Grüßen\nPetra Voss\nSpeicherhaus Verwaltung GmbH\n",
        (("Anmerkungen Vermieterin.pdf", comments_pdf),)))
    draft2 = Docx("Office Lease Agreement – Speicherstadt Block W (draft v2)", OKAFOR[0], "2024-04-02T10:00:00Z",
                  language="en-GB")
    draft2.add("1. Premises. The Landlord lets to the Tenant the office space on the third floor of Block W, "
               "Speicherstadt, Hamburg, approximately 640 square metres.")
    draft2.add("2. Rent. The monthly rent is EUR 12,800 net of service charges.")
    draft2.add("4. Governing law. This lease is governed by German law; the courts of Hamburg have jurisdiction.")
    files[f"{B}/Lease/Office Lease Agreement - draft v2.docx"] = docx_bytes(draft2)
    lease = Docx("Office Lease Agreement – Speicherstadt Block W (draft v3)", OKAFOR[0], "2024-04-18T13:00:00Z",
                 language="en-GB")
    lease.add("1. Premises. The Landlord lets to the Tenant the office space on the third floor of Block W, "
              "Speicherstadt, Hamburg, approximately 640 square metres.")
    lease.add("2. Rent. The monthly rent is ", Del("EUR 12,800", OKAFOR[0], "2024-04-19T09:00:00Z"),
              Ins("EUR 12,480", OKAFOR[0], "2024-04-19T09:00:00Z"), " net of service charges. ",
              Ins("The Tenant shall pay no rent for the first two months of the term.", OKAFOR[0],
                  "2024-04-19T09:05:00Z"))
    lease.add("3. Break option. ", Comment("The Tenant may terminate this lease with effect from the end of the "
                                           "fifth year on twelve months' notice.",
                                           "Landlord wants six months' rent as a break fee - client to decide.",
                                           BRANDT[0], "2024-04-19T11:30:00Z"))
    lease.add("4. Governing law. This lease is governed by German law; the courts of Hamburg have jurisdiction.")
    files[f"{B}/Lease/Office Lease Agreement - draft v3.docx"] = docx_bytes(lease)
    files[f"{B}/Lease/2024-06-28 Mietvertrag Gewerberaum unterzeichnet.pdf"] = pdf_bytes(
        "Mietvertrag über Gewerberaum – Speicherstadt Block W, 3. Obergeschoss", [
            "Zwischen der Speicherhaus Verwaltung GmbH (Vermieterin) und der Halvorsen Properties Ltd, "
            "Zweigniederlassung Hamburg (Mieterin).",
            "§ 2 Mietzeit: Das Mietverhältnis beginnt am 01.07.2024 und endet am 30.06.2034. § 3 Miete: "
            "12.480,00 € netto monatlich zuzüglich Nebenkosten; die ersten zwei Monate sind mietfrei.",
            "Hamburg, den 28.06.2024.",
        ], author="Speicherhaus Verwaltung GmbH", date="D:20240628170000+02'00'")
    files[f"{B}/Übergabe/Übergabeprotokoll 3. OG (Scan).pdf"] = scan_pdf_bytes(
        "Übergabeprotokoll Büroflächen Speicherstadt Block W", [
            "Übergabe am 01.07.2024 an Halvorsen Properties Ltd. Anwesend: Petra Voss, Erik Halvorsen.",
            "Zählerstand Strom: 48213 kWh. Übergebene Schlüssel: 12 Stück, 3 Transponder.",
            "Mängel: Kratzer im Parkett Raum 3.14, Jalousie Raum 3.02 defekt.",
        ], date="D:20240701143000+02'00'")
    files[f"{B}/Notes/2024-03-05 call note Halvorsen.txt"] = (
        "Call note – Erik Halvorsen, 5 March 2024 (G. Okafor)\n\n"
        "Client wants to move in on 1 July 2024. Priorities: rent-free period, break option after five years, "
        "no personal guarantee from the parent company. Budget ceiling 13,000 EUR per month.\n").encode()


def matter_kessler(files: dict[str, bytes]) -> None:
    """Dismissal protection: the employer's notice, advice by e-mail, a claim with changes, a draft settlement."""
    files[f"{C}/2023-11-03 Kündigung Arbeitgeber.pdf"] = pdf_bytes("Kündigung des Arbeitsverhältnisses", [
        "Sehr geehrte Frau Kessler, hiermit kündigen wir das mit Ihnen bestehende Arbeitsverhältnis ordentlich "
        "und fristgerecht zum 31.01.2024. Weserblick Reederei GmbH, Personalabteilung, Bremen, 03.11.2023.",
    ], author="Weserblick Reederei GmbH", date="D:20231103090000+01'00'")
    files[f"{C}/2023-11-06 Erstberatung Kessler.eml"] = eml_bytes(Mail(
        HOFFMANN, (KESSLER,), "Ihre Kündigung – Frist für die Kündigungsschutzklage", "Mon, 06 Nov 2023 17:20:00 +0100",
        "Sehr geehrte Frau Kessler,\n\nwie besprochen muss die Kündigungsschutzklage innerhalb von drei Wochen nach "
        "Zugang der Kündigung beim Arbeitsgericht Bremen eingehen, also bis zum 24.11.2023. Wir bereiten die "
        "Klage vor.\n\nMit freundlichen Grüßen\nMalte Hoffmann\n" + FIRM + "\n"))
    klage = Docx("Kündigungsschutzklage – Kessler gegen Weserblick Reederei GmbH", HOFFMANN[0], "2023-11-20T08:30:00Z")
    klage.add("An das Arbeitsgericht Bremen-Bremerhaven.")
    klage.add("Es wird festgestellt, dass das Arbeitsverhältnis der Parteien durch die Kündigung vom 03.11.2023 "
              "nicht aufgelöst ", Del("wird", HOFFMANN[0], "2023-11-21T10:00:00Z"),
              Ins("worden ist", HOFFMANN[0], "2023-11-21T10:00:00Z"), ".")
    klage.add("Die Klägerin ist seit 2015 als Disponentin beschäftigt. ",
              Comment("Eine Sozialauswahl hat nicht stattgefunden.", "Vergleichbare Kollegen in Bremerhaven "
                      "benennen lassen.", BRANDT[0], "2023-11-21T12:00:00Z"))
    files[f"{C}/2023-11-20 Kündigungsschutzklage.docx"] = docx_bytes(klage)
    vergleich = Docx("Vergleichsentwurf – Kessler ./. Weserblick Reederei GmbH", HOFFMANN[0], "2024-01-09T09:00:00Z")
    vergleich.add("1. Das Arbeitsverhältnis endet mit Ablauf des 31.03.2024 aus betriebsbedingten Gründen.")
    vergleich.add("2. Die Beklagte zahlt eine Abfindung von ", Del("18.000,00 €", HOFFMANN[0], "2024-01-10T09:00:00Z"),
                  Ins("24.500,00 €", HOFFMANN[0], "2024-01-10T09:00:00Z"), " brutto.")
    vergleich.add("3. Die Klägerin erhält ein wohlwollendes Arbeitszeugnis mit der Note gut.")
    files[f"{C}/2024-01-09 Vergleich Entwurf.docx"] = docx_bytes(vergleich)
    files[f"{C}/2024-02-01 Protokoll Gütetermin.pdf"] = pdf_bytes("Arbeitsgericht Bremen-Bremerhaven – Protokoll", [
        "Gütetermin am 01.02.2024 in Sachen Kessler ./. Weserblick Reederei GmbH, Az. 6 Ca 1187/23.",
        "Die Parteien schließen auf Vorschlag des Gerichts einen Vergleich: Beendigung zum 31.03.2024, Abfindung "
        "24.500,00 € brutto, Zeugnis mit der Note gut.",
    ], author="Arbeitsgericht Bremen-Bremerhaven", date="D:20240201113000+01'00'")


def office(files: dict[str, bytes]) -> None:
    """The firm's own folder: a circular, a template and an mbox export of the front-office inbox."""
    files[f"{OFFICE}/Rundschreiben 2024-01 Fristenkontrolle.txt"] = (
        "Rundschreiben 1/2024 – Fristenkontrolle\n\n"
        "Ab Februar werden alle Fristen zusätzlich im zentralen Fristenkalender eingetragen. Die Vorfrist beträgt "
        "eine Woche. Verantwortlich: Malte Hoffmann.\n\n"
        "Circular 1/2024 – deadline control: from February every deadline is also entered in the central "
        "calendar, with a one-week advance notice.\n").encode()
    template = Docx("Vollmacht (Vorlage)", BRANDT[0], "2021-09-01T09:00:00Z")
    template.add("Hiermit wird der Kanzlei " + FIRM + " Vollmacht erteilt in Sachen ______ wegen ______.")
    template.add("Die Vollmacht erstreckt sich auf alle Prozesshandlungen einschließlich Vergleichsabschluss.")
    files[f"{OFFICE}/Vorlagen/Vollmacht Vorlage.docx"] = docx_bytes(template)
    files[f"{OFFICE}/Intranet/Zuständigkeiten.html"] = (
        '<!DOCTYPE html>\n<html lang="de"><head><meta charset="utf-8"><title>Zuständigkeiten</title></head>\n'
        "<body><h1>Zuständigkeiten der Kanzlei</h1>\n<ul>\n<li>Handels- und Vertriebsrecht: Dr. Jana Brandt</li>\n"
        "<li>Arbeitsrecht: Malte Hoffmann</li>\n<li>Real estate and leases (English-speaking clients): "
        "Grace Okafor</li>\n</ul>\n</body></html>\n").encode()
    files[f"{OFFICE}/Posteingang/Postfach Export 2024-05.mbox"] = mbox_bytes([
        Mail(("Amtsgericht Kiel", "poststelle@ag-kiel.example"), (HOFFMANN,), "Eingangsbestätigung 14 HKO 27/24",
             "Thu, 02 May 2024 09:00:00 +0200", "Ihre Klageschrift vom 30.04.2024 ist heute eingegangen. "
             "Aktenzeichen: 14 HKO 27/24.\n"),
        Mail(HALVORSEN, (OKAFOR,), "Signed lease – thank you", "Fri, 28 Jun 2024 18:10:00 +0200",
             "Dear Grace,\n\nthe lease is signed. Thank you for getting us two rent-free months.\n\nBest, Erik\n",
             language="en-GB"),
    ])


def build() -> dict[str, bytes]:
    """Relative path → bytes of every file of the sample estate."""
    files: dict[str, bytes] = {}
    for part in (matter_lindqvist, matter_halvorsen, matter_kessler, office):
        part(files)
    return files


def write(out: Path) -> int:
    """Replace ``out`` with the sample estate; returns the number of files written."""
    files = build()
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".sample-") as tmp:
        staging = Path(tmp) / "estate"
        for rel, data in sorted(files.items()):
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    return len(files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"folder to (re)create (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    n = write(args.out)
    print(f"wrote {n} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
