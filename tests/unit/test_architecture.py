"""The layout rules of DESIGN.md "Layout", checked on the source of every module of ``ki/``.

* no import cycle between ki's modules (imports inside functions count; ``if TYPE_CHECKING:``
  blocks do not, they never run);
* no SQL that touches ``processing_state``, ``pipeline_runs`` or ``pipeline_run_object`` outside
  ``ki/store/`` (and no use of their ORM models there);
* no SQL statement at all outside ``ki/store/`` but in the modules of :data:`SQL_STILL_OUTSIDE_STORE`, a list that
  may only shrink (a module whose statements moved into the store must leave it, and cannot take SQL back);
* package cycles (a package = ``ki.<name>``, or ``ki.<group>.<name>`` under ``core``, ``domain`` and ``adapters``;
  lazy imports count) no more than :data:`KNOWN_PACKAGE_CYCLES`, a list that may only shrink;
* every import points to its own layer or below (:data:`LAYERS`, DESIGN.md "Layout" as this repository's
  docs/design-decisions.md adapts it);
* no module over 500 lines (DESIGN.md "Layout": one concept per module);
* no issue number in a comment or docstring (``issue 14``, ``issue 14 item 7``, ``issue "Title"``): code cites the
  spec section or says the reason; the history lives in git (migrations included).

``KNOWN`` lists what another helper is still changing this round, each with its owner; it must be
empty once the round ends (a stale entry fails too, so the list cannot outlive its reason).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "ki"
MAX_LINES = 500
STATE_TABLES = ("processing_state", "pipeline_runs", "pipeline_run_object")
STATE_MODELS = ("ProcessingState", "PipelineRun", "PipelineRunObject")
#: Any SQL statement in a string (ki writes its keywords in capitals).
SQL_STATEMENT_RE = re.compile(r"\b(?:SELECT\s|INSERT\s+INTO\b|UPDATE\s+\w+(?:\s+\w+)?\s+SET\b|DELETE\s+FROM\b|"
                              r"ON\s+CONFLICT\b|CREATE\s+(?:TABLE|INDEX|UNIQUE)\b|ALTER\s+TABLE\b|TRUNCATE\b)")
#: The modules outside ``ki/store/`` that still hold SQL statements (DESIGN.md "Layout": every statement in the
#: store): none is left, and this set may never grow.
SQL_STILL_OUTSIDE_STORE: frozenset[str] = frozenset()
#: Package cycles (DESIGN.md "Layout": imports point down): none is left; this list may never grow.
KNOWN_PACKAGE_CYCLES: list[list[str]] = []
ISSUE_RE = re.compile(r'\bissues?\s+(?:#:?\s+)?(?:#?\d+|"[^"\n]+")', re.I)
SQL_RE = re.compile(r"\b(?:FROM|JOIN|UPDATE|INTO|TABLE)\s+(?:ONLY\s+)?(" + "|".join(STATE_TABLES) + r")\b", re.I)

#: Exceptions while their owners are still at work: {(rule, what): owner}.
KNOWN: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py")) if "migrations" not in p.parts}


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """Every Import/ImportFrom node, at any depth, except under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str) -> str | None:
    """The most specific ki module an imported dotted name refers to."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for t in targets:
            if t == "ki" or t.startswith("ki."):
                resolved = _resolve(t)
                if resolved and resolved != module:
                    out.add(resolved)
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the ki modules it imports (anywhere in its body)."""
    return {m: _imports(m, p) for m, p in MODULES.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def state_sql(path: Path) -> list[str]:
    """``line: table`` of every string (docstrings excepted) that sends SQL to a state table, and of
    every use of a state table's ORM model."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstring_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            for m in SQL_RE.finditer(node.value):
                found.append(f"{node.lineno}: {m.group(0)}")
        elif isinstance(node, ast.Name | ast.alias):
            name = node.id if isinstance(node, ast.Name) else node.name
            if name in STATE_MODELS:
                found.append(f"{node.lineno}: {name}")
    return found


#: The groups whose sub-packages are the packages (``ki.domain.matters``, ``ki.core.retry``).
GROUPS = ("core", "domain", "adapters")
#: DESIGN.md "Layout": each top-level package's layer; an import may point to its own layer or below, never up.
#: ``domain`` and ``adapters`` share a layer (an adapter reads the domain's types, a rule calls the gateway), and
#: the package-cycle check keeps their sub-packages acyclic.
LAYERS = {"ki": 0, "core": 0, "config": 1, "store": 2, "domain": 3, "adapters": 3, "stages": 4,
          "orchestration": 5, "workflows": 6, "app": 7, "api": 8, "cli": 8}


def package_of(module: str) -> str:
    """``ki.store.claims`` → ``ki.store``; ``ki.domain.matters.rules`` → ``ki.domain.matters`` (a group's
    sub-package); ``ki.core.retry`` → ``ki.core.retry`` (a module of a group is its own package)."""
    parts = module.split(".")
    return ".".join(parts[:3] if len(parts) > 2 and parts[1] in GROUPS else parts[:2])


def layer_of(module: str) -> int:
    """The layer of a module's top-level package (:data:`LAYERS`); KeyError for a package DESIGN.md does not place."""
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else "ki"]


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """package → the other ki packages its modules import (anywhere in their bodies)."""
    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        mine = package_of(module)
        out.setdefault(mine, set()).update(package_of(d) for d in deps if package_of(d) != mine)
    return out


