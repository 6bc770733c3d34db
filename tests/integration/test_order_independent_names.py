"""Renamed companies, titled persons, a letterhead in capitals and the firm under other spellings: the same
entities, display names and alias rows in every claim order and with several concurrent workers.

An estate written here (one matter, eleven files) names one company by its old name only, by its new name
only, and by both (``… (formerly …)``, a certificate of change of name); one person with and without
"Dr."; the firm as ``FAIRBAIRN STROUD Rechtsanwälte``, ``Fairbairn & Stroud`` and ``Fairbairn Stroud
Solicitors``; a description (``PRIVATE COMPANY LIMITED BY SHARES``) and role labels (``Buyer's
Solicitors``). Real ``ki insert`` processes insert it into fresh databases with three claim-order seeds,
two and four workers (``bench/order.py``); the entities (name, kind, alias rows, identifiers), export rows
and matter roles are compared, ids aside.

Cost: three insertions of eleven text files, about 20-60 s each.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from bench import order

pytestmark = pytest.mark.timeout(1800)

FIRM = "Fairbairn Stroud LLP"
MATTER = "Matters/2024-031 Larkspur Holdings - Lease Speicherstadt"
FILES = {
    "2024-02-01 Letter to Larkspur.txt": "FAIRBAIRN STROUD Rechtsanwälte\nLarkspur Estates Limited\n12 King Street\n"
                                         "London EC2V 8AB\n\nDear Sirs,\nWe refer to the lease of the third floor.\n",
    "2024-02-03 Note.txt": "Attendance note\nCall with Dr. Jonas Weller, Lindenweg 5 about Larkspur Estates Limited.\n",
    "2024-02-05 Certificate of change of name.txt":
        "CERTIFICATE OF INCORPORATION ON CHANGE OF NAME\nCompany No. 01234567\nThe Registrar of Companies for "
        "England and Wales hereby certifies that\nLARKSPUR ESTATES LIMITED\nhaving by special resolution changed "
        "its name, is now incorporated under the name of\nLARKSPUR HOLDINGS LIMITED\n",
    "2024-02-07 Heads of terms.txt": "HEADS OF TERMS\nParties: Larkspur Holdings Limited (formerly Larkspur Estates "
                                     "Limited) and Bluefield Logistics Ltd\nBuyer's Solicitors: Fairbairn & Stroud\n"
                                     "Seller's Solicitors: Kendrick Pryor LLP\n",
    "2024-02-09 Articles.txt": "THE COMPANIES ACT 2006\nPRIVATE COMPANY LIMITED BY SHARES\nARTICLES OF ASSOCIATION\n"
                               "of\nLarkspur Holdings Limited\n",
    "2024-02-11 Letter from Kendrick Pryor.txt": "Kendrick Pryor LLP\nFairbairn Stroud Solicitors\n\nDear Sirs,\n"
                                                 "Our client Bluefield Logistics Limited has instructed us.\n",
    "2024-02-13 Note Weller.txt": "Attendance note\nJonas Weller, Lindenweg 5 called about Larkspur Holdings Ltd.\n",
    "2024-02-15 Note Weller 2.txt": "Attendance note\nHerrn Jonas Weller, Lindenweg 5\nwegen Larkspur Holdings Ltd.\n",
    "2024-02-17 Board minutes.txt": "Minutes of the board of Larkspur Holdings Ltd.\nPresent: Jonas Weller, "
                                    "Lindenweg 5\n",
    "2024-02-19 Letter to Bluefield.txt": "Fairbairn Stroud LLP\nBluefield Logistics Ltd\n1 Moorgate\nLondon EC2R 6AB"
                                          "\n\nDear Sirs,\nWe act for Larkspur Holdings Limited.\n",
    "2024-02-21 Memo.txt": "Memo\nLarkspur Estates Ltd is now Larkspur Holdings Ltd. A Private Company Limited by "
                           "Shares.\n",
}


def _estate(root: Path, shared: Path) -> Path:
    for name, body in FILES.items():
        path = root / "estate" / MATTER / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    truth = json.loads((shared / "corpus" / "estate-dev" / "truth.json").read_text(encoding="utf-8"))
    truth["firm"] = {**truth["firm"], "name": FIRM, "aliases": []}
    (root / "truth.json").write_text(json.dumps(truth), encoding="utf-8")
    return root


def test_names_parties_and_alias_rows_do_not_depend_on_order_or_workers(pg_server_uri, shared, tmp_path):
    estate = _estate(tmp_path / "named", shared)
    rng = random.Random(38)
    runs = [order.one_run(estate, pg_server_uri, seed=seed, kills=0, rng=rng, workdir=tmp_path / "runs",
                          workers=workers) for seed, workers in ((11, 2), (22, 4), (33, 4))]
    for other in runs[1:]:
        assert order.compare(runs[0], other) == [], f"seed {other.seed}"

    entities = {e["name"]: e for e in runs[0].facts["entities"].values()}
    larkspur = [e for n, e in entities.items() if n.startswith("Larkspur")]
    assert len(larkspur) == 1, sorted(entities)  # the former name is no entity of its own
    assert larkspur[0]["name"].startswith("Larkspur Holdings")  # nor the display name
    assert {"Larkspur Estates Limited", "LARKSPUR ESTATES LIMITED", "Larkspur Holdings Limited"} <= set(
        larkspur[0]["aliases"])
    assert "Jonas Weller" in entities and not any(n.startswith(("Dr.", "Herrn")) for n in entities)
    assert entities[FIRM]["kind"] == "law_firm"
    assert {"FAIRBAIRN STROUD Rechtsanwälte", "Fairbairn & Stroud", "Fairbairn Stroud Solicitors"} <= set(
        entities[FIRM]["aliases"])
    assert not any("Fairbairn" in n and n != FIRM for n in entities)
    assert not any(n.upper().startswith(("PRIVATE COMPANY", "A PRIVATE")) or "Solicitors" == n.split()[-1] and
                   n.split()[0].endswith("'s") for n in entities)
    rows = {r["path"].rsplit("/", 1)[-1]: r for r in runs[0].exports}
    assert {r["matter_reference"] for r in rows.values()} == {"2024-031"}
    assert rows["2024-02-03 Note.txt"]["doc_date"] == "2024-02-03"
    assert rows["2024-02-03 Note.txt"]["doc_date_source"] == "file_name"
