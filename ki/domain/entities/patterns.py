"""Regular expressions that find names of companies, law firms, courts and persons in text.

Used by :mod:`ki.domain.entities.mentions`. Names are matched on the text as written; line breaks inside a
legal form or between a name and its legal form are allowed (PDF text layers break lines
anywhere), line breaks inside the distinctive part of a name are not.
"""

from __future__ import annotations

import re

from ki.domain.ontology.terms import fold

#: One capitalised word of a name (also all-caps letterheads, digits, ``Dr.``, ``Nürnberg-Fürth``).
CAP = r"(?:[A-ZÄÖÜ][\wÄÖÜäöüßéèáàóòíìúùçñ'’.\-]*|\d[\w.\-]*)"
#: Words that join the parts of a name (Dutch and German two-word particles first: ``Jansen van der Berg``).
JOIN = r"(?:[Vv]an[ \t]+(?:der|den|de|het|'t)|von[ \t]+der|&|\+|und|and|u\.|of|de|van|von|du|la|le)"
#: A Dutch surname's particle before a company's first capitalised word: ``Van der Linden Zorg N.V.``,
#: ``van den Berg Bouw B.V.``, ``Van 't Hek B.V.``, ``In 't Veld B.V.`` (``der``/``den`` alone stay German articles).
DUTCH_PREFIX = r"(?:(?:[Vv]an|VAN)[ \t]+(?:der|den|de|het|'t|DER|DEN|DE)[ \t]+|(?:In|IN)[ \t]+'t[ \t]+)"
NAME = rf"(?:{DUTCH_PREFIX})?{CAP}(?:[ \t]+(?:{JOIN}[ \t]+)?{CAP}){{0,6}}"

#: Legal forms as written (the longest alternatives first).
LEGAL_FORM = (
    r"(?:GmbH\s*(?:&|und|u\.)\s*Co\.?\s*KG(?:aA)?|AG\s*&\s*Co\.?\s*KG|SE\s*&\s*Co\.?\s*KG|"
    r"Gesellschaft\s+mit\s+beschränkter\s+Haftung|G\.\s?m\.\s?b\.\s?H\.|gGmbH|GmbH|GMBH|mbH|"
    r"Aktiengesellschaft|AKTIENGESELLSCHAFT|KGaA|Kommanditgesellschaft|KG|OHG|UG\s*\(haftungsbeschränkt\)|UG|"
    r"e\.\s?V\.|eG|GbR|AG|SE|Limited|LIMITED|Ltd\.?|LTD\.?|PLC|plc|[Pp]\.\s?[Ll]\.\s?[Cc]\.|"
    r"L\.\s?L\.\s?C\.|LLC|L\.\s?L\.\s?P\.|L\.\s?P\.|Incorporated|Inc\.?|INC\.?|"
    r"Corporation|Corp\.?|B\.\s?V\.|BV|N\.\s?V\.|NV|Aktiebolag|AB|A/S|Oy|S\.A\.S\.|SAS|S\.À\s?R\.L\.|S\.A\.|SA|"
    r"S\.à\s?r\.l\.|S\.r\.l\.|S\.p\.A\.|LLP|PartG\s+mbB|PartG|Partnerschaftsgesellschaft\s+mbB)"
)
#: The legal form stands apart from the name (``LEASE`` is not ``LEA`` + ``SE``, ``HOUSE`` not ``HOU`` + ``SE``),
#: or follows a hyphen (``Rheintal-GmbH``).
COMPANY = re.compile(rf"(?<![\w&])(?P<name>{NAME})(?:[ \t]+\n?[ \t]*|[ \t]*\n[ \t]*|(?<=-))(?P<form>{LEGAL_FORM})"
                     rf"(?![\wÄÖÜäöü])")

#: Law firms named without a legal form.
LAW_FIRM_WORD = (r"(?:Rechtsanwälte|Rechtsanwaltsgesellschaft|Rechtsanwaltskanzlei|Attorneys\s+at\s+Law|Solicitors|"
                 r"Law\s+Firm)")
