"""Batch migration of a folder of models (``converter migrate``, `converter.migrate`): see engine.py.

Named ``migration`` so that ``converter.migrate`` can be the function without hiding this package.
"""

from .engine import migrate
from .report import MigrationReport, ModelEntry

__all__ = ["MigrationReport", "ModelEntry", "migrate"]
