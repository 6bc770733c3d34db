"""Dutch wording of the plans (:mod:`bench.estates.plans`): tables of templates (see
:mod:`bench.estates.wording` for the placeholders) and the contracts' negotiable points.
"""

from __future__ import annotations

from typing import Any

from bench.estates.builder import Knob
from bench.estates.model import Doc, Entity

LANG = "nl"
LABELS = {"engagement": "Opdrachtbevestiging", "invoice": "Declaratie", "file_note": "Dossiernotitie",
          "demand": "Sommatie", "answer": "Reactie op sommatie"}
ACCEPTABLE = {"heads_of_terms": ["term_sheet"], "variation": ["amendment"], "side_letter": ["amendment", "letter"]}
FOLDERS = {"precedents": "Modellen", "knowhow": "Kantoor", "post": "Postkamer", "scan": "Scan_"}
SUBFOLDERS = {"mail": "E-mail", "corr": "Correspondentie", "contracts": "Concepten", "signed": "Getekend",
              "court": "Processtukken", "billing": "Declaraties", "notes": "Notities", "engagement": "Opdracht",
              "annex": "Bijlagen", "dd": "Due diligence", "corporate": "Vennootschap"}
SUBFOLDER_LAYOUTS = ("dossier", "named")
COPY_NAMES = ["Kopie van {stem}.{ext}", "{stem} - kopie.{ext}", "{stem} (2).{ext}", "{stem} - Kopie (2).{ext}"]

SUBJECTS = {
    "engagement": "Opdrachtbevestiging – {title}", "demand": "Sommatie – {client}",
    "answer": "{client} / {cp}", "post": "{title}", "client_post": "Cliëntnummer {client_number}",
    "send": "{doc_title} – concept ter beoordeling", "forward": "{doc_title} ontvangen",
    "intake": {"litigation": "Geschil met {cp_short}", "employment": "Arbeidszaak – vervolg",
               "lease": "{cp_short} – huur", "ma": "Project {code}", "commercial": "{client_short} / {cp_short} – "
               "raamovereenkomst", "corporate": "Statutenwijziging"}}

LETTERS = {
    "engagement": ["Hartelijk dank voor uw opdracht aan {firm} om {client} bij te staan inzake {title_lower}.",
                   "?cp Wij hebben een conflictcheck uitgevoerd ten aanzien van {cp}; er is geen belangenconflict.",
                   "{lawyer_full} is als advocaat verantwoordelijk voor het dossier, bijgestaan door {assistant}.",
                   "Onze werkzaamheden worden op basis van bestede tijd gedeclareerd tegen de uurtarieven in de "
                   "bijgevoegde algemene voorwaarden."],
    "demand": ["Wij treden op namens {client}. Wij schrijven u in verband met de overeenkomst tussen onze cliënte en "
               "{cp} van {k1}.",
               "De facturen van onze cliënte tot een bedrag van € {amount_eur} zijn onbetaald gebleven. Wij sommeren "
               "u dit bedrag binnen veertien dagen te voldoen, bij gebreke waarvan wij een procedure aanhangig "
               "zullen maken."],
    "answer": ["Wij treden op namens {cp} en reageren op uw brief van {demand_date}.",
               "Onze cliënte betwist dat enig bedrag verschuldigd is. De werkzaamheden waren ondeugdelijk.",
               "Wij verzoeken u alle verdere correspondentie aan ons kantoor te richten."],
    "post": ["Wij verwijzen naar bovengenoemde zaak en ons recente telefoongesprek.",
             "Graag ontvangen wij binnen veertien dagen uw voorstel voor het vervolg."],
    "client_post": ["Bijgaand treft u de stukken aan waar u namens {client} om vroeg.",
                    "Bel mij gerust als u nog iets nodig heeft."],
}
FRENCH_LETTERS = {
    "post": ["Nous nous référons au dossier mentionné ci-dessus et à notre récent entretien téléphonique.",
             "Nous vous saurions gré de nous faire part de vos propositions dans un délai de quatorze jours."],
    "answer": ["Nous intervenons pour {cp} et nous nous référons à votre courrier du {demand_date}.",
               "Notre cliente conteste être redevable d'un quelconque montant.",
               "Nous vous prions d'adresser toute correspondance future à notre cabinet."],
}
FOREIGN_LETTERS = {"fr": FRENCH_LETTERS}