LAW_FIRM = re.compile(
    rf"(?<![\w&])(?:(?P<kanzlei>(?:Kanzlei|Advocatenkantoor|Advocatenpraktijk|Notariskantoor|Cabinet)[ \t]+{NAME})|"
    rf"(?P<named>{NAME})[ \t]*\n?[ \t]*{LAW_FIRM_WORD}|"
    rf"(?P<kollegen>{CAP}[ \t]+&[ \t]+Kollegen))(?![\w])")

def either_case(words: str) -> str:
    """``words`` as written in title case or in capitals (``County Court`` | ``COUNTY COURT``): court and
    legal-form words in a heading are often set in capitals, their lower-case forms are ordinary words."""
    return f"(?:{words}|{words.upper()})"


COURT_TYPES = either_case(r"Landgerichts?|Amtsgerichts?|Arbeitsgerichts?|Oberlandesgerichts?|Landesarbeitsgerichts?|"
                          r"Bundesgerichtshofs?|Bundesarbeitsgerichts?|Verwaltungsgerichts?|Oberverwaltungsgerichts?|"
                          r"Finanzgerichts?|Sozialgerichts?|Kammergerichts?")
CITY = (r"[A-ZÄÖÜ][\wäöüß]+(?:-[A-ZÄÖÜ][\wäöüß]+)*(?:\s(?:am|an der|im|in der|AM|AN DER|IM|IN DER)\s[A-ZÄÖÜ][\wäöüß]+)?"
        r"(?:[ \t](?:I{1,3}|IV)(?![\w]))?")
#: A place in an English court's name, title case or capitals, never a word of the heading around it
#: (``IN THE COUNTY COURT AT LEEDS``: the place is Leeds; ``London Central Employment Tribunal``).
_PLACE_WORD = (r"(?!(?i:in|the|at|of|and|before|between|claimant|respondent|applicant|defendant|appellant|dear|re|to)"
               r"\b)(?:[A-Z][a-z]+|[A-Z]{2,})")
_PLACE = rf"{_PLACE_WORD}(?:[ \t]+{_PLACE_WORD}){{0,2}}"
_SP = r"[ \t]+"
#: A word of a High Court division's or list's name (``King's Bench``, ``KING'S BENCH``, ``Business and Property``).
_DIVISION_WORD = r"(?:[A-Z][\w'’]*|and|AND)"
#: Courts of other countries, in title case or capitals: Dutch (``Rechtbank Gelderland``, ``Gerechtshof Den Haag``,
#: ``Hoge Raad``), English (``Employment Tribunal (Leeds)``, ``London Central Employment Tribunal``, ``High
#: Court``, ``Commercial Court``, ``County Court at Leeds``, ``IN THE COUNTY COURT AT LEEDS``, ``Leeds County
#: Court``, ``Court of Appeal``, ``Crown Court at Leeds``; the High Court with its division and list: ``High Court of
#: Justice, King's Bench Division, Commercial Court``).
OTHER_COURTS = (rf"{either_case('Rechtbank|Gerechtshof')}{_SP}(?:{either_case('Den')}{_SP})?[A-Z][\w\-]+|"
                rf"{either_case('Hoge')}{_SP}{either_case('Raad')}|"
                rf"(?:{_PLACE}{_SP})?{either_case('Employment')}{_SP}(?:{either_case('Appeal')}{_SP})?"
                rf"{either_case('Tribunal')}(?:[ \t]*\({_PLACE}\))?|"
                rf"(?:{either_case('The')}{_SP})?{either_case('High')}{_SP}{either_case('Court')}"
                rf"(?:{_SP}{either_case('of')}{_SP}{either_case('Justice')})?"
                rf"(?:,?{_SP}(?:{_DIVISION_WORD}{_SP}){{1,3}}{either_case('Division')})?"
                rf"(?:,?{_SP}(?:{_DIVISION_WORD}{_SP}){{0,3}}{either_case('Courts?|List')})?|"
                rf"{either_case('Commercial')}{_SP}{either_case('Court')}(?:[ \t]*\(KBD\))?|"
                rf"{either_case('Court')}{_SP}{either_case('of')}{_SP}{either_case('Appeal')}|"
                rf"(?:{_PLACE}{_SP})?{either_case('County|Crown|Family')}{_SP}{either_case('Court')}"
                rf"(?:{_SP}{either_case('at')}{_SP}{_PLACE})?|"
                rf"(?:{either_case('First')}|{either_case('Upper')})-{either_case('tier')}{_SP}{either_case('Tribunal')}")
