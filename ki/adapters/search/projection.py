"""Keeping the embedded lexical index (:mod:`ki.adapters.search.lexical`) in step with the PostgreSQL record.

Spec: insertion-pipeline.md "Index" (an index beside PostgreSQL, kept in step like the OpenSearch projection; the record
stays PostgreSQL); DESIGN.md "The one rule" (the database is the truth; a crash or a second worker is
harmless).

Where: ``<data_dir>/search/lexical-<epoch>/`` (``KI_DATA_DIR``; the epoch is the database's
``search_epoch``, so two databases — or a re-created one — never share a directory). Beside the tantivy
files: ``state.json`` (``schema``, ``epoch``, ``large_passages``, ``watermark``: every change logged up to that
``seq`` is applied) and ``apply.lock``.

**Three indexes** (a 120 MB file changes no other query's top 10): the documents of more than
``retrieval.large_document_passages`` passages (:func:`ki.store.index_record.is_large`) live in a second tantivy
index, ``large/`` inside the directory, kept by the same log, watermark and lock. tantivy's BM25 takes its
statistics (document count, document frequencies, average field length) from the whole index it searches,
so a huge file's passages in the main index would move every other document's score; apart, they move
nothing. An object's passages are all in one of the two: each apply deletes the object from every index and
adds its current rows to the one its passage count picks (a document that grows or shrinks across the threshold
moves). A search asks every index and merges by score (:func:`ki.adapters.search.lexical_search.search_projection`).

**Profile rows apart** (file names and titles found on every estate): the profile rows
(file name, title, folders, type, matter, parties: :data:`ki.adapters.search.lexical.PROFILE_KIND`) of the documents not
in ``large/`` live in a third index, ``profiles/``. tantivy's BM25 divides a field's token count by *every*
document of the index, where Lucene (OpenSearch) counts only the documents that hold the field; among the
passages (which hold no file name) a file name looked ~2.5 times its real length and lost to body passages
(make_estate seed 7, 200 matters: file-name recall@10 0.862 embedded vs 0.974 OpenSearch; 0.974 apart). Apart,
each index's statistics are those of one row kind, as Lucene's per-field ones are.

**Clause rows last** in each batch: an apply adds a batch's passages, then its clause rows, so a segment holds
its clause rows in runs (tantivy numbers a segment's rows in the order they were added, and a merge concatenates
segments). A clause search's leaves (:func:`ki.adapters.search.lexical.to_tantivy`) jump over the passage runs
through their posting lists' skip data instead of decoding them; the order changes no score.

How: :meth:`LexicalProjection.catch_up` takes ``apply.lock`` (``flock``; one applier per directory across
processes, which also guards tantivy's single writer), reads the change log after the watermark
(:mod:`ki.store.index_record`), and for each batch of objects deletes their documents and adds their current
rows, commits, then writes the new watermark. Re-applying a change is harmless (delete + add of the record's
rows), so a crash between the commit and ``state.json`` costs one batch again. After releasing the lock it
looks at the log once more, so a change committed while it applied is never left for nobody. The index
stage asks for it after every write (:meth:`LexicalProjection.request_apply`: a background thread of the
process applies within :data:`APPLY_DEBOUNCE_SECONDS`, one commit for the writes of that moment, never
waiting for another applier, which applies those writes too); searches call it first, wait up to
:data:`SEARCH_WAIT_SECONDS` for another applier and apply at most :data:`SEARCH_CATCH_UP_OBJECTS` objects
themselves (:meth:`LexicalProjection.catch_up_for_search`: the rest goes to the background applier and the
answer says how far behind it is). ``ki serve``'s searches wait for no other process's applier
(``other_processes=False``: its many readers must not queue behind a writer's apply): while one applies, they
answer from what is applied and name the lag. A missing, corrupt
or older-schema index is rebuilt from the record (every object's log entry: the migration seeds the log).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

from ki.adapters.search.backend import CLAUSE_KIND
from ki.adapters.search.lexical import PROFILE_KIND, SCHEMA_VERSION, WRITER_HEAP_BYTES, build_schema, lex_document
from ki.store.index_record import changes_after, is_large, lex_rows, log_head, passage_counts, record_epoch

log = logging.getLogger(__name__)

#: Objects applied per tantivy commit.
BATCH_OBJECTS = 500
#: After a write asks for an apply, the background applier waits this long for more writes (one commit for all).
APPLY_DEBOUNCE_SECONDS = 0.5
#: When another applier holds the lock, ask again this much later.
APPLY_RETRY_SECONDS = 2.0
#: How long a search waits for another process's applier before it searches what is committed.
SEARCH_WAIT_SECONDS = 10.0
#: Objects a search applies at most before it answers (a search never pays for a whole backlog: what is left is
#: applied by the process's background applier, or by the next search, and the answer says it is behind).
SEARCH_CATCH_UP_OBJECTS = 2000
STATE_FILE = "state.json"
LOCK_FILE = "apply.lock"
#: The "large documents" index, inside the projection's directory.
LARGE_DIR = "large"
#: The index of the documents' profile rows (file name, title, folders …), inside the projection's directory.
PROFILES_DIR = "profiles"
#: The indexes of a projection, by the directory under the projection's own (``""``: the main index itself).
INDEX_DIRS = ("", LARGE_DIR, PROFILES_DIR)


def default_large_passages() -> int:
    """``retrieval.large_document_passages``'s default (the configuration's one definition)."""
    from ki.config.settings import RetrievalConfig

    return int(RetrievalConfig.model_fields["large_document_passages"].default)

_REGISTRY: dict[tuple[str, str], LexicalProjection] = {}
_REGISTRY_LOCK = threading.Lock()


def default_root() -> Path:
    """``<data_dir>/search`` of this process's settings (parsed once while the environment is unchanged:
    building the settings took ~1/4 of a small search, profiled)."""
    from ki.config.process import ProcessSettings, current

    return current(ProcessSettings).data_dir / "search"


def projection_for(engine: Engine, root: Path | None = None, large_passages: int | None = None, *,
                   epoch: str | None = None) -> LexicalProjection:
    """The process's projection of ``engine``'s database (one per database and root directory).

    ``large_passages``: ``retrieval.large_document_passages`` (None: the open projection's value, else the
    default). A projection built with another value is rebuilt from the record by its next apply (its state
    no longer matches). ``epoch``: the database's search epoch when the caller just read it (None: read here).
    """
    root = (root or default_root()).resolve()
    if epoch is None:
        with engine.connect() as conn:
            epoch = record_epoch(conn)
    key = (str(root), epoch)
    with _REGISTRY_LOCK:
        proj = _REGISTRY.get(key)
        if proj is None:
            proj = _REGISTRY[key] = LexicalProjection(engine, root / f"lexical-{epoch}", epoch, large_passages)
            if not event.contains(engine, "engine_disposed", _engine_disposed):
                event.listen(engine, "engine_disposed", _engine_disposed)
        elif large_passages is not None and proj.large_passages != int(large_passages):
            proj.large_passages = int(large_passages)
            proj._indexes = None
        return proj


def _engine_disposed(engine: Engine) -> None:
    """``engine.dispose()`` (its owner is done with it): close and forget its projections, so no background
    applier opens a connection on it afterwards (each such connection stayed pooled for the process's life:
    one per test database until PostgreSQL refused clients, CI of session 5)."""
    with _REGISTRY_LOCK:
        gone = [key for key, proj in _REGISTRY.items() if proj.engine is engine]
        closing = [_REGISTRY.pop(key) for key in gone]
    for proj in closing:
        proj.close()


class LexicalProjection:
    """The lexical index of one database (see the module docstring).

    Args:
        engine: the record's engine. directory: the index's directory. epoch: the record's search epoch.
        large_passages: documents of more passages go to the "large documents" index (``large/``).
    Raises (every method): OSError when the directory cannot be written; SQLAlchemy errors of the record.
    """

    def __init__(self, engine: Engine, directory: Path, epoch: str, large_passages: int | None = None):
        self.engine = engine
        self.directory = directory
        self.epoch = epoch
        self.large_passages = default_large_passages() if large_passages is None else int(large_passages)
        self.schema = build_schema()
        self._indexes: tuple[Any, ...] | None = None
        self._loaded_watermark = -1
        self._thread_lock = threading.Lock()
        self._wanted = threading.Event()
        self._applier: threading.Thread | None = None
        self.closed = False

    # -- state ------------------------------------------------------------------------------------

    def _read_state(self) -> dict[str, Any]:
        try:
            state = json.loads((self.directory / STATE_FILE).read_text())
        except (OSError, ValueError):
            return {}
        if (state.get("schema") != SCHEMA_VERSION or state.get("epoch") != self.epoch
                or state.get("large_passages") != self.large_passages):
            return {}
        return state

    def watermark(self) -> int:
        """The last ``seq`` applied (-1: no usable index yet)."""
        return int(self._read_state().get("watermark", -1))

    def _write_state(self, watermark: int) -> None:
        tmp = self.directory / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps({"schema": SCHEMA_VERSION, "epoch": self.epoch,
                                   "large_passages": self.large_passages, "watermark": watermark}))
        os.replace(tmp, self.directory / STATE_FILE)

    @contextmanager
    def _locked(self, block: bool, timeout: float, other_processes: bool = True) -> Any:
        """Hold ``apply.lock`` (yield True) or not (yield False) after ``timeout`` seconds; ``other_processes``
        False: wait for this process's appliers only — another process's holding the file lock is a False at once."""
        if not self.directory.is_dir():
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.directory.chmod(0o700)  # the index holds document text: private to ki's user, like the blobs
        deadline = time.monotonic() + timeout
        if not self._thread_lock.acquire(timeout=timeout if block else 0):  # noqa: SIM115
            yield False
            return
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if not block or not other_processes or time.monotonic() >= deadline:
                        yield False
                        return
                    time.sleep(0.05)
            try:
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
            self._thread_lock.release()

    # -- the tantivy index ------------------------------------------------------------------------

    @property
    def large_directory(self) -> Path:
        """The "large documents" index's directory (see the module docstring)."""
        return self.directory / LARGE_DIR

    def _directories(self) -> list[Path]:
        return [self.directory / d if d else self.directory for d in INDEX_DIRS]

    def _open_or_create(self) -> tuple[tuple[Any, ...], int]:
        """((main, large-documents, profiles) indexes, watermark) under the lock: an unusable set is replaced
        by empty indexes at watermark 0 (rebuilt from the record)."""
        import tantivy

        state = self._read_state()
        dirs = self._directories()
        if state and all(tantivy.Index.exists(str(d)) for d in dirs):
            try:
                return tuple(tantivy.Index.open(str(d)) for d in dirs), int(state["watermark"])
            except (ValueError, OSError) as exc:
                log.warning("the search index at %s cannot be opened (%s): rebuilding it from the record",
                            self.directory, exc)
        for child in self.directory.iterdir():
            if child.name != LOCK_FILE:
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        for d in dirs[1:]:
            d.mkdir(mode=0o700)
        indexes = tuple(tantivy.Index(self.schema, path=str(d), reuse=False) for d in dirs)
        self._write_state(0)
        return indexes, 0

    def indexes(self) -> tuple[Any, ...]:
        """(the main index, the large-documents index, the profiles index) for searching, reloaded when another
        commit was applied since.

        Raises: RuntimeError while another process builds the index for longer than :data:`SEARCH_WAIT_SECONDS`.
        """
        import tantivy

        wm = self.watermark()
        if self._indexes is None:
            if wm < 0:
                self.catch_up(block=True, timeout=SEARCH_WAIT_SECONDS)
                wm = self.watermark()
            if wm < 0:
                raise RuntimeError(f"the search index at {self.directory} is being built by another process")
            self._indexes = tuple(tantivy.Index.open(str(d)) for d in self._directories())
            self._loaded_watermark = wm
        elif wm != self._loaded_watermark:
            for index in self._indexes:
                index.reload()
            self._loaded_watermark = wm
        return self._indexes

    def index(self) -> Any:
        """The (main) tantivy index for searching (:meth:`indexes`)."""
        return self.indexes()[0]

    # -- catching up ------------------------------------------------------------------------------

    def request_apply(self) -> None:
        """Ask this process's background applier to catch up soon (after :data:`APPLY_DEBOUNCE_SECONDS`, so the
        writes of that moment share one commit). Never blocks; what it does not apply before the process ends
        stays in the log for the next applier or search."""
        if self.closed:
            return
        self._wanted.set()
        with _REGISTRY_LOCK:
            if self._applier is None or not self._applier.is_alive():
                self._applier = threading.Thread(target=self._apply_loop, name="ki-lexical-apply", daemon=True)
                self._applier.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the background applier (waits up to ``timeout`` s for an apply in progress) and return the
        connections it opened. What it did not apply stays in the log for the next applier or search."""
        self.closed = True
        self._wanted.set()
        applier = self._applier
        if applier is not None and applier is not threading.current_thread():
            applier.join(timeout)
        self.engine.pool.dispose()  # a connection the applier checked in after its owner disposed the engine

    def _apply_loop(self) -> None:
        while not self.closed:
            self._wanted.wait()
            if self.closed:
                return
            time.sleep(APPLY_DEBOUNCE_SECONDS)
            self._wanted.clear()
            if self.closed:
                return
            before = self.watermark()
            try:  # a share at a time, releasing the lock in between: a search waiting for it gets its turn
                done = self.catch_up(block=False, max_objects=SEARCH_CATCH_UP_OBJECTS)
            except Exception as exc:  # noqa: BLE001 - the log keeps the change; the next search applies it
                log.warning("the lexical index at %s could not apply changes (a search will): %s", self.directory, exc)
                done = True
            if not done:
                if self.watermark() == before:  # another applier holds the lock: it applies these too; look later
                    time.sleep(APPLY_RETRY_SECONDS)
                self._wanted.set()

    def behind(self) -> bool:
        """Whether the record logged a change this index has not applied."""
        with self.engine.connect() as conn:
            return log_head(conn) > self.watermark()

    def catch_up(self, *, block: bool = False, timeout: float = 0.0,
                 progress: Callable[[int], None] | None = None, max_objects: int | None = None,
                 other_processes: bool = True, until: int | None = None) -> bool:
        """Apply every logged change (see the module docstring), or about ``max_objects`` of them, or those up to
        ``until``.

        Args:
            block: wait up to ``timeout`` seconds for another applier; False returns at once when one runs
                (it applies what this caller wrote, too).
            progress: called with the number of objects applied so far, after each batch.
            max_objects: stop once this many objects were applied (batches shrink to fit; None: all).
            other_processes: with ``block``, wait for another process's applier too (False: only for this
                process's).
            until: a log ``seq``: done once the watermark reaches it — what the applier this call waited for
                applied is not applied again, and changes logged later are left to later callers (None: the head).
        Returns: True when this call found the index current (up to ``until``) or made it so; False when another
        applier held the lock or ``max_objects`` ran out first (the index may still be behind).
        """
        applied_total = 0
        while True:
            left = None if max_objects is None else max_objects - applied_total
            if left is not None and left <= 0:
                return not self._behind(until)
            with self._locked(block, timeout, other_processes) as held:
                if not held:
                    return False
                if until is not None and self.watermark() >= until:
                    return True
                applied_total += self._apply(progress, applied_total, left, until)
            if not self._behind(until):
                return True
            block = False

    def _behind(self, until: int | None) -> bool:
        if until is not None:
            return self.watermark() < until
        return self.behind()

    def catch_up_for_search(self, *, other_processes: bool = True) -> int:
        """What a search does first: when the log holds changes this index has not applied, wait up to
        :data:`SEARCH_WAIT_SECONDS` for another applier and apply at most :data:`SEARCH_CATCH_UP_OBJECTS`
        objects of those logged before the search began (a change logged while it waits is the next search's:
        concurrent searches share one apply instead of queueing behind each other's); if still behind, leave the
        rest to this process's background applier. ``other_processes`` False (a server answering many readers
        at once): wait for this process's appliers only; while another process applies, answer from what is
        applied. Returns the changes logged before the search began that are not applied yet (0: current)."""
        with self.engine.connect() as conn:
            head = log_head(conn)
        if head <= self.watermark():
            return 0
        self.catch_up(block=True, timeout=SEARCH_WAIT_SECONDS, max_objects=SEARCH_CATCH_UP_OBJECTS,
                      other_processes=other_processes, until=head)
        lag = max(head - self.watermark(), 0)
        if lag:
            self.request_apply()
        return lag

    def _target(self, row: Any, counts: dict[int, int]) -> int:
        """The index of a row (position in :data:`INDEX_DIRS`): every row of a document of more than
        ``large_passages`` passages → large (as on OpenSearch); else a profile row → profiles, a passage → main."""
        if is_large(counts.get(row.source_object_id, 0), self.large_passages):
            return 1
        return 2 if row.kind == PROFILE_KIND else 0

    def _apply(self, progress: Callable[[int], None] | None, done: int, limit: int | None = None,
               until: int | None = None) -> int:
        """Under the lock: apply every batch after the watermark (about ``limit`` objects at most; no batch
        begun once the watermark reaches ``until``). Returns objects applied."""
        indexes, watermark = self._open_or_create()

        def batch() -> int:
            if until is not None and watermark >= until:
                return 0
            return BATCH_OBJECTS if limit is None else max(min(BATCH_OBJECTS, limit - applied), 0)

        applied = 0
        with self.engine.connect() as conn:
            changes = changes_after(conn, watermark, batch()) if batch() else []
        if not changes:
            return 0
        writers = tuple(index.writer(WRITER_HEAP_BYTES, 1) for index in indexes)
        try:
            while changes:
                oids = [oid for oid, _ in changes]
                for oid in oids:
                    for writer in writers:
                        writer.delete_documents_by_term("oid", oid)
                with self.engine.connect() as conn:
                    counts = passage_counts(conn, oids)
                    later: list[tuple[int, Any]] = []
                    for row in lex_rows(conn, oids):
                        target = self._target(row, counts)
                        if row.kind == CLAUSE_KIND:
                            later.append((target, lex_document(row)))
                        else:
                            writers[target].add_document(lex_document(row))
                    for target, doc in later:  # the batch's clause rows in one run (see the module docstring)
                        writers[target].add_document(doc)
                # the watermark is written after every commit: a crash between them leaves a moving object in
                # two or none only until the next applier (every search catches up first) applies the batch again
                for writer in reversed(writers):
                    writer.commit()
                watermark = max(seq for _, seq in changes)
                self._write_state(watermark)
                applied += len(oids)
                if progress is not None:
                    progress(done + applied)
                with self.engine.connect() as conn:
                    changes = changes_after(conn, watermark, batch()) if batch() else []
        except BaseException:
            for writer in writers:
                writer.rollback()
            raise
        finally:
            for writer in writers:
                writer.wait_merging_threads()
        return applied
