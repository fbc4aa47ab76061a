"""DFT / STFT as matmuls with cos/sin matrices, the window generators and MelWeightMatrix. Oracles:
numpy's FFT (fft, ifft, rfft, irfft: zero-padding, truncation, both parities of the length), torch's
window functions, and onnxruntime running the same one-node models (STFT, MelWeightMatrix)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from converter.errors import UnsupportedError
from converter.frontends.onnx import load_onnx

from .feeding import run_program as run

F = T.FLOAT


def _model(node, inputs, outputs, consts=(), opset=20):
    inits = [numpy_helper.from_array(np.asarray(v), name=k) for k, v in consts]
    g = h.make_graph([node], "g", inputs, outputs, initializer=inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _vi(name, t, shape):
    return h.make_tensor_value_info(name, t, shape)


def _ours(model, feeds):
    prog = load_onnx(model)
    return run(prog, feeds), prog


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)


def _as_pair(z):
    return np.stack([z.real, z.imag], -1)


RNG = np.random.default_rng(7)


@pytest.mark.parametrize("inverse,onesided", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("axis", [1, 2])
@pytest.mark.parametrize("length", [None, 5, 8, 13])
def test_dft_matches_numpy_fft(inverse, onesided, axis, length):
    comps = 2 if inverse or not onesided else 1
    x = RNG.normal(size=(2, 7, 6, comps)).astype(np.float32)
    consts = [("axis", np.array(axis, np.int64))] + ([("len", np.array(length, np.int64))] if length else [])
    node = h.make_node("DFT", ["x", "len" if length else "", "axis"], ["y"], inverse=inverse, onesided=onesided)
    model = _model(node, [_vi("x", F, list(x.shape))], [_vi("y", F, None)], consts)
    got = _ours(model, {"x": x})[0]["y"]
    z = _complex(x.astype(np.float64))
    n = x.shape[axis]
    if inverse and onesided:
        want = np.fft.irfft(z, n=length or 2 * (n - 1), axis=axis)[..., None]
    elif inverse:
        want = _as_pair(np.fft.ifft(z, n=length or n, axis=axis))
    elif onesided:
        want = _as_pair(np.fft.rfft(z.real, n=length or n, axis=axis))
    else:
        want = _as_pair(np.fft.fft(z, n=length or n, axis=axis))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


def test_dft17_axis_attribute_and_run_time_axis_of_dft20():
    x = RNG.normal(size=(3, 4, 5, 2)).astype(np.float32)
    m17 = _model(h.make_node("DFT", ["x"], ["y"], axis=2), [_vi("x", F, [3, 4, 5, 2])], [_vi("y", F, None)], opset=17)
    want = _as_pair(np.fft.fft(_complex(x.astype(np.float64)), axis=2))
    np.testing.assert_allclose(_ours(m17, {"x": x})[0]["y"], want, rtol=1e-4, atol=2e-5)
    m20 = _model(h.make_node("DFT", ["x", "", "axis"], ["y"]), [_vi("x", F, [3, 4, 5, 2]), _vi("axis", T.INT64, [])],
                 [_vi("y", F, None)])
    for axis in (0, 1, 2, -2, -3):
        got = _ours(m20, {"x": x, "axis": np.array(axis, np.int64)})[0]["y"]
        np.testing.assert_allclose(got, _as_pair(np.fft.fft(_complex(x.astype(np.float64)), axis=axis % 4)),
                                   rtol=1e-4, atol=2e-5)


def test_dft_of_an_unknown_length_axis_is_refused():
    model = _model(h.make_node("DFT", ["x"], ["y"], axis=1), [_vi("x", F, [1, "n", 1])], [_vi("y", F, None)], opset=17)
    with pytest.raises(UnsupportedError, match="length of the DFT axis"):
        load_onnx(model)


@pytest.mark.parametrize("op,torch_fn", [("HannWindow", torch.hann_window), ("BlackmanWindow", torch.blackman_window),
                                         ("HammingWindow", lambda n, periodic, dtype: torch.hamming_window(
                                             n, periodic, alpha=25 / 46, beta=21 / 46, dtype=dtype))])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size", [2, 3, 10, 17])  # (torch special-cases length 1 as [1]; ONNX's formula does not)
def test_windows_match_torch_as_constants_and_at_run_time(op, torch_fn, periodic, size):
    want = torch_fn(size, periodic=bool(periodic), dtype=torch.float64).numpy()
    node = h.make_node(op, ["n"], ["w"], periodic=periodic)
    const = _model(node, [], [_vi("w", F, None)], [("n", np.array(size, np.int64))], opset=17)
    dynamic = _model(node, [_vi("n", T.INT32, [])], [_vi("w", F, None)], opset=17)
    got_const, prog = _ours(const, {})
    assert not any(op.type in ("cos", "sin") for op in prog.functions["main"].walk())  # folded at conversion
    got_dyn = _ours(dynamic, {"n": np.array(size, np.int32)})[0]["w"]
    for got in (got_const["w"], got_dyn):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("const_params", [True, False])
@pytest.mark.parametrize("with_window,onesided", [(False, 1), (True, 1), (True, 0)])
def test_stft_matches_onnxruntime(const_params, with_window, onesided):
    x = RNG.normal(size=(2, 40, 1)).astype(np.float32)
    win = np.hanning(12).astype(np.float32)
    params = {"step": np.array(5, np.int64), "flen": np.array(12, np.int64)}
    names = ["x", "step", "win" if with_window else "", "flen"]
    inputs = [_vi("x", F, [2, 40, 1])]
    consts = list(params.items()) if const_params else []
    feeds = {"x": x}
    if not const_params:
        inputs += [_vi("step", T.INT64, []), _vi("flen", T.INT64, [])]
        feeds.update(params)
    if with_window:
        inputs.append(_vi("win", F, [12]))
        feeds["win"] = win
    model = _model(h.make_node("STFT", names, ["y"], onesided=onesided), inputs, [_vi("y", F, None)], consts, opset=17)
    got = _ours(model, feeds)[0]["y"]
    want = _ort(model, feeds)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("params", [(8, 16, 8192, 0.0, 4096.0), (20, 512, 16000, 30.0, 7600.0),
                                    (5, 33, 22050, 100.0, 5000.0)])
def test_mel_weight_matrix_matches_onnxruntime(params):
    names = ["num", "dft", "rate", "lo", "hi"]
    consts = [(n, np.array(v, np.int32 if i < 3 else np.float32)) for i, (n, v) in enumerate(zip(names, params))]
    model = _model(h.make_node("MelWeightMatrix", names, ["m"]), [], [_vi("m", F, None)], consts, opset=17)
    got = _ours(model, {})[0]["m"]
    want = _ort(model, {})[0]
    assert got.shape == want.shape == (params[1] // 2 + 1, params[0])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_mel_weight_matrix_of_run_time_inputs_is_refused():
    node = h.make_node("MelWeightMatrix", ["num", "dft", "rate", "lo", "hi"], ["m"])
    ins = [_vi(n, T.INT32, []) for n in ("num", "dft", "rate")] + [_vi(n, F, []) for n in ("lo", "hi")]
    with pytest.raises(UnsupportedError, match="conversion time"):
        load_onnx(_model(node, ins, [_vi("m", F, None)], opset=17))