COURT = re.compile(rf"(?<![\w])(?P<court>(?:{COURT_TYPES}|LG|ArbG|OLG|LAG|VG|OVG)[ \t]*\n?[ \t]*{CITY}|BGH|BAG|"
                   rf"{OTHER_COURTS})(?![\w])")
#: Context that makes a court the issuer of a register number, not a party (checked around the match).
REGISTER_CONTEXT_BEFORE = re.compile(r"(?:Handelsregister(?:\s+[AB])?\s+des|Registergericht|eingetragen\s+(?:beim|im"
                                     r"\s+Handelsregister\s+des)|\(local\s+court\)\s+of|Sitz\s+\w+\s+·?|"
                                     r"ingeschreven\s+(?:bij|in)(?:\s+(?:het|de))?|registered\s+(?:with|at|in)"
                                     r"(?:\s+the)?|immatricul[ée]+e?\s+(?:au|auprès\s+du))\s*$",
                                     re.IGNORECASE)
#: After the court: the register number (``HRB 94824``), also behind ``unter`` / ``onder nummer`` / ``under no.``.
REGISTER_CONTEXT_AFTER = re.compile(r"^\)?\s*(?:,\s*)?(?:(?:unter|onder|under|sous)\s+(?:(?:het\s+)?(?:nummer|number|"
                                    r"no\.?|numéro|n°)\s+)?)?(?:HRB|HRA|PR|GnR|VR|GsR)\s*\d")

#: A person: first name(s) and surname, optionally with a salutation or title.
SALUTATION = r"(?:(?:Frau|Herrn?|Mr\.?|Mrs\.?|Ms\.?)[ \t]+)?(?:(?:Dr\.|Prof\.)[ \t]+)*"
#: Name particles inside a person's name (``Marloes de Boer``, ``N. van der Berg``).
PARTICLE = r"(?:van|de|der|den|von|te|ten|ter|du|da|di|la|le)"
#: First name(s) and surname; the surname may carry particles (``Marloes de Boer``, ``Jan van der Berg``).
FULL_PERSON = (r"[A-ZÄÖÜ][a-zäöüßéè]+(?:-[A-ZÄÖÜ][a-zäöüßéè]+)?"
               rf"(?:[ \t]+(?:{PARTICLE}[ \t]+){{0,2}}[A-ZÄÖÜ][a-zäöüßéè]+(?:-[A-ZÄÖÜ][a-zäöüßéè]+)?){{1,2}}")
#: A person written as initials and surname: ``N. Ogilvie``, ``N Ogilvie``, ``N.J. Ogilvie``, ``H.-P. Schmidt``,
#: ``M. de Boer`` (resolved to the matter's full-name person by :mod:`ki.domain.entities.abbreviations`).
#: Undotted initials (``N Ogilvie``) only where a party label says a name follows.
_SURNAME_AFTER_INITIALS = rf"(?:{PARTICLE}[ \t]+)*[A-ZÄÖÜ][a-zäöüßéè]+(?:-[A-ZÄÖÜ][a-zäöüßéè]+)?"
DOTTED_INITIALS_PERSON = rf"(?:[A-ZÄÖÜ]\.(?:-?[A-ZÄÖÜ]\.)*[ \t]*){{1,3}}{_SURNAME_AFTER_INITIALS}"
INITIALS_PERSON = rf"(?:[A-ZÄÖÜ]\.(?:-?[A-ZÄÖÜ]\.)*[ \t]*|[A-ZÄÖÜ][ \t]+){{1,3}}{_SURNAME_AFTER_INITIALS}"
#: The same surname first: ``Ogilvie, N.``, ``Boer, M. de``.
INITIALS_PERSON_REVERSED = (r"[A-ZÄÖÜ][a-zäöüßéè]+(?:-[A-ZÄÖÜ][a-zäöüßéè]+)?,[ \t]+"
                            r"(?:[A-ZÄÖÜ]\.(?:-?[A-ZÄÖÜ]\.)*[ \t]*){1,3}"
                            rf"(?:[ \t]*{PARTICLE}(?![\w]))*")
