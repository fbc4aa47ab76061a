"""Fixtures of the optimization baselines: the source programs, built once and cached."""

from __future__ import annotations

from pathlib import Path

import pytest

from .sources import SOURCE_NAMES, SourcePrograms, build_sources


@pytest.fixture(scope="session")
def sources(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, SourcePrograms]:
    """Every source program (tests/optimize/sources.py), built by coremltools on first use into
    pytest's cache folder (kept between runs; rebuilt when the sources or tool versions change)."""
    pytest.importorskip("torch")
    pytest.importorskip("coremltools")
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    folder = Path(cache.mkdir("optimize_sources")) if cache is not None else tmp_path_factory.mktemp("optimize_sources")
    return build_sources(SOURCE_NAMES, folder)
