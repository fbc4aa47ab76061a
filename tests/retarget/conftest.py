"""Fixtures of the re-targeting tests: coremltools' MIL loader (shared with tests/mil)."""

from tests.mil.conftest import coremltools_loader, no_fsync  # noqa: F401 (fixtures)