PERSON = rf"(?:{FULL_PERSON}|{DOTTED_INITIALS_PERSON})"
STREET_LINE = r"[A-ZÄÖÜ][\wäöüß.\- ]{2,40}\s\d+[a-z]?"
#: "Almut Fehrs, Lahnstraße 171" — a person with an address is a party, not a signatory.
PERSON_WITH_ADDRESS = re.compile(rf"(?<![\w])(?P<sal>{SALUTATION})(?P<name>{PERSON}),[ \t]+{STREET_LINE}")
#: "Bas Brouwer, wonende te Arnhem" — a party described by where it lives (nl ``wonende/woonachtig te``,
#: de ``wohnhaft in``, en ``residing at/in``, fr ``demeurant à``, ``domicilié(e) à``).
PERSON_RESIDING = re.compile(rf"(?<![\w])(?P<sal>{SALUTATION})(?P<name>{PERSON}),?[ \t]+(?:wonende|wonend|woonachtig|"
                             r"wohnhaft|residing|resident|demeurant|domicilié|domiciliée)[ \t]+(?:te|in|at|à)(?![\w])")
#: "tussen De Vries Techniek B.V. en Marloes de Boer" — a person after a company in a party list.
PERSON_AFTER_COMPANY = re.compile(rf"(?<![\w])(?:{LEGAL_FORM})[ \t]+(?:en|and|und|et)[ \t]+{SALUTATION}"
                                  rf"(?P<name>{FULL_PERSON})(?=[ \t]*(?:[,.;:(]|\n|$))")
#: "Niamh Ogilvie of 143 Colmore Row, Reading" — an English party with an address.
PERSON_OF_ADDRESS = re.compile(rf"(?<![\w])(?P<sal>{SALUTATION})(?P<name>{PERSON})[ \t]+of[ \t]+"
                               r"\d{1,4}[A-Za-z]?[ \t,]+[A-Z]")
#: A person as a party label writes them ("Werknemer: Marloes de Boer"); name particles (``de``, ``van der``)
#: allowed; initials and a surname too ("Claimant: Dr. N. Ogilvie", "Respondent: Ogilvie, N.").
PARTY_LABEL = (r"claimant|respondent|applicant|defendant|appellant|werknemer|werkgever|verzoeker|verzoekster|"
               r"verweerder|verweerster|eiser|eiseres|gedaagde|kläger(?:in)?|beklagte[rn]?|arbeitnehmer(?:in)?|"
               r"client|cliënt|opdrachtgever|mandant(?:in)?|auftraggeber(?:in)?|employee")
LABELLED_PERSON = re.compile(
    rf"(?m)^[ \t]*(?i:{PARTY_LABEL})[ \t]*:[ \t]*{SALUTATION}(?P<name>[A-Z][a-zäöüéè]+"
    rf"(?:[ \t]+(?:{PARTICLE}[ \t]+)*[A-Z][a-zäöüéè]+(?:-[A-Z][a-zäöüéè]+)?){{1,3}}|{INITIALS_PERSON_REVERSED}|"
    rf"{INITIALS_PERSON})[ \t]*(?:\([^()\n]{{0,60}}\)[ \t]*)?[,.(]?[ \t]*$")
#: A party in brackets in an attendance line, behind the person who attended for it ("Attending: <our lawyer>,
#: <contact> (<party>)", "Aanwezig: …", "Anwesend: …").
ATTENDANCE_LINE = re.compile(r"(?m)^[ \t]*(?i:attending|attendees|present|anwesend|teilnehmer|aanwezig|"
                             r"présents?)[ \t]*:[^\n]*$")
