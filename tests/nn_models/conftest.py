"""Fixtures of the whole-model NeuralNetwork tests."""

from __future__ import annotations

import pytest

from ..mil.helpers import CoremltoolsLoader
from .shared import Migrations


@pytest.fixture(scope="session")
def migrations(tmp_path_factory: pytest.TempPathFactory) -> Migrations:
    """Each shared model migrated once per process, whichever test module asks first."""
    return Migrations(tmp_path_factory.mktemp("nn_models"))


@pytest.fixture(scope="module")
def coremltools_loader() -> CoremltoolsLoader:
    """coremltools' MIL proto loader (importing coremltools takes seconds: once per module)."""
    return CoremltoolsLoader()
