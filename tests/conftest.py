"""Shared test configuration: where ../shared lives, and oracle availability."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Records the layer kinds of every NeuralNetwork model the tests load (tests/nn_models/coverage.py).
pytest_plugins = ["tests.nn_models.coverage"]

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CONVERTER_SHARED", REPO.parent / "shared"))
MODELS = SHARED / "data" / "models"
WEBNN_VECTORS = SHARED / "data" / "webnn-conformance"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED}: tests need the shared data beside the checkout")
    return SHARED


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow-tier tests first: under pytest-xdist they then overlap the rest of the suite instead of
    running alone at its end (the order of the others is kept)."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
