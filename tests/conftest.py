"""Shared fixtures: where the shared corpus lives, and the real PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """The project's shared folder (corpus, cases): ``$KI_SHARED_DIR`` or ``../shared`` beside the repo."""
    env = os.environ.get("KI_SHARED_DIR")
    path = Path(env) if env else REPO_ROOT.parent / "shared"
    if not (path / "corpus").is_dir():
        raise RuntimeError(f"shared corpus not found at {path}; set KI_SHARED_DIR")
    return path


@pytest.fixture(scope="session")
def shared() -> Path:
    return shared_dir()


@pytest.fixture(scope="session")
def real_corpus(shared: Path) -> Path:
    return shared / "corpus" / "real"


@pytest.fixture(scope="session")
def cases_dir(shared: Path) -> Path:
    return shared / "cases"
