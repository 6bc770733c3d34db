"""Fixtures of the CLI acceptance tests."""

from __future__ import annotations

import pytest

from tests.helpers.ki_command import KiUser, private_folder


@pytest.fixture
def ki(request) -> KiUser:
    """``ki(*args, code=0, extra=None)``: the real command on a fresh data directory of a private folder
    (its embedded PostgreSQL stopped afterwards); ``ki.base`` is the folder for estates."""
    with private_folder(f"ki-{request.node.name[:40]}-") as base:
        yield KiUser(base)