MAILS = {
    "intake_1": {"litigation": ["Beste {lawyer},", "", "{cp} heeft onze facturen nog steeds niet betaald. Wij willen "
                                "dat jullie dit oppakken.", "Laat maar weten wat je van ons nodig hebt."],
                 "employment": ["Beste {lawyer},", "", "Wij hebben jullie hulp nodig bij de arbeidszaak die we "
                                "telefonisch bespraken."],
                 "lease": ["Beste {lawyer},", "", "Wij zijn het eens geworden met {cp} en willen graag dat jullie de "
                           "huurovereenkomst opstellen."],
                 "ma": ["Beste {lawyer},", "", "Zoals besproken willen wij dat jullie ons bijstaan bij de transactie "
                        "met {cp}."],
                 "commercial": ["Beste {lawyer},", "", "Kunnen jullie de concept-raamovereenkomst met {cp} "
                                "beoordelen?"],
                 "corporate": ["Beste {lawyer},", "", "Het bestuur wil de statuten vóór het nieuwe boekjaar "
                               "wijzigen."]},
    "intake_2": ["Beste {contact},", "", "Dank voor je opdracht. Wij hebben een dossier geopend en sturen je "
                 "binnenkort onze opdrachtbevestiging.", "Ons dossiernummer is {ref}."],
    "intake_3": ["Dank je {lawyer},", "", "Helder. Ik bel je morgen."],
    "send": ["Beste {contact},", "", "Bijgaand het laatste concept van de {doc_title} ter beoordeling.",
             "Graag ontvang ik je opmerkingen voor het einde van de week."],
    "send_reply": ["Dank je.", "", "Wij hebben op dit moment geen verdere opmerkingen. Ga je gang."],
    "forward": ["Zie hieronder – ter informatie voor het dossier."],
    "forward_court": ["Beste {contact},", "", "Bijgaand de {doc_title} die wij vandaag hebben ontvangen. Wij komen er "
                      "spoedig bij je op terug.", "?case_known Zaaknummer {case} – ons kenmerk {ref}"],
}

HEADS = {
    "court": ["#{COURT}", "Zaaknummer: {case}", "in de zaak van", "{CLIENT}, eiseres,", "tegen", "{CP}, gedaagde.",
              ""],
    "tribunal": ["#{court}", "Zaaknummer: {case}"],
}

