"""Where ki keeps its data, found without loading the configuration.

The data directory is ``KI_DATA_DIR`` (an empty value counts as unset), else the platform's user data directory
(``~/.local/share/ki`` on Linux): the rule :class:`ki.config.process.ProcessSettings` applies, written once here
so that a process that must stay small finds the same directory — the CLI's fault log, and ``ki search``
asking a running ``ki serve`` over its local socket (:data:`SERVE_SOCKET_NAME`). Imports only the standard
library and ``platformdirs``.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The environment variable naming the data directory.
DATA_DIR_VARIABLE = "KI_DATA_DIR"
#: ``ki serve``'s Unix socket in the data directory: the local operator's search (README "ki serve").
SERVE_SOCKET_NAME = "serve.sock"


def default_data_dir() -> Path:
    """The data directory when ``KI_DATA_DIR`` is unset: the platform's user data directory."""
    import platformdirs

    return Path(platformdirs.user_data_dir("ki"))


def data_dir() -> Path:
    """The data directory of this process's environment: ``KI_DATA_DIR`` as written (not expanded, as the
    settings read it), else :func:`default_data_dir`."""
    value = os.environ.get(DATA_DIR_VARIABLE)
    return Path(value) if value else default_data_dir()


def serve_socket_path(directory: Path) -> Path:
    """``ki serve``'s local socket in the data directory ``directory``."""
    return directory / SERVE_SOCKET_NAME
