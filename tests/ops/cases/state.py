"""Registry cases: read_state and coreml_update_state (iOS18)."""

import numpy as np

from converter.ir.runtime import StateCell
from tests.ops.harness import Case

CASES = [
    Case("read_state", {"input": StateCell(np.arange(6, dtype=np.float16).reshape(2, 3))}, opset="iOS18"),
    Case("coreml_update_state", {"state": StateCell(np.zeros((2, 3), np.float32)),
                                 "value": np.ones((2, 3), np.float32)}, opset="iOS18"),
]