DOCS: dict[str, dict[str, Any]] = {
    "claim": {"title": "Dagvaarding", "doc_type": "statement_of_claim", "lines": [
        "=DAGVAARDING", "Heden, {d}, op verzoek van {client_desc}, eiseres, die woonplaats kiest ten kantore van "
        "{firm},", "heb ik gedagvaard {cp_desc}, gedaagde,", "om te verschijnen ter terechtzitting van de {court}.",
        "Zaaknummer: {case}", "1. Bij overeenkomst van {k1} heeft gedaagde eiseres opdracht gegeven.",
        "2. Eiseres vordert betaling van € {amount_eur}, vermeerderd met de wettelijke rente."]},
    "defence": {"title": "Conclusie van antwoord", "doc_type": "statement_of_defence", "head": "court", "lines": [
        "=CONCLUSIE VAN ANTWOORD", "1. Gedaagde reageert hierbij op de dagvaarding van {claim_date}.",
        "2. Gedaagde betwist de vordering.", "Advocaat van gedaagde: {oc}", "{d}"]},
    "reply": {"title": "Conclusie van repliek", "doc_type": "brief", "head": "court", "lines": [
        "=CONCLUSIE VAN REPLIEK", "1. Eiseres reageert op de conclusie van antwoord van {defence_date}.",
        "Advocaat van eiseres: {firm} (kenmerk {ref})", "{d}"]},
    "order": {"title": "Tussenvonnis", "doc_type": "court_order", "head": "court", "lines": [
        "=TUSSENVONNIS", "De rechtbank bepaalt dat een mondelinge behandeling zal plaatsvinden.",
        "Dit vonnis is gewezen en in het openbaar uitgesproken op {d}."]},
    "judgment": {"title": "Vonnis", "doc_type": "judgment", "head": "court", "lines": [
        "=VONNIS", "uitgesproken op {d}", "1. De rechtbank wijst de vordering gedeeltelijk toe."]},
    "et1": {"title": "Verzoekschrift ontbinding arbeidsovereenkomst", "doc_type": "statement_of_claim",
            "head": "tribunal", "lines": [
                "=VERZOEKSCHRIFT ONTBINDING ARBEIDSOVEREENKOMST", "Verzoekster: {employer}", "Werknemer: {employee}",
                "Verzoekster verzoekt de kantonrechter de arbeidsovereenkomst te ontbinden.", "Datum: {d:numeric}"]},
    "et3": {"title": "Verweerschrift", "doc_type": "statement_of_defence", "head": "tribunal", "lines": [
        "=VERWEERSCHRIFT", "Werknemer: {employee}", "Verzoekster: {employer}",
        "Werknemer voert verweer tegen het verzoekschrift van {et1_date:numeric}.", "Gemachtigde: {employer_rep}",
        "Datum: {d:numeric}"]},
    "notice": {"title": "Oproeping mondelinge behandeling", "doc_type": "court_order", "head": "tribunal", "lines": [
        "=OPROEPING", "Datum: {d}", "De mondelinge behandeling vindt plaats op {hearing} om 10.30 uur."]},
    "appendix_employment": {"title": "Arbeidsovereenkomst", "doc_type": "employment", "label": "Bijlage 1",
                            "lines": ["#BIJLAGE 1", "=ARBEIDSOVEREENKOMST", "tussen {employer} en {employee}",
                                      "Datum: {d}", "1. Werknemer treedt met ingang van deze datum in dienst als "
                                      "operationeel manager."]},
    "appendix_plan": {"title": "Plattegrond", "doc_type": None, "label": "Bijlage 1", "lines": [
        "#BIJLAGE 1", "=PLATTEGROND", "Plattegrond van het gehuurde behorende bij de huurovereenkomst tussen {client} "
        "en {cp}.", "Datum tekening: {d}"]},
    "heads_of_terms": {"title": "Intentieverklaring", "doc_type": "term_sheet", "lines": [
        "=INTENTIEVERKLARING", "Datum: {d}", "Partijen: {client} en {cp}",
        "Deze intentieverklaring is niet bindend, behoudens de bepalingen over geheimhouding en exclusiviteit."]},
    "variation": {"title": "Allonge", "doc_type": "amendment", "lines": [
        "=ALLONGE BIJ HUUROVEREENKOMST", "Datum: {d}", "Partijen: {client_desc} en {cp_desc}.",
        "Deze allonge wijzigt de huurovereenkomst van {cite_date} tussen partijen.",
        "1. De huurprijs wordt met ingang van het volgende kwartaal verlaagd."]},
    "side_letter": {"title": "Allonge raamovereenkomst", "doc_type": "amendment", "lines": [
        "{d}", "Aan: {cp}", "=ALLONGE", "Wij verwijzen naar de raamovereenkomst van {cite_date} tussen {client} en u. "
        "Met ingang van heden wordt artikel 3 van de overeenkomst gewijzigd."]},
    "register_extract": {"title": "Uittreksel Handelsregister", "doc_type": "register_extract", "lines": [
        "#Kamer van Koophandel", "=Uittreksel Handelsregister", "Naam: {TARGET}",
        "?target_reg KvK-nummer: {target_reg}", "Bezoekadres: {target_address}",
        "Bestuurder: {director}", "Uittreksel vervaardigd op {d}", "BIJLAGE 2"]},
    "minutes": {"title": "Notulen", "doc_type": "minutes", "lines": [
        "#{CLIENT}", "=NOTULEN VAN DE VERGADERING VAN HET BESTUUR", "gehouden op {d} te {client_address}",
        "1. De voorzitter doet verslag van de {cited} van {cite_date}.", "2. Het bestuur keurt deze goed."]},
    "resolution": {"title": "Aandeelhoudersbesluit", "doc_type": "shareholder_resolution", "lines": [
        "=BESLUIT VAN DE ALGEMENE VERGADERING BUITEN VERGADERING", "van {CLIENT}", "?client_reg (KvK {client_reg})",
        "Datum: {d}",
        "De aandeelhouders besluiten de statuten te wijzigen overeenkomstig het ontwerp van {cite_date}."]},
    "poa": {"title": "Volmacht", "doc_type": "power_of_attorney", "lines": [
        "=VOLMACHT", "De ondergetekende, {client_desc},", "verleent hierbij volmacht aan {lawyer_full} van {firm} om "
        "namens haar opgaven aan het Handelsregister te doen.", "Getekend op {d}."]},
    "dd_report": {"title": "Due diligence rapport", "doc_type": "dd_report", "lines": [
        "=JURIDISCH DUE DILIGENCE RAPPORT", "Project {code} – {target}", "Datum rapport: {d}",
        "Opgesteld door {firm} voor {client}.", "1. Vennootschapsrecht: geen bijzonderheden. 2. Contracten: twee "
        "overeenkomsten bevatten een change of control-bepaling."]},
    "invoice": {"title": "Declaratie", "doc_type": "invoice", "letterhead": True, "lines": [
        "=DECLARATIE", "Declaratienummer: {number}", "Datum: {invoice_date}", "Cliënt: {client} (cliëntnummer "
        "{client_number})", "Dossier: {ref} – {title}", "", "Honorarium voor werkzaamheden tot en met {period_end}: "
        "{hours} uur à € {rate} per uur.", "Betaling binnen 30 dagen."]},
    "file_note": {"title": "Dossiernotitie", "doc_type": "memo", "lines": [
        "#DOSSIERNOTITIE", "?note_dated Datum: {d:numeric}", "?note_ref Dossier: {ref}",
        "Aanwezig: {lawyer_full}, {contact_full} ({client})", "", "Telefonisch overleg met cliënt over "
        "{title_lower}. Vervolgstappen en planning besproken.", "?cp Cliënt bevestigt dat {cp} geen voorstel heeft "
        "gedaan."]},
    "precedent_nda": {"title": "Geheimhoudingsovereenkomst", "doc_type": "nda",
                      "file": "Model geheimhoudingsovereenkomst.docx", "lines": [
                          "Model – bijgewerkt op {d}", "=GEHEIMHOUDINGSOVEREENKOMST",
                          "DE ONDERGETEKENDEN: [PARTIJ A] en [PARTIJ B].",
                          "1. Ontvangende partij houdt de Vertrouwelijke Informatie [twee] jaar geheim."]},
    "precedent_engagement": {"title": "Opdrachtbevestiging", "doc_type": "engagement_letter",
                             "file": "Model opdrachtbevestiging.docx", "lines": [
                                 "[Briefpapier]", "Model – bijgewerkt op {d}", "Opdrachtbevestiging – [zaak]",
                                 "Hartelijk dank voor uw opdracht om [cliënt] bij te staan inzake [zaak]."]},
    "knowhow": {"title": "Nieuwsbrief arbeidsrecht", "doc_type": None, "file": "Nieuwsbrief arbeidsrecht.pdf",
                "lines": ["#{letterhead}", "=Nieuwsbrief arbeidsrecht – wat verandert er dit jaar", "{d}",
                          "Onze nieuwsbrief over de transitievergoeding, flexibel werken en de nieuwe wetgeving."]},
}
CITED = {"ma": "koopovereenkomst aandelen", "corporate": "ontwerp-statuten"}

