"""List ops against onnxruntime's sequence ops.

A MIL list is a value, like an ONNX sequence: the initial list is built in ONNX with
SequenceConstruct (or SequenceEmpty), list_write at an existing index is SequenceErase +
SequenceInsert at that position and at the end SequenceInsert, list_read is SequenceAt,
list_length SequenceLength, list_gather ConcatFromSequence(new_axis=1) + Gather, and
list_scatter a chain of single writes. Every element of a resulting list is read back with
SequenceAt and compared.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from converter.ir.runtime import ListValue
from converter.ir.types import TensorType, dtype_of_array
from tests.oracles.onnx_oracle import run_onnx

from .harness import Case, assert_close, run_case, run_op

ORACLE = {
    "make_list": "onnxruntime SequenceEmpty + SequenceInsert (+ SequenceLength, ConcatFromSequence)",
    "list_length": "onnxruntime SequenceLength",
    "list_read": "onnxruntime SequenceAt",
    "list_write": "onnxruntime SequenceErase + SequenceInsert",
    "list_gather": "onnxruntime ConcatFromSequence(new_axis=1) + Gather",
    "list_scatter": "onnxruntime SequenceErase + SequenceInsert per index",
}

DTYPES = ["float32", "float16", "int32", "bool"]


def _elements(rng: np.random.Generator, n: int, dt: str, shape=(2, 3)) -> list[np.ndarray]:
    if dt == "bool":
        return [rng.integers(0, 2, shape).astype(bool) for _ in range(n)]
    return [(rng.standard_normal(shape) * 10).astype(dt) for _ in range(n)]


def _list(items: list[np.ndarray], dynamic: bool = True) -> ListValue:
    return ListValue(TensorType(dtype_of_array(items[0]), items[0].shape), list(items), dynamic)


class _Seq:
    """Builds an ONNX graph of sequence ops over a sequence made from tensor inputs."""

    def __init__(self, items: list[np.ndarray], dtype: np.dtype | None = None) -> None:
        """The sequence of ``items``, or an empty sequence of ``dtype`` tensors when none."""
        self.feeds = {f"e{i}": x for i, x in enumerate(items)}
        if items:
            self.nodes = [helper.make_node("SequenceConstruct", list(self.feeds), ["s0"])]
        else:
            elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
            self.nodes = [helper.make_node("SequenceEmpty", [], ["s0"], dtype=elem)]
        self.inits: dict[str, np.ndarray] = {}
        self.cur = "s0"
        self.n = 0

    def _name(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def const(self, v: np.ndarray) -> str:
        name = self._name("c")
        self.inits[name] = np.asarray(v)
        return name

    def write(self, index: int, value: np.ndarray, length: int) -> None:
        """MIL list_write within or one past the end of the sequence."""
        v, pos = self.const(value), self.const(np.int64(index))
        if index < length:
            erased = self._name("s")
            self.nodes.append(helper.make_node("SequenceErase", [self.cur, pos], [erased]))
            self.cur = erased
        out = self._name("s")
        self.nodes.append(helper.make_node("SequenceInsert", [self.cur, v, pos], [out]))
        self.cur = out

    def read_all(self, length: int) -> list[str]:
        outs = []
        for i in range(length):
            out = self._name("at")
            self.nodes.append(helper.make_node("SequenceAt", [self.cur, self.const(np.int64(i))], [out]))
            outs.append(out)
        return outs

    def run(self, outs: list[str]) -> list[np.ndarray]:
        return run_onnx(self.nodes, self.feeds, outs, self.inits)


def _assert_list(got: ListValue, want: list[np.ndarray], what: str) -> None:
    assert isinstance(got, ListValue) and len(got) == len(want), f"{what}: length {len(got)} != {len(want)}"
    for i, (g, w) in enumerate(zip(got.items, want)):
        assert g.dtype == w.dtype, f"{what}[{i}]: dtype {g.dtype} != {w.dtype}"
        assert_close(g, w, rtol=0, atol=0, what=f"{what}[{i}]")


@pytest.mark.parametrize("dt", DTYPES)
def test_list_length_vs_onnxruntime(dt: str):
    for n in (1, 4):
        items = _elements(np.random.default_rng(n), n, dt)
        got = run_op("list_length", {"ls": _list(items)})[0]
        seq = _Seq(items)
        seq.nodes.append(helper.make_node("SequenceLength", ["s0"], ["len"]))
        assert_close(got, seq.run(["len"])[0].astype(np.int32), what="list_length")
        assert got.dtype == np.int32


@pytest.mark.parametrize("dt", DTYPES)
def test_list_read_vs_onnxruntime(dt: str):
    items = _elements(np.random.default_rng(2), 5, dt)
    seq = _Seq(items)
    want = seq.run(seq.read_all(5))
    for i in range(5):
        got = run_op("list_read", {"ls": _list(items), "index": np.int32(i)})[0]
        assert_close(got, want[i], rtol=0, atol=0, what=f"list_read {i}")


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "fixed"])
def test_list_write_vs_onnxruntime(dt: str, dynamic: bool):
    rng = np.random.default_rng(3)
    items = _elements(rng, 3, dt)
    writes = [(1, _elements(rng, 1, dt)[0]), (0, _elements(rng, 1, dt)[0])]
    if dynamic:
        writes.append((3, _elements(rng, 1, dt)[0]))  # one past the end grows a dynamic list

    def build(b, ls):
        for i, v in writes:
            ls = b.list_write(ls=ls, index=np.int32(i), value=v)
        return ls

    ls_in, originals = _list(items, dynamic), [x.copy() for x in items]
    got = run_case(Case("list_write", {"ls": ls_in}, build=build))[0]
    seq, length = _Seq(items), 3
    for i, v in writes:
        seq.write(i, v, length)
        length = max(length, i + 1)
    _assert_list(got, seq.run(seq.read_all(length)), "list_write")
    assert len(ls_in) == 3 and all(np.array_equal(a, b) for a, b in zip(ls_in.items, originals))  # input kept


@pytest.mark.parametrize("dt", DTYPES)
def test_list_gather_vs_onnxruntime(dt: str):
    rng = np.random.default_rng(4)
    items = _elements(rng, 4, dt)
    for indices in ([3, 0, 3, 1], [2], []):
        idx = np.array(indices, np.int32)
        got = run_op("list_gather", {"ls": _list(items)}, {"indices": idx})[0]
        seq = _Seq(items)
        seq.nodes += [helper.make_node("ConcatFromSequence", ["s0"], ["all"], axis=0, new_axis=1),
                      helper.make_node("Gather", ["all", seq.const(idx.astype(np.int64))], ["y"], axis=0)]
        want = seq.run(["y"])[0]
        assert got.dtype == want.dtype
        assert_close(got, want, rtol=0, atol=0, what=f"list_gather {indices}")


@pytest.mark.parametrize("dt", DTYPES)
def test_list_scatter_vs_onnxruntime(dt: str):
    rng = np.random.default_rng(5)
    items = _elements(rng, 4, dt)
    indices = [2, 0, 4, 2]  # a later write to the same index wins; 4 appends
    values = np.stack(_elements(rng, len(indices), dt))
    got = run_op("list_scatter", {"ls": _list(items)}, {"indices": np.array(indices, np.int32), "value": values})[0]
    seq, length = _Seq(items), 4
    for i, v in zip(indices, values):
        seq.write(i, v, length)
        length = max(length, i + 1)
    _assert_list(got, seq.run(seq.read_all(length)), "list_scatter")


@pytest.mark.parametrize("dt", ["fp32", "fp16", "int32", "bool"])
def test_make_list_vs_onnxruntime(dt: str):
    """make_list(init_length=0) filled by appends: length, every element and the stacked tensor."""
    np_dt = {"fp32": "float32", "fp16": "float16", "int32": "int32", "bool": "bool"}[dt]
    values = _elements(np.random.default_rng(6), 3, np_dt, shape=(3,))

    def build(b):
        ls = b.make_list(init_length=0, elem_shape=(3,), dtype=dt)
        for i, v in enumerate(values):
            ls = b.list_write(ls=ls, index=np.int32(i), value=v)
        return [ls, b.list_length(ls=ls), b.list_gather(ls=ls, indices=np.array([0, 1, 2], np.int32))]

    got_list, got_len, got_all = run_case(Case("make_list", build=build))
    seq = _Seq([], np_dt)
    for i, v in enumerate(values):
        seq.write(i, v, i)
    seq.nodes += [helper.make_node("SequenceLength", [seq.cur], ["len"]),
                  helper.make_node("ConcatFromSequence", [seq.cur], ["all"], axis=0, new_axis=1)]
    reads = seq.read_all(3)
    want = seq.run(["len", "all", *reads])
    assert_close(got_len, want[0].astype(np.int32), what="length")
    assert_close(got_all, want[1], rtol=0, atol=0, what="stacked")
    _assert_list(got_list, want[2:], "make_list")


def test_unwritten_elements_read_as_zeros():
    """TensorArray's rule, which ONNX sequences cannot express (they have no holes): a dynamic
    list written past its end reads zeros in the gap when the element shape is static."""
    def build(b):
        ls = b.make_list(init_length=1, elem_shape=(2,), dtype="fp32")
        ls = b.list_write(ls=ls, index=np.int32(2), value=np.array([1.0, 2.0], np.float32))
        return [b.list_length(ls=ls), b.list_gather(ls=ls, indices=np.array([0, 1, 2], np.int32))]

    length, stacked = run_case(Case("make_list", build=build))
    assert int(length) == 3
    assert_close(stacked, np.array([[0, 0], [0, 0], [1, 2]], np.float32), what="gap")
