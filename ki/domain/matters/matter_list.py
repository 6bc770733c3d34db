"""Reading a practice-management matter list: CSV with a header row, or JSON lines.

Columns / keys: ``reference`` (required), ``title``, ``client``, ``client_number``, ``opened``, ``closed``
(ISO dates, or ``dd.mm.yyyy`` / ``dd-mm-yyyy`` / ``dd/mm/yyyy``), ``practice_area``, ``kind``,
``responsible``, ``aliases`` (other spellings of the reference: a JSON list, or in CSV separated by
``;`` or ``|``). Header names are matched case-insensitively, with common synonyms (``matter``,
``matter_number``, ``client_name``, ``client_no`` …). The CSV delimiter (``,``, ``;`` or tab) is sniffed.
A row that does not validate is reported with its line number; the other rows still import.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

from ki.core.errors import ConfigurationError

SYNONYMS = {
    "reference": ("reference", "matter", "matter_reference", "matter_number", "matter_no", "ref", "dossier",
                  "dossiernummer", "aktenzeichen", "file_number"),
    "title": ("title", "matter_title", "description", "name", "omschrijving", "bezeichnung"),
    "client": ("client", "client_name", "clientnaam", "mandant", "klant"),
    "client_number": ("client_number", "client_no", "client_id", "clientnummer", "mandantennummer", "klantnummer"),
    "opened": ("opened", "open_date", "date_opened", "geopend", "angelegt"),
    "closed": ("closed", "close_date", "date_closed", "gesloten", "abgeschlossen"),
    "practice_area": ("practice_area", "area", "department", "rechtsgebied", "rechtsgebiet"),
    "kind": ("kind", "matter_kind", "matter_type", "type"),
    "responsible": ("responsible", "responsible_lawyer", "partner", "fee_earner", "behandelaar", "sachbearbeiter"),
    "aliases": ("aliases", "alias", "other_references", "old_reference", "legacy_reference"),
}
_LOOKUP = {s: field for field, names in SYNONYMS.items() for s in names}


def _parse_date(value: str | None) -> dt.date | None:
    v = (value or "").strip()
    if not v:
        return None
    try:
        return dt.date.fromisoformat(v[:10])
    except ValueError:
        pass
    m = re.fullmatch(r"(\d{1,2})[./-](\d{1,2})[./-](\d{4})", v)
    if m:
        return dt.date(int(m.group(3)), int(m.group(2)), int(m.group(1)))
    raise ValueError(f"not a date: {value!r} (use YYYY-MM-DD)")


class ImportedMatter(BaseModel):
    """One matter of the practice-management list."""

    reference: str = Field(min_length=1, max_length=64)
    title: str = Field(default="", max_length=500)
    client: str | None = Field(default=None, max_length=500)
    client_number: str | None = Field(default=None, max_length=64)
    opened: dt.date | None = None
    closed: dt.date | None = None
    practice_area: str | None = Field(default=None, max_length=200)
    kind: str | None = Field(default=None, max_length=200)
    responsible: str | None = Field(default=None, max_length=200)
    aliases: list[str] = Field(default_factory=list)

    @field_validator("reference", "title", "client", "client_number", "practice_area", "kind", "responsible",
                     mode="before")
    @classmethod
    def _strip(cls, value):
        if value is None:
            return None
        return " ".join(str(value).split()) or None

    @field_validator("opened", "closed", mode="before")
    @classmethod
    def _date(cls, value):
        return _parse_date(value) if isinstance(value, str) else value

    @field_validator("aliases", mode="before")
    @classmethod
    def _aliases(cls, value):
        if value is None:
            return []
        if isinstance(value, str):
            value = re.split(r"[;|]", value)
        return [" ".join(str(a).split()) for a in value if str(a).strip()]


@dataclass(frozen=True)
class RowError:
    """A row of the list that did not import: its line number and why."""

    line: int
    message: str


def _normalise_keys(row: dict) -> dict:
    out: dict = {}
    for key, value in row.items():
        if key is None:
            continue
        name = re.sub(r"[^a-z0-9]+", "_", str(key).strip().lower().lstrip("\ufeff")).strip("_")
        field = _LOOKUP.get(name)
        if field and field not in out:
            out[field] = value
    return out


def _csv_reader(text: str) -> csv.DictReader:
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    return csv.DictReader(io.StringIO(text), dialect=dialect)


def _csv_rows(reader: csv.DictReader) -> Iterator[tuple[int, dict]]:
    for row in reader:
        yield reader.line_num, row


def _jsonl_rows(text: str) -> Iterator[tuple[int, dict | str]]:
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            yield i, f"not JSON: {exc.msg}"
            continue
        yield i, row if isinstance(row, dict) else "a JSON line must be an object"


def read_matter_list(path: Path) -> tuple[list[tuple[int, ImportedMatter]], list[RowError]]:
    """(line, matter) for every valid row and a :class:`RowError` for every other one.

    JSON lines when the first non-blank character is ``{``, else CSV with a header row.

    Raises:
        ConfigurationError: the file cannot be read, is empty, or (CSV) has no ``reference`` column.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"cannot read the matter list {path}: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("cp1252")
    if not text.strip():
        raise ConfigurationError(f"the matter list {path} is empty")
    rows: list[tuple[int, ImportedMatter]] = []
    errors: list[RowError] = []
    if text.lstrip().startswith("{"):
        source: Iterator = _jsonl_rows(text)
    else:
        reader = _csv_reader(text)
        if "reference" not in _normalise_keys({k: k for k in reader.fieldnames or []}):
            raise ConfigurationError(f"the matter list {path} has no reference column (header: "
                                     f"{text.splitlines()[0][:200]!r})")
        source = _csv_rows(reader)
    for line, row in source:
        if isinstance(row, str):
            errors.append(RowError(line, row))
            continue
        try:
            rows.append((line, ImportedMatter.model_validate(_normalise_keys(row))))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ())) or "row"
            errors.append(RowError(line, f"{where}: {first.get('msg')}"))
    return rows, errors