def sql_statements(path: Path) -> list[int]:
    """The lines of every string (docstrings excepted) that holds an SQL statement."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstring_nodes(tree)
    return sorted(node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                  and SQL_STATEMENT_RE.search(node.value))


def modules_with_sql_outside_store() -> set[str]:
    """The ki modules outside ``ki/store/`` with at least one SQL statement."""
    return {m for m, p in MODULES.items() if not m.startswith("ki.store") and sql_statements(p)}


def issue_references(path: Path) -> list[str]:
    """``line: text`` of every mention of an issue by number or title in a file's source text."""
    text = path.read_text(encoding="utf-8")
    return [f"{text.count(chr(10), 0, m.start()) + 1}: {' '.join(m.group(0).split())}" for m in ISSUE_RE.finditer(text)]


def line_count(path: Path) -> int:
    """The lines of a module as an editor counts them (the last line need not end in a newline)."""
    return len(path.read_text(encoding="utf-8").splitlines())


def _violations() -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for cycle in import_cycles(import_graph()):
        out[("cycle", " <-> ".join(cycle))] = "import cycle"
    for module, path in MODULES.items():
        if not module.startswith("ki.store"):
            hits = state_sql(path)
            if hits:
                out[("state_sql", module)] = "; ".join(hits)
        n = line_count(path)
        if n > MAX_LINES:
            out[("lines", module)] = f"{n} lines (at most {MAX_LINES})"
    for path in sorted(ROOT.rglob("*.py")):
        hits = issue_references(path)
        if hits:
            out[("issue_ref", _module_name(path))] = "; ".join(hits)
    return out


VIOLATIONS = _violations()


@pytest.mark.parametrize("rule", ["cycle", "state_sql", "lines", "issue_ref"])
def test_layout_rule(rule: str) -> None:
    found = {k: v for k, v in VIOLATIONS.items() if k[0] == rule and k not in KNOWN}
    assert not found, "\n".join(f"{k[1]}: {v}" for k, v in sorted(found.items()))


def test_known_exceptions_are_still_real() -> None:
    stale = [f"{k} (owner {owner})" for k, owner in KNOWN.items() if k not in VIOLATIONS]
    assert not stale, f"remove from KNOWN, fixed: {stale}"


def test_the_checker_sees_a_cycle_inside_a_function_and_sql_in_a_string(tmp_path: Path) -> None:
    """The check itself can fail: a cycle through a function-level import and SQL in a plain string."""
    assert import_cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    mod = tmp_path / "m.py"
    mod.write_text('"""Docstring naming processing_state is fine."""\n'
                   'def f():\n    return "UPDATE processing_state SET status = 1"\n')
    assert state_sql(mod) == ["3: UPDATE processing_state"]
    fake = ast.parse("def f():\n    from ki.domain.context import StageContext\n")
    assert [n.module for n in _import_nodes(fake)] == ["ki.domain.context"]


def test_the_line_limit_counts_every_line(tmp_path: Path) -> None:
    """A module of MAX_LINES lines passes the limit; one line more does not."""
    mod = tmp_path / "m.py"
    mod.write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    assert line_count(mod) == MAX_LINES
    mod.write_text("x = 1\n" * MAX_LINES + "y = 2", encoding="utf-8")
    assert line_count(mod) == MAX_LINES + 1 > MAX_LINES