BRACKETED_PERSON = re.compile(rf"\((?P<name>{FULL_PERSON})\)")
#: A street with its number first (English: ``115 King Street``, ``1 Moorgate Place``).
STREET_NUMBER_FIRST = r"\d{1,4}[A-Za-z]?[ \t]+[A-Z][\w'’.\-]*(?:[ \t]+[A-Z][\w'’.\-]*){0,4}"
#: A British post code (``LS1 9JR``, ``EC2R 6EA``, ``M2 9UN``).
UK_POSTCODE = r"[A-Z]{1,2}\d[A-Z\d]?[ \t]?\d[A-Z]{2}"
#: The post code and town of an address: ``20095 Hamburg``, ``6811 AB Arnhem``, ``Leeds LS1 9JR``.
POSTAL_TOWN = (rf"(?:\d{{4,5}}(?:[ \t]+[A-Z]{{2}})?[ \t]+[A-ZÄÖÜ]|[A-Z][\w'’\-]+(?:[ \t]+[A-Z][\w'’\-]+){{0,2}},?[ \t]+"
               rf"{UK_POSTCODE}(?![\w]))")
#: An address block: the party on one line, then the street and the post code with its town, on one line
#: (``115 King Street, Leeds LS1 9JR``) or two, in German, Dutch or English order.
PERSON_ADDRESS_BLOCK = re.compile(rf"(?m)^[ \t>]*(?P<sal>{SALUTATION})(?P<name>{PERSON})[ \t]*\n[ \t>]*"
                                  rf"(?:{STREET_LINE}|{STREET_NUMBER_FIRST})[ \t]*(?:,[ \t]*|[ \t]*\n[ \t>]*)"
                                  rf"{POSTAL_TOWN}")
#: A letter's writer says it represents someone: its letterhead is a law firm's (``We act for X``, ``wir vertreten``,
#: ``wij treden op namens``, ``nous représentons``).
WE_REPRESENT = re.compile(r"(?i:\b(?:we|wir|wij|nous)[ \t]+(?:act[ \t]+(?:for|on[ \t]+behalf[ \t]+of)|represent|"
                          r"are[ \t]+instructed[ \t]+by|vertreten|treden[ \t]+op[ \t]+(?:namens|voor)|"
                          r"staan[ \t]+[^\n]{0,40}?[ \t]+bij|agissons[ \t]+pour|représentons)\b)")
#: Either side of a rubrum "A ./. B" (also "gg.", "vs.", "._.").
RUBRUM = re.compile(rf"(?P<left>{SALUTATION}{PERSON}|{NAME})[ \t]+(?:\./\.|gg\.|vs\.?|v\.|\._\.)[ \t]+"
                    rf"(?P<right>{SALUTATION}{PERSON}|{NAME})")
#: "Fehrs, Almut - Kündigungsschutz" (a DMS folder naming a person surname first).
SURNAME_FIRST = re.compile(r"^(?P<last>[A-ZÄÖÜ][a-zäöüß]+(?:-[A-ZÄÖÜ][a-zäöüß]+)?),[ \t]+"
                           r"(?P<first>[A-ZÄÖÜ][a-zäöüß]+(?:-[A-ZÄÖÜ][a-zäöüß]+)?)(?:[ \t]+[-–]|$)")

#: A company match that swallowed two names joined by "and"/"und" ("Rheintal AG and Thornfield Pharma Ltd"), or a
#: name and the next sentence's description ("Larkspur Holdings Ltd. A Private Company Limited").
TWO_NAMES = re.compile(rf"\s(?P<form>{LEGAL_FORM})(?:[ \t]+(?:and|und|sowie)[ \t]+|(?<=\.)[ \t]+(?=(?:A|An|The)[ \t])|"
                       rf"\.[ \t]+(?=(?:A|An|The)[ \t]))")
#: A list of parties on one line: "Parties: A and B", "between A and B", "tussen A en B", "zwischen A und B".
PARTY_LIST_BEFORE = re.compile(r"(?i)(?:\b(?:parties|partijen|parteien)[ \t]*:|\b(?:between|tussen|zwischen|entre)\b)"
                               r"[^\n]*$")
#: A person's full name joined to the company after it ("Niamh Ogilvie and Caldera Holdings Limited"); not
#: "… and Sons / Partners / Co" (part of the company's own name).
PERSON_AND = re.compile(rf"(?P<person>{FULL_PERSON})[ \t]+(?:and|und|en|et)[ \t]+"
                        r"(?!(?:Sons|Partners?|Co|Company|Associates|Brothers|Zonen|Söhne|Fils|Cie)\b)")
