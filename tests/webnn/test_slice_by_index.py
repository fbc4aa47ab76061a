"""slice_by_index in the browser: squeezed axes indexed from the end (regression: the squeezed
index -1, as in torch/lstm_nn's ``output[-1]``, was refused as out of range: ``[-1:0]`` is empty).

Oracle: numpy basic indexing written in the test (``x[:, -1]`` and the like)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import converter
from tests.ops.harness import Case, build_program

from .browser_client import WebnnBrowser

# (begin, end, squeeze_mask) on a [4, 5, 3] input (begin_mask/end_mask set where not squeezed), and
# the numpy expression it means
CASES = [
    ([-1, 0, 0], [0, 0, 0], [True, False, False], lambda x: x[-1]),
    ([0, -2, 0], [0, 0, 0], [False, True, False], lambda x: x[:, -2]),
    ([0, -5, -3], [0, 0, 0], [False, True, True], lambda x: x[:, -5, -3]),
    ([2, 0, 2], [0, 0, 0], [True, False, True], lambda x: x[2, :, 2]),
]


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("begin,end,squeeze,expr", CASES, ids=[str(c[0]) for c in CASES])
def test_squeezed_index(begin, end, squeeze, expr, layout: str, webnn_browser: WebnnBrowser,  # noqa: ANN001
                        tmp_path: Path) -> None:
    x = np.arange(60, dtype=np.float32).reshape(4, 5, 3)
    keep = [not s for s in squeeze]
    prog, feeds = build_program(Case("slice_by_index", {"x": x}, {
        "begin": np.array(begin, np.int32), "end": np.array(end, np.int32), "begin_mask": np.array(keep),
        "end_mask": np.array(keep), "squeeze_mask": np.array(squeeze)}))
    converter.convert(prog, to="webnn", out=tmp_path / "webnn", layout=layout)
    got = webnn_browser.run(tmp_path / "webnn", feeds).outputs
    (value,) = got.values()
    np.testing.assert_array_equal(value, expr(x))