STAMPS = {"draft": {"concept": "CONCEPT {k} – {d}", "dd": "Concept d.d. {d:numeric}", "versie": "Versie {k} ({d})"},
          "marked": " – wijzigingen t.o.v. concept van {prev:short} gemarkeerd", "final": "DEFINITIEVE VERSIE – {d}",
          "signed": "Getekend te {city} op {d}"}
CONTRACT = {"between": "DE ONDERGETEKENDEN:", "of": "van {party}", "party": "{i}. {party}, hierna: \"{role}\"{end}",
            "sign_company": "Namens {party}: {person}", "sign_person": "{party}"}
COMPARE = {"Litera": ["#Litera Compare – Vergelijkingsrapport", "Origineel: {older}", "Gewijzigd: {newer}",
                      "Vergeleken op: {d:numeric} {time}", "Invoegingen: {ins}   Verwijderingen: {dels}"],
           "Workshare": ["#Workshare Compare – {older} vs {newer}", "Origineel: {older}", "Gewijzigd: {newer}",
                         "Vergeleken op: {d:numeric} {time}", "Invoegingen: {ins}   Verwijderingen: {dels}"],
           "names": {"Litera": "Vergelijking v{o} met v{n} - {title}.pdf",
                     "Workshare": "Workshare Compare - {older_stem} vs {newer_stem}.pdf"}}

