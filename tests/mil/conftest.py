"""Fixtures of the MIL program tests."""

from __future__ import annotations

import pytest

from .helpers import CoremltoolsLoader


@pytest.fixture(scope="module")
def coremltools_loader() -> CoremltoolsLoader:
    """coremltools' MIL proto loader; importing coremltools (and torch with it) takes seconds, so
    each test module that needs it imports it once."""
    pytest.importorskip("coremltools")
    return CoremltoolsLoader()


@pytest.fixture(scope="module")
def no_fsync():
    """Skip fsync for modules that write hundreds of packages to check their contents: durability
    is not under test there (test_io.py saves with real fsync), and fsync dominates their time."""
    import os

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "fsync", lambda fd: None)
        yield