#: Words that end a street or a cadastral designation, never a person's name.
NOT_A_PERSON = re.compile(r"(?:straße|strasse|str\.|weg|allee|platz|ring|damm|kamp|stieg|gasse|ufer|chaussee|markt|"
                          r"avenue|lane|road|street|square|place|drive|court|park|way|row|hill|gardens|terrace|crescent|close|mews|"
                          r"wharf|quay|walk|grove|yard|parade|embankment|circus|green|gate|straat|laan|plein|gracht|"
                          r"kade|singel|dijk|steeg|gemarkung|flur|flurstück)$|"
                          r"(?:heit|keit|ung|schaft|zentrum|halle|lager|gebäude|fläche|flächen|einheit|objekt)\b|"
                          r"^(?:gemarkung|flur|amtsgericht|landgericht|arbeitsgericht)\b", re.IGNORECASE)
#: Text that is never a name: e-mail addresses and web addresses (``kessler-claussen.example``).
ADDRESS_NOISE = re.compile(r"[\w.+-]+@[\w.-]+|https?://\S+|www\.\S+|\b[\w-]+\.(?:example|com|de|org|net|eu|uk|io)\b")
#: Four digits before a two-letter "court": a Dutch post code (``5674 LG Eindhoven``), not the Landgericht.
POSTCODE_BEFORE = re.compile(r"(?<!\d)\d{4}[ \t]$")
#: A court named as the place where a judge sits ("Richter am Landgericht X"), not as a party.
JUDGE_CONTEXT = re.compile(r"(?:Richter(?:in)?|Vorsitzende[rn]?|Präsident(?:in)?)\s+am\s*$")

#: Between a company's current name and its former one: ``X Ltd (formerly Y Ltd)``, ``X Ltd, formerly known as
#: Y Ltd``, ``X Ltd (previously Y Ltd)``, ``X GmbH (vormals Y GmbH)``, ``X B.V. (voorheen Y B.V.)``, ``X SA
#: (anciennement Y SA)``, ``X Inc. f/k/a Y Inc.``.
FORMERLY = re.compile(r"\s*[,(\[]?\s*(?i:formerly(?:[ \t]+(?:known[ \t]+as|called|named))?|previously"
                      r"(?:[ \t]+(?:known[ \t]+as|called|named))?|f/k/a|fka|vormals|ehemals|früher|zuvor|"
                      r"bisher|voorheen|voorheen[ \t]+genaamd|anciennement|auparavant|ex)\s*:?\s*(?:the[ \t]+)?"
                      r"(?:firma[ \t]+)?")
#: Between a company's former name and its current one: ``Y Limited having by special resolution changed its name,
#: is now incorporated under the name of X Limited`` (a certificate of incorporation on change of name), ``Y Ltd,
#: now known as X Ltd``, ``Y GmbH, jetzt X GmbH``, ``Y GmbH (nunmehr X GmbH)``, ``Y B.V., thans X B.V.``.
NOW_CALLED = re.compile(r"(?s)\s*(?:,|\()?\s*(?i:having\b.{0,160}?\bchanged[ \t]+its[ \t]+name.{0,120}?"
                        r"\bunder[ \t]+the[ \t]+name(?:[ \t]+of)?|"
                        r"(?:(?:is|has[ \t]+been)[ \t]+)?now[ \t]+(?:known[ \t]+as|called|named|trading[ \t]+as)|"
                        r"is[ \t]+now|"
                        r"renamed(?:[ \t]+(?:to|as))?|jetzt|nunmehr|umfirmiert[ \t]+(?:in|zu)|thans|"
                        r"(?:nu[ \t]+)?genaamd|désormais|devenue?)\s*:?\s*(?:the[ \t]+)?")