FORMS = {"B.V.": "een besloten vennootschap met beperkte aansprakelijkheid",
         "N.V.": "een naamloze vennootschap"}


def subject_tag(b: Any, subject: str) -> str:
    """A subject with the firm's dossier tag (``… [2023.0145]``), when the firm uses one."""
    tag = b.est.subject_tag
    return f"{subject} {tag.format(ref=b.m.ref)}" if tag else subject


def describe(b: Any, doc: Doc, e: Entity) -> str:
    """A contract's description of a party (name, legal form, seat, register number)."""
    if e.kind == "person":
        return f"{doc.name(e)}, wonende te {e.city}"
    name = doc.name(e)
    reg = e.register
    num = doc.ident("register_number", reg["value"], reg["issuer"], e) if reg else ""
    if getattr(e, "form", "") in FORMS:
        return f"{name}, {FORMS[e.form]}, statutair gevestigd te {e.city}, ingeschreven in het handelsregister van " \
               f"de Kamer van Koophandel onder nummer {num}"
    return f"{name}, een vennootschap naar het recht van {e.country}, gevestigd te {e.city}" + (
        f", ingeschreven bij {reg['issuer']} onder nummer {num}" if reg else "")


def _k(name: str, *values: str, rationales=()) -> Knob:
    return Knob(name, values=list(values), rationales=list(rationales))


def _o(name: str, text: str, rationales=()) -> Knob:
    return Knob(name, text=text, rationales=list(rationales))


