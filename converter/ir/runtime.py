"""Run-time values that are not plain numpy arrays: lists (MIL list ops) and states."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .types import Type


@dataclass
class ListValue:
    """A MIL list at run time. Lists are values: list_write returns a new ListValue."""

    elem_type: Type
    items: list[Any] = field(default_factory=list)
    dynamic_length: bool = True

    def __len__(self) -> int:
        return len(self.items)

    def copy(self) -> ListValue:
        return ListValue(self.elem_type, list(self.items), self.dynamic_length)


@dataclass
class StateCell:
    """A mutable state (iOS18 ``read_state`` / ``coreml_update_state``)."""

    value: np.ndarray
