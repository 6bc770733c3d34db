"""Fixtures of the state-machine tests: a share directory, and the model stages switched off."""

from __future__ import annotations

from pathlib import Path

import pytest

from ki.config.loader import set_config_value
from ki.core.taxonomies import MODEL_STAGES


@pytest.fixture
def src(tmp_path) -> Path:
    return tmp_path / "share"


@pytest.fixture(autouse=True)
def _model_stages_off(data_dir):
    """These tests exercise the state machine, not the model stages: they run with those switched off in
    the saved configuration (written before any context of the test loads it), the model stages standing
    in for "a disabled stage"."""
    for stage in MODEL_STAGES:
        set_config_value(data_dir, f"pipeline.stages.{stage}.enabled", False)
