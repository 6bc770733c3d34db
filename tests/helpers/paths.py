"""Where the repository and the project's shared material (``../shared``) are."""

from __future__ import annotations

import os
from pathlib import Path

#: The repository's root.
REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """The project's shared folder (corpus, cases): ``$KI_SHARED_DIR`` or ``../shared`` beside the repo.

    Raises: RuntimeError when it holds no ``corpus`` folder.
    """
    env = os.environ.get("KI_SHARED_DIR")
    path = Path(env) if env else REPO_ROOT.parent / "shared"
    if not (path / "corpus").is_dir():
        raise RuntimeError(f"shared corpus not found at {path}; set KI_SHARED_DIR")
    return path
