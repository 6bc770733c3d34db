"""What the work-item tests share: a small estate run once with chosen faults, and tokens of each scope.

Twelve small text files; Convert fails deterministically for five of them (the same fault: one
signature), with an outage (Docling answering 503: infrastructure, awaiting a retry) for three, and
Index fails for one more. The faults are our own stage handlers replaced (the store is never mocked);
``Faults.active = False`` "fixes the cause".
"""

from __future__ import annotations

from ki.app.launch import launch_insertion
from ki.app.tokens import create_token
from ki.config.loader import set_config_value
from ki.core import errors
from ki.core.taxonomies import MODEL_STAGES
from ki.stages import STAGE_HANDLERS
from tests.helpers.state import make_source

N_DOCS = 12
CORRUPT = range(0, 5)       # convert: the same deterministic fault, five files
OUTAGE = range(5, 8)        # convert: Docling down (infrastructure), three files
FLAKY_INDEX = range(8, 9)   # index: another deterministic fault


class Faults:
    """Convert and index handlers that fail for chosen objects (switchable while the server runs)."""

    def __init__(self, ids: list[int]):
        self.ids = ids
        self.active = True
        self.real = {s: STAGE_HANDLERS[s] for s in ("convert", "index")}

    def convert(self, sctx):
        i = self.ids.index(sctx.obj.id)
        if self.active and i in CORRUPT:
            raise ValueError(f"File '{sctx.obj.path}' is not a zip file (offset {i * 31})")
        if self.active and i in OUTAGE:
            raise errors.DoclingUnavailable(f"Docling Serve at http://127.0.0.1:{5000 + i} answered HTTP 503",
                                            infrastructure="docling answered HTTP 503")
        return self.real["convert"](sctx)

    def index(self, sctx):
        if self.active and self.ids.index(sctx.obj.id) in FLAKY_INDEX:
            raise ValueError("index mapping refused field 'title' of length 70000")
        return self.real["index"](sctx)


#: name → scopes of the tokens :func:`faulty_estate` makes (``gone`` is for the revocation cases).
TOKENS = (("reader", ["read:work_item"]), ("operator", ["write:work_item"]),
          ("pipeline", ["read:pipeline", "write:pipeline"]), ("gone", ["admin"]),
          ("searcher", ["search"]))


def faulty_estate(make_ctx, data_dir, root, monkeypatch, *, principal: str | None = None):
    """(ctx, object ids, faults, {token name: Authorization headers}) after one real run with the faults."""
    for stage in MODEL_STAGES:
        set_config_value(data_dir, f"pipeline.stages.{stage}.enabled", False)
    set_config_value(data_dir, "pipeline.retry_base_seconds", 3600)  # outages wait: nothing retries on its own
    ctx = make_ctx(workers=2)
    ids = make_source(ctx, root, N_DOCS)
    faults = Faults(ids)
    monkeypatch.setitem(STAGE_HANDLERS, "convert", faults.convert)
    monkeypatch.setitem(STAGE_HANDLERS, "index", faults.index)
    launch_insertion(ctx, wait_for_retries_seconds=0)
    headers = {}
    for name, scopes in TOKENS:
        token = create_token(ctx.db.engine, name=name, scopes=scopes, principal=principal)[1]
        headers[name] = {"Authorization": f"Bearer {token}"}
    return ctx, ids, faults, headers
