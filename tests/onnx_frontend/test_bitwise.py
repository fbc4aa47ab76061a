"""BitShift / Bitwise* written in int32 arithmetic (the IR has no bitwise ops), on the values where
a decomposition would go wrong: negatives, INT_MIN/INT_MAX, the sign bit, shifts of 0, 31 and past
the width. Oracles: onnxruntime running the same one-node model, and numpy's own bitwise
operators (written independently of the decomposition) for opset-28 BitShift cases onnxruntime
does not take."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper as h

from converter.frontends.onnx import load_onnx

from .feeding import run_program as run

I32 = np.iinfo(np.int32)


def _model(op, inputs, attrs=None, opset=21):
    names = [f"i{k}" for k in range(len(inputs))]
    ins = [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(x.dtype), x.shape) for n, x in zip(names, inputs)]
    out = h.make_tensor_value_info("y", ins[0].type.tensor_type.elem_type, None)
    g = h.make_graph([h.make_node(op, names, ["y"], **(attrs or {}))], "g", ins, [out])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)]), dict(zip(names, inputs))


def _ours(op, inputs, attrs=None, opset=21):
    model, feeds = _model(op, inputs, attrs, opset)
    return run(load_onnx(model), feeds)["y"]


def _ort(op, inputs, attrs=None, opset=21):
    model, feeds = _model(op, inputs, attrs, opset)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


EDGE = np.array([0, 1, -1, 2, -2, 5, -6, 0x55555555, -0x55555556, I32.max, I32.min, 123456789, -987654321],
                np.int32)


def _pairs(dt):
    info = np.iinfo(dt)
    vals = np.unique(np.clip(EDGE.astype(np.int64), info.min, info.max)).astype(dt)
    x, y = np.meshgrid(vals, vals)
    return x.reshape(-1), y.reshape(-1)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dt", [np.int32, np.int8, np.uint8, np.int16, np.uint16, np.int64])
def test_bitwise_binary_matches_onnxruntime_on_every_edge_pair(op, dt):
    x, y = _pairs(dt)
    got = _ours(op, [x, y])
    np.testing.assert_array_equal(got.astype(np.int64), _ort(op, [x, y]).astype(np.int64))


def test_bitwise_broadcasts_and_takes_scalars():
    x = np.array([[-5, 12, I32.min], [7, -1, 3]], np.int32)
    y = np.array(-3, np.int32)
    np.testing.assert_array_equal(_ours("BitwiseAnd", [x, y]), x & y)
    np.testing.assert_array_equal(_ours("BitwiseXor", [y, y]), np.int32(0))


@pytest.mark.parametrize("dt", [np.int32, np.int8, np.uint8, np.uint16, np.int64])
def test_bitwise_not_matches_onnxruntime(dt):
    x, _ = _pairs(dt)
    np.testing.assert_array_equal(_ours("BitwiseNot", [x]).astype(np.int64), _ort("BitwiseNot", [x]).astype(np.int64))


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dt", [np.uint8, np.uint16, np.uint32])
def test_unsigned_shift_matches_onnxruntime(direction, dt):
    bits = np.dtype(dt).itemsize * 8
    x = np.array([0, 1, 3, 0x7F, 0xAB, 0x55, 200, 255], dt).repeat(bits)
    s = np.tile(np.arange(bits), 8).astype(dt)
    got = _ours("BitShift", [x, s], {"direction": direction}, opset=11)
    # uint32 is held in int32 (the dtype policy): the bits are exact, read back as uint32
    np.testing.assert_array_equal(got.astype(dt), _ort("BitShift", [x, s], {"direction": direction}, 11))


def _spec_shift(x: np.ndarray, s: np.ndarray, direction: str, bits: int) -> np.ndarray:
    """Opset 28's definition on Python ints: shifts outside [0, bits) give the sign fill alone."""
    out = []
    for xi, si in zip(x.tolist(), s.tolist()):
        if si < 0 or si >= bits:
            out.append(-1 if (direction == "RIGHT" and xi < 0) else 0)
        elif direction == "RIGHT":
            out.append(xi >> si)
        else:
            v = (xi << si) & ((1 << bits) - 1)
            out.append(v - (1 << bits) if v >= 1 << (bits - 1) else v)  # wrap to the signed type
    return np.array(out, np.int64)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32])
def test_signed_shift_follows_opset_28(direction, dt):
    bits = np.dtype(dt).itemsize * 8
    info = np.iinfo(dt)
    vals = np.array([0, 1, -1, 3, -3, 0x55, -0x56, info.max, info.min], np.int64).clip(info.min, info.max)
    shifts = np.array([-3, -1, 0, 1, 2, bits - 2, bits - 1, bits, bits + 5, 40], np.int64)
    x, s = (a.reshape(-1) for a in np.meshgrid(vals, shifts))
    got = _ours("BitShift", [x.astype(dt), s.astype(dt)], {"direction": direction}, opset=28)
    np.testing.assert_array_equal(got.astype(np.int64), _spec_shift(x, s, direction, bits))
