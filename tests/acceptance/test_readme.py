"""The README's first command, run as written in a clean copy of the repository without ``../shared``.

Issue 21 (bullet 1) and issue 13 ("one acceptance test runs the README's ``ki`` commands as written").
The command is read from README.md (the first ``bash`` block), never copied here; so is the hit the
README promises (the backticked path after "the first hit is"). The copy holds exactly the files a
clone of this tree would (``git ls-files``: tracked and untracked-but-not-ignored, as they are in the
working tree, so an uncommitted change is tested too), in a temporary folder with no ``shared``
beside it; ``KI_SHARED_DIR`` and every other ``KI_`` variable is removed and ``KI_DATA_DIR`` is fresh.

How ``python3 -m venv .venv && .venv/bin/pip install -e .`` runs fast without the network: ``python3``
is the interpreter this test venv was made from (first on ``PATH``), and the environment lets the new
venv see this test venv's installed packages (``PYTHONPATH``) with pip told not to use an index
(``PIP_NO_INDEX``) nor build isolation (setuptools comes from the same packages). pip then finds every
dependency already satisfied and builds only ki itself, editable, from the copy — the venv, pip and
the ``ki`` entry point are real. The test checks that ``ki`` ran from the copy, not from this repository.
Cost: about 1-3 minutes (most of it the built-in OCR of the estate's two scans and the first start
of the embedded PostgreSQL).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(900)

README = REPO_ROOT / "README.md"


def first_bash_block(markdown: str) -> str:
    """The first fenced ``bash`` code block of ``markdown``."""
    match = re.search(r"^```bash\n(.*?)^```", markdown, re.S | re.M)
    assert match, "README.md has no ```bash block"
    return match.group(1)


def promised_first_hit(markdown: str) -> str:
    """The path the README says the first search hit is (backticked, after "the first hit is")."""
    match = re.search(r"the first hit is\s+`([^`]+)`", markdown)
    assert match, 'README.md does not say what the search finds ("the first hit is `...`")'
    return match.group(1)


def export_tree(dest: Path) -> None:
    """Copy the files a clone of this working tree holds (tracked and untracked-but-not-ignored) to ``dest``."""
    listed = subprocess.run(["git", "-C", str(REPO_ROOT), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, check=True).stdout
    for rel in sorted({p for p in listed.decode().split("\0") if p}):
        src = REPO_ROOT / rel
        if src.is_file():  # a tracked file deleted in the working tree is not in a clone of it
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)


def site_packages() -> str:
    """This test venv's site-packages (where ki's dependencies are installed)."""
    import numpy

    return str(Path(numpy.__file__).resolve().parents[1])


def test_readme_first_command_runs_as_written_in_a_clean_clone(tmp_path):
    text = README.read_text(encoding="utf-8")
    command = first_bash_block(text)
    expected = promised_first_hit(text)
    assert "ki insert samples/estate" in command, "the first command inserts the repository's own sample estate"

    clone = tmp_path / "ki"
    export_tree(clone)
    assert (clone / expected).is_file(), f"the README's promised hit {expected} is not in the repository"
    assert not (tmp_path / "shared").exists() and not (clone / ".venv").exists()

    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KI_", "PIP_", "PYTHON", "VIRTUAL_ENV", "HATCHET_CLIENT_"))}
    env.update({
        "PATH": f"{shims}{os.pathsep}{os.environ.get('PATH', '')}",
        "KI_DATA_DIR": str(tmp_path / "data"),
        "PYTHONPATH": site_packages(),
        "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "NO_COLOR": "1", "TERM": "dumb",
    })
    try:
        proc = subprocess.run(["bash", "-eo", "pipefail", "-c", command], cwd=clone, env=env, capture_output=True,
                              text=True, timeout=840)
        assert proc.returncode == 0, f"README command exited {proc.returncode}\n{proc.stdout[-3000:]}\n" \
                                     f"{proc.stderr[-6000:]}"
        # the venv's ki is the copy's own (isolated mode: neither PYTHONPATH nor the working directory count)
        where = subprocess.run([str(clone / ".venv/bin/python"), "-I", "-c", "import ki; print(ki.__file__)"],
                               cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
        assert Path(where).resolve().is_relative_to(clone.resolve()), where

        err = " ".join(proc.stderr.split())
        files = sum(1 for p in (clone / "samples/estate").rglob("*") if p.is_file())
        assert f"{files} files: {files} new" in err, err[-3000:]
        assert re.search(r"run \d+ completed in [\d.]+ s: \d+ stage executions \(\d+ done, \d+ skipped, 0 retried, "
                         r"0 quarantined\)", err), err[-3000:]
        out = " ".join(proc.stdout.split())  # rich wraps long lines at spaces
        listed = re.findall(r"(?:^| )(\d{4}-\d{3}) +found +\d+ files", out)
        assert "ki matters list" in command and sorted(listed) == ["2023-112", "2024-017", "2024-031"], out[:3000]
        first = re.search(r"(?:^| )1\. (.+?) \(score ", out)
        assert first, out[-3000:]
        assert first.group(1) == str((clone / expected).resolve()), out[-3000:]
    finally:
        ki = clone / ".venv/bin/ki"
        if ki.exists():
            subprocess.run([str(ki), "db", "stop"], env=env, capture_output=True, timeout=120)
