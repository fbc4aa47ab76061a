"""Registry cases: list ops, on lists made in the program and on list inputs."""

import numpy as np

from converter.ir.runtime import ListValue
from converter.ir.types import TensorType, fp32
from tests.ops.harness import Case

_elem = TensorType(fp32, (2, 3))


def _list(n: int, dynamic: bool = True) -> ListValue:
    return ListValue(_elem, [np.full((2, 3), float(i), np.float32) for i in range(n)], dynamic)


def _fill(b):
    ls = b.make_list(init_length=0, elem_shape=(2, 3), dtype="fp32")
    ls = b.list_write(ls=ls, index=0, value=np.ones((2, 3), np.float32))
    ls = b.list_write(ls=ls, index=2, value=np.full((2, 3), 2.0, np.float32))
    return [b.list_length(ls=ls), b.list_gather(ls=ls, indices=np.array([2, 1, 0], np.int32))]


CASES = [
    Case("make_list", build=lambda b: b.make_list(init_length=3, elem_shape=(2, "W"), dtype="int32",
                                                   dynamic_length=False), id="fixed_symbolic_elem"),
    Case("make_list", build=_fill, id="grow_and_gather"),
    Case("list_length", {"ls": _list(3)}),
    Case("list_read", {"ls": _list(3), "index": np.int32(1)}),
    Case("list_write", {"ls": _list(2, dynamic=False), "index": np.int32(1), "value": np.ones((2, 3), np.float32)}),
    Case("list_write", {"ls": _list(2), "index": np.int32(4), "value": np.ones((2, 3), np.float32)}, id="grow"),
    Case("list_gather", {"ls": _list(4), "indices": np.array([3, 0, 3], np.int32)}),
    Case("list_scatter", {"ls": _list(3), "indices": np.array([2, 0], np.int32),
                          "value": np.zeros((2, 2, 3), np.float32)}),
]
