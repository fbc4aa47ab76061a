"""Registry cases: classify with string and int64 labels."""

import numpy as np

from converter.ir.runtime import ListValue
from converter.ir.types import TensorType, int64, string
from tests.ops.harness import Case

_p = np.array([[0.2, 0.5, 0.3]], np.float32)

CASES = [
    Case("classify", {"probabilities": _p},
         {"classes": ListValue(TensorType(string, ()), [np.array(s) for s in ("cat", "dog", "eel")], False)},
         id="strings"),
    Case("classify", {"probabilities": _p[0]},
         {"classes": ListValue(TensorType(int64, ()), [np.int64(i) for i in (10, 20, 30)], False)}, id="int64"),
]