def test_the_issue_check_sees_numbers_and_titles_not_other_hashes(tmp_path: Path) -> None:
    """Issue numbers and titles are found in comments and docstrings, also across a line break; ``PKCS #7`` and
    ``issuer`` are not issues."""
    mod = tmp_path / "m.py"
    mod.write_text('"""Spec: issue 15 item 2."""\n# see Issue #4\nx = 1  # issue "Offline OCR"\n'
                   '# PKCS #7, the issuer 12, issues\n# the rule of issue\n# 16 item 4\n', encoding="utf-8")
    assert issue_references(mod) == ["1: issue 15", "2: Issue #4", '3: issue "Offline OCR"', "5: issue # 16"]


def test_no_sql_outside_the_store_but_in_the_listed_modules() -> None:
    found = modules_with_sql_outside_store()
    new = {m: sql_statements(MODULES[m]) for m in sorted(found - SQL_STILL_OUTSIDE_STORE)}
    assert not new, f"SQL outside ki/store/ (put it in a ki/store/ module; lines): {new}"
    moved = sorted(SQL_STILL_OUTSIDE_STORE - found)
    assert not moved, f"no SQL left in these: remove them from SQL_STILL_OUTSIDE_STORE: {moved}"


def test_the_sql_check_sees_statements_not_prose(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text('"""SELECT the rows: prose in a docstring is fine."""\n'
                   'A = "select what the user sees"\n'
                   'B = f"SELECT {1} FROM t"\n'
                   'C = "UPDATE matter m SET folder = :f"\n'
                   'D = "INSERT INTO blob (h) VALUES (:h) ON CONFLICT DO NOTHING"\n', encoding="utf-8")
    assert sql_statements(mod) == [3, 4, 5]


def test_package_cycles_only_shrink() -> None:
    cycles = import_cycles(package_graph(import_graph()))
    worse = [c for c in cycles if not any(set(c) <= set(k) for k in KNOWN_PACKAGE_CYCLES)]
    assert not worse, f"a new package cycle (imports must point down the layers): {worse}"
    assert cycles == KNOWN_PACKAGE_CYCLES, f"package cycles are now {cycles}: update KNOWN_PACKAGE_CYCLES"


def test_the_faces_share_the_application_layer_not_each_other() -> None:
    """The CLI and the HTTP API are faces over :mod:`ki.app`: the application layer imports no face, and the CLI
    imports the web package only to serve it (``ki serve``)."""
    graph = import_graph()
    faces = ("ki.api", "ki.cli")
    app_up = {m: sorted(i for i in deps if i.startswith(faces)) for m, deps in graph.items() if m.startswith("ki.app")}
    assert {m: d for m, d in app_up.items() if d} == {}
    cli_web = {m: sorted(i for i in deps if i.startswith("ki.api")) for m, deps in graph.items()
               if m.startswith("ki.cli") and m != "ki.cli.serve"}
    assert {m: d for m, d in cli_web.items() if d} == {}


def test_every_package_has_a_layer_and_imports_point_down() -> None:
    """DESIGN.md "Layout": faces → app → workflows → orchestration → stages → domain/adapters → store → config →
    core; an import (lazy ones included) never reaches a higher layer, and no package sits outside the tree."""
    graph = import_graph()
    unplaced = sorted({m.split(".")[1] for m in graph if len(m.split(".")) > 1} - set(LAYERS))
    assert unplaced == []
    up = {m: sorted(d for d in deps if layer_of(d) > layer_of(m)) for m, deps in graph.items()}
    assert {m: d for m, d in up.items() if d} == {}


def test_the_layer_check_sees_an_upward_import() -> None:
    assert layer_of("ki.stages.index") > layer_of("ki.adapters.search.search") == layer_of("ki.domain.matters")
    assert package_of("ki.domain.matters.rules") == "ki.domain.matters" and package_of("ki.store.db") == "ki.store"
    assert package_of("ki.core.retry") == "ki.core.retry"


def test_the_package_check_sees_a_cycle_through_submodules() -> None:
    graph = {"ki.a.x": {"ki.b.y"}, "ki.b.y": set(), "ki.b.z": {"ki.a"}, "ki.a": set(), "ki.c": {"ki.a.x"}}
    assert import_cycles(package_graph(graph)) == [["ki.a", "ki.b"]]