CONTRACTS: dict[str, dict[str, Any]] = {
    "spa": {"title": "Koopovereenkomst aandelen", "doc_type": "spa", "roles": ("Verkoper", "Koper"), "knobs": lambda: [
        _k("price", "€ 12.500.000", "€ 12.000.000", "€ 11.750.000", rationales=["Naar aanleiding van het DD-rapport."]),
        _k("cap", "100% van de Koopprijs", "50% van de Koopprijs", "30% van de Koopprijs"),
        _k("period", "24 maanden", "18 maanden", "12 maanden"),
        _o("noncompete", "Verkoper zal gedurende drie jaar geen concurrerende activiteiten verrichten.",
           rationales=["Cliënt wil de goodwill beschermen."])],
        "clauses": [("Artikel 1 Koop en verkoop", ["Verkoper verkoopt aan Koper, die koopt, de Aandelen."]),
                    ("Artikel 2 Koopprijs", ["De koopprijs bedraagt ", ("price",), ", te voldoen bij de levering."]),
                    ("Artikel 3 Aansprakelijkheid", ["De aansprakelijkheid van Verkoper is beperkt tot ", ("cap",),
                                                     ". Aanspraken vervallen na ", ("period",), "."]),
                    ("Artikel 4 Concurrentiebeding", [("noncompete",)]),
                    ("Artikel 5 Toepasselijk recht", ["Op deze overeenkomst is Nederlands recht van toepassing."])]},
    "nda": {"title": "Geheimhoudingsovereenkomst", "doc_type": "nda", "roles": ("Verstrekker", "Ontvanger"),
            "knobs": lambda: [_k("term", "twee jaar", "drie jaar", "vijf jaar")],
            "clauses": [("Artikel 1 Geheimhouding", ["Ontvanger houdt de Vertrouwelijke Informatie geheim gedurende ",
                                                     ("term",), "."]),
                        ("Artikel 2 Toepasselijk recht",
                         ["Op deze overeenkomst is Nederlands recht van toepassing."])]},
    "msa": {"title": "Raamovereenkomst", "doc_type": "supply_agreement", "roles": ("Leverancier", "Afnemer"),
            "knobs": lambda: [
                _k("fees", "€ 25.000 per maand", "€ 23.500 per maand", "€ 22.000 per maand"),
                _k("liability", "het in de voorafgaande 12 maanden betaalde bedrag", "€ 1.000.000",
                   rationales=["De verzekering dekt maximaal € 1 miljoen."]),
                _o("audit", "Afnemer mag eenmaal per jaar een audit laten uitvoeren."),
                _k("notice", "zes maanden", "drie maanden", "twaalf maanden")],
            "clauses": [("Artikel 1 Diensten", ["Leverancier verleent de Diensten conform Bijlage 1."]),
                        ("Artikel 2 Vergoeding", ["Afnemer betaalt ", ("fees",), "."]),
                        ("Artikel 3 Aansprakelijkheid", ["De aansprakelijkheid is beperkt tot ", ("liability",), "."]),
                        ("Artikel 4 Audit", [("audit",)]),
                        ("Artikel 5 Opzegging", ["Elke partij kan opzeggen met inachtneming van ", ("notice",), "."])]},
    "lease": {"title": "Huurovereenkomst", "doc_type": "lease", "roles": ("Verhuurder", "Huurder"), "knobs": lambda: [
        _k("rent", "€ 148.000 per jaar", "€ 142.500 per jaar", "€ 139.000 per jaar",
           rationales=["Zo afgesproken bij de bezichtiging."]),
        _k("term", "vijf jaar", "tien jaar", "vijf jaar met een optie op verlenging van vijf jaar"),
        _o("break", "Huurder kan de huurovereenkomst na vijf jaar tussentijds opzeggen."),
        _k("index", "jaarlijkse indexering op basis van de CPI", "jaarlijkse indexering met een maximum van 3%")],
        "clauses": [("Artikel 1 Het gehuurde", ["Verhuurder verhuurt aan Huurder de bedrijfsruimte voor ", ("term",),
                                                "."]),
                    ("Artikel 2 Huurprijs", ["De huurprijs bedraagt ", ("rent",), ", per kwartaal vooruit te "
                                                                                  "voldoen."]),
                    ("Artikel 3 Indexering", ["De huurprijs is onderworpen aan ", ("index",), "."]),
                    ("Artikel 4 Tussentijdse opzegging", [("break",)])]},
    "settlement": {"title": "Vaststellingsovereenkomst", "doc_type": "settlement", "roles": ("Eiseres", "Gedaagde"),
                   "knobs": lambda: [
                       _k("sum", "€ 85.000", "€ 72.500", "€ 65.000"),
                       _o("confidential", "Partijen houden de inhoud van deze overeenkomst geheim."),
                       _k("costs", "ieder der partijen draagt de eigen kosten", "Gedaagde vergoedt de proceskosten van "
                                                                                "Eiseres")],
                   "clauses": [("Artikel 1 Betaling", ["Gedaagde betaalt aan Eiseres ", ("sum",),
                                                       " ter finale kwijting."]),
                               ("Artikel 2 Kosten", ["", ("costs",), "."]),
                               ("Artikel 3 Geheimhouding", [("confidential",)])]},
    "termination": {"title": "Vaststellingsovereenkomst beëindiging", "doc_type": "termination_agreement",
                    "roles": ("Werkgever", "Werknemer"), "knobs": lambda: [
                        _k("date", "de arbeidsovereenkomst eindigt op 31 maart", "de arbeidsovereenkomst eindigt op "
                                                                                 "30 april"),
                        _k("payment", "€ 38.000", "€ 42.500", "€ 45.000", rationales=["Afgesproken in het gesprek."]),
                        _o("reference", "Werkgever verstrekt een positief getuigschrift."),
                        _k("garden", "Werknemer is vrijgesteld van werk tot de einddatum.",
                           "Werknemer blijft werkzaam tot de einddatum.")],
                    "clauses": [("Artikel 1 Einde dienstverband", ["Partijen komen overeen dat ", ("date",), "."]),
                                ("Artikel 2 Vergoeding", ["Werkgever betaalt Werknemer een vergoeding van ",
                                                          ("payment",), "."]),
                                ("Artikel 3 Vrijstelling", [("garden",)]),
                                ("Artikel 4 Getuigschrift", [("reference",)])]},
    "articles": {"title": "Statuten", "doc_type": "articles", "roles": ("Vennootschap",), "knobs": lambda: [
        _k("quorum", "twee bestuurders", "één bestuurder", "twee bestuurders, onder wie de investeerder-bestuurder"),
        _o("drag", "Aandeelhouders met 75% van de aandelen kunnen de overige aandeelhouders verplichten mee te "
                   "verkopen."),
        _k("transfer", "met goedkeuring van de algemene vergadering", "vrij aan een Toegestane Verkrijger")],
        "clauses": [("Artikel 1 Bestuur", ["Het bestuur besluit met ", ("quorum",), "."]),
                    ("Artikel 2 Blokkeringsregeling", ["Aandelen kunnen worden overgedragen ", ("transfer",), "."]),
                    ("Artikel 3 Meeverkoopplicht", [("drag",)])]},
}