#: Capitalised words that start a sentence or a label rather than a name.
LEADING_STOP = frozenset(fold(w) for w in """
die der das den dem des ein eine the a an and und zwischen between von für for mit with gegen against an am im in
bei auf aus nach zur zum vor über unter durch wir sie er es ihr unsere unser our your ihre firma company client
mandant mandantin mandantschaft klägerin kläger beklagte beklagten beklagter antragstellerin antragsgegnerin
verkäuferin käuferin seller purchaser buyer vendor landlord tenant vermieter mieter arbeitgeber arbeitnehmer
employer employee counterparty gegenseite gesellschafterin gesellschaft geschäftsanteile shares share sale
agreement vertrag schedule anlage annex exhibit herr herrn frau mr mrs ms dear sehr attn hd to from cc re aw wg fw
fwd subject betreff betrifft namens auftrag vollmacht rechtsstreit sache angelegenheit matter project projekt
sitz amtsgericht registergericht handelsregister gemäß laut per dated vom dem vertreten durch represented by
einverstanden agreed accepted signed unterzeichnet behalf on of rechnung invoice nr no
vergleich urteil beschluss antrag streit sachen rechtssache streitsache interessen forderung offene offener
verfahren klage schreiben angebot mandat
vertretung kündigung lieferungen zahlung betreff ref az aktenzeichen zeichen hinweis entwurf draft re kopie copy
""".split())


def name_pattern(name: str) -> re.Pattern[str]:
    """A case-insensitive pattern finding ``name`` as written in other spellings of the same letters.

    ``ß`` also matches ``ss``, umlauts also match their ``ae``/``oe``/``ue`` spelling, any run of
    whitespace or punctuation between words matches any other (``GmbH & Co. KG`` ~ ``GmbH & Co KG``).
    """
    body = r"[\W_]{1,4}".join(_word_regex(word) for word in re.findall(r"[\wÄÖÜäöüß]+", name))
    return re.compile(rf"(?<![\w]){body}(?![\w])", re.IGNORECASE)


def _word_regex(word: str) -> str:
    chars = []
    i = 0
    while i < len(word):
        pair = word[i:i + 2].lower()
        if pair in ("ss", "ae", "oe", "ue"):
            chars.append({"ss": "(?:ss|ß)", "ae": "(?:ae|ä)", "oe": "(?:oe|ö)", "ue": "(?:ue|ü)"}[pair])
            i += 2
            continue
        low = word[i].lower()
        alt = {"ß": "(?:ß|ss)", "ä": "(?:ä|ae)", "ö": "(?:ö|oe)", "ü": "(?:ü|ue)"}.get(low)
        chars.append(alt or re.escape(word[i]))
        i += 1
    return "".join(chars)


#: Professional suffixes a firm's name is written with or without (``Solicitors``, ``LLP``, ``Rechtsanwälte``).
FIRM_SUFFIX = (r"(?:LLP|Solicitors|Rechtsanw(?:ä|ae)lte|Rechtsanwaltsgesellschaft(?:[ \t]+mbH)?|"
               r"Partnerschaft(?:sgesellschaft)?(?:[ \t]+mbB)?|PartG(?:[ \t]+mbB)?|mbB|Advocaten|Avocats|Advocates|"
               r"Attorneys(?:[ \t]+at[ \t]+Law)?|Lawyers|Law[ \t]+Firm|Notare|Notarissen)")


def firm_pattern(words: list[str]) -> re.Pattern[str] | None:
    """The firm's distinctive words as written (``["Fairbairn", "Stroud"]``) in any of its spellings:
    joined by spaces, punctuation, ``&``, ``and``, ``und``, ``en`` or ``et``, with or without professional
    suffixes (:data:`FIRM_SUFFIX`) — ``Fairbairn & Stroud``, ``Fairbairn Stroud Solicitors``, ``FAIRBAIRN
    STROUD Rechtsanwälte``; case-insensitive. None for fewer than two words (too weak on its own)."""
    if len(words) < 2:
        return None
    join = r"(?:[\W_]{1,4}(?:(?:&|and|und|en|et)[\W_]{1,4})?)"
    body = join.join(_word_regex(w) for w in words)
    suffix = rf"(?:[ \t]*,?[ \t]+{FIRM_SUFFIX}(?![\w]))*"
    return re.compile(rf"(?<![\w]){body}(?![\w]){suffix}", re.IGNORECASE)
