"""Legacy rank-5 models (target iOS11 / iOS12) of recurrent programs and of flexible shapes.

A program input ``[S, 1, I]`` with a symbolic S is a sequence: the rank-5 model declares ``[I]`` and
Core ML feeds it as ``[Seq, 1, I, 1, 1]`` of any length; rnn / gru / lstm become simpleRecurrent /
gru / uniDirectionalLSTM / biDirectionalLSTM. The models are written, read back with our
NeuralNetwork frontend and run at two sequence lengths. Oracles: torch.nn.LSTM / torch.nn.RNN with
the same weights (re-stacked from torch's gate order into the IR's), the IR gru's recurrence
written in numpy from its definition (torch's GRU resets after the recurrent matmul, the IR's
before), and onnxruntime on onnxmltools' ONNX of the emitted model (other people's implementation
of these layers). The shared builder models of specification version 1-3 that hold such layers or
flexible shapes (and torch/lstm_nn, whose program moves an axis into the lstm's sequence) convert
with ``--target iOS12`` to legacy layers only and give the source model's outputs (a round trip,
not an oracle) at two sequence lengths / two sizes; iOS11 refuses the flexible ones naming the
features.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import converter
from converter.backends.neuralnetwork.versions import layer_version
from converter.errors import UnsupportedError
from converter.formats.model_file import read_model_file
from converter.ir.builder import new_program
from converter.ir.types import Symbol, TensorType, fp32

from .helpers import assert_close, layer_kinds
from .oracles import Unavailable, onnxruntime_run
from .test_lowerings_recurrent import _np_gru, _sigmoid

MODELS = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "models"
IN, H = 4, 6
LENGTHS = (5, 2)  # two sequence lengths through the same model
RNG = np.random.default_rng(11)


def _rand(*shape: int, scale: float = 0.5) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _sequence_program(states: dict[str, int], body):
    """A program of a sequence input ``x`` [S, 1, IN] (S symbolic) and [1, n] state inputs."""
    types = [("x", TensorType(fp32, (Symbol("S", lower=1, upper=None), 1, IN)))]
    types += [(name, TensorType(fp32, (1, n))) for name, n in states.items()]
    return new_program(types, body)


def _write_and_read(prog, path: Path) -> tuple[object, dict]:
    """Write ``prog`` for iOS12 (no pass pipeline: the lowering is under test); the model proto and
    the program our frontend reads back."""
    converter.convert(prog, to="neuralnetwork", out=path, target="iOS12", passes="none", overwrite=True)
    return read_model_file(path).model, converter.load(path)


def _check_legacy(model, path: Path, kinds: dict[str, int]) -> None:
    assert model.specificationVersion == 1
    assert dict(layer_kinds(path)) == kinds
    assert [list(f.type.multiArrayType.shape) for f in model.description.input][0] == [IN]


def _feeds(s: int, states: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The frontend's form: the sequence [S, 1, IN, 1, 1], each state its declared [n]."""
    return {"x": _rand(s, 1, IN), **{k: v.reshape(-1) for k, v in states.items()}}


def _run(path: Path, feeds: dict) -> list[np.ndarray]:
    fed = dict(feeds, x=feeds["x"][..., None, None])
    return list(converter.run(converter.load(path), fed).values())


def _onnx_agrees(path: Path, feeds: dict, *, skip: tuple[str, ...] = ()) -> None:
    """onnxruntime (via onnxmltools) on the emitted model gives our outputs (but ``skip``)."""
    model = converter.load(path)
    fed = dict(feeds, x=feeds["x"][..., None, None])
    got = converter.run(model, fed)
    theirs = onnxruntime_run(path, fed, like=got)
    if isinstance(theirs, Unavailable):
        pytest.fail(theirs.reason)
    for k in got:
        if k not in skip:
            assert_close(np.asarray(theirs[k]), got[k], 1e-4)


def _torch_lstm(bidirectional: bool, seed: int = 5):
    torch.manual_seed(seed)
    m = torch.nn.LSTM(IN, H, bidirectional=bidirectional)

    def ifoz(w: torch.Tensor) -> np.ndarray:  # torch stacks i, f, g(z), o; the IR i, f, o, z
        i, f, g, o = np.split(w.detach().numpy(), 4)
        return np.concatenate([i, f, o, g]).astype(np.float32)

    params = {}
    for suffix, tag in (("", ""), ("_reverse", "_back"))[:2 if bidirectional else 1]:
        params["weight_ih" + tag] = ifoz(getattr(m, f"weight_ih_l0{suffix}"))
        params["weight_hh" + tag] = ifoz(getattr(m, f"weight_hh_l0{suffix}"))
        params["bias" + tag] = ifoz(getattr(m, f"bias_ih_l0{suffix}") + getattr(m, f"bias_hh_l0{suffix}"))
    return m, params


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_lstm_over_a_sequence_input_matches_torch(tmp_path: Path, direction: str) -> None:
    m, params = _torch_lstm(False)
    h0, c0 = _rand(1, H), _rand(1, H)

    def body(b, x, h0, c0):
        return list(b.lstm(x=x, initial_h=h0, initial_c=c0, direction=direction, output_sequence=True,
                           **params, name="lstm"))

    path = tmp_path / "lstm.mlmodel"
    model, _ = _write_and_read(_sequence_program({"h0": H, "c0": H}, body), path)
    _check_legacy(model, path, {"uniDirectionalLSTM": 1})
    assert bool(model.neuralNetwork.layers[0].uniDirectionalLSTM.reverseInput) == (direction == "reverse")
    for s in LENGTHS:
        feeds = _feeds(s, {"h0": h0, "c0": c0})
        x = feeds["x"][::-1].copy() if direction == "reverse" else feeds["x"]  # IR reverse: processing order
        with torch.no_grad():
            y, (hn, cn) = m(torch.from_numpy(x), (torch.from_numpy(h0[None]), torch.from_numpy(c0[None])))
        y_ours, h_ours, c_ours = _run(path, feeds)
        assert y_ours.shape == (s, 1, H, 1, 1)
        assert_close(y_ours.reshape(s, 1, H), y.numpy(), 1e-5)
        assert_close(h_ours.reshape(1, H), hn.numpy()[0], 1e-5)
        assert_close(c_ours.reshape(1, H), cn.numpy()[0], 1e-5)
    # onnxmltools writes reverseInput as an ONNX reverse LSTM, whose Y is in input order: the final
    # states agree, the sequence comes back reversed in time (the IR op, torch on the reversed input,
    # our frontend and the N-dimensional lowering take processing order)
    _onnx_agrees(path, _feeds(3, {"h0": h0, "c0": c0}), skip=("lstm_0",) if direction == "reverse" else ())


def test_bidirectional_lstm_matches_torch_with_states_split_and_joined(tmp_path: Path) -> None:
    m, params = _torch_lstm(True)
    h0, c0 = _rand(1, 2 * H), _rand(1, 2 * H)

    def body(b, x, h0, c0):
        return list(b.lstm(x=x, initial_h=h0, initial_c=c0, direction="bidirectional", output_sequence=True,
                           **params, name="lstm"))

    path = tmp_path / "bilstm.mlmodel"
    model, _ = _write_and_read(_sequence_program({"h0": 2 * H, "c0": 2 * H}, body), path)
    # the [1, 2H] states: split into the directions' halves, the final ones joined (along C)
    _check_legacy(model, path, {"split": 2, "biDirectionalLSTM": 1, "concat": 2})
    for s in LENGTHS:
        feeds = _feeds(s, {"h0": h0, "c0": c0})
        with torch.no_grad():
            y, (hn, cn) = m(torch.from_numpy(feeds["x"]), (torch.from_numpy(h0.reshape(2, 1, H)),
                                                            torch.from_numpy(c0.reshape(2, 1, H))))
        y_ours, h_ours, c_ours = _run(path, feeds)
        assert_close(y_ours.reshape(s, 1, 2 * H), y.numpy(), 1e-5)
        assert_close(h_ours.reshape(2, H), hn.numpy()[:, 0], 1e-5)
        assert_close(c_ours.reshape(2, H), cn.numpy()[:, 0], 1e-5)
    # no onnxruntime check: onnxmltools fails on this model (IndexError in its converter)


def test_rnn_matches_torch_and_zero_states_are_left_out(tmp_path: Path) -> None:
    torch.manual_seed(2)
    m = torch.nn.RNN(IN, H, nonlinearity="tanh")
    params = {"weight_ih": m.weight_ih_l0.detach().numpy(), "weight_hh": m.weight_hh_l0.detach().numpy(),
              "bias": (m.bias_ih_l0 + m.bias_hh_l0).detach().numpy()}

    def body(b, x):
        y, h = b.rnn(x=x, initial_h=np.zeros((1, H), np.float32), activation="tanh", output_sequence=True,
                     **params, name="rnn")
        return [b.relu(x=y, name="per_step"), h]

    path = tmp_path / "rnn.mlmodel"
    model, _ = _write_and_read(_sequence_program({}, body), path)
    _check_legacy(model, path, {"simpleRecurrent": 1, "activation": 1})
    assert list(model.neuralNetwork.layers[0].input) == ["x"]  # zero initial state: no state input
    for s in LENGTHS:
        feeds = _feeds(s, {})
        with torch.no_grad():
            y, hn = m(torch.from_numpy(feeds["x"]))
        y_ours, h_ours = _run(path, feeds)
        assert_close(y_ours.reshape(s, 1, H), np.maximum(y.numpy(), 0), 1e-5)
        assert_close(h_ours.reshape(1, H), hn.numpy()[0], 1e-5)
    _onnx_agrees(path, _feeds(4, {}))


def test_gru_matches_the_recurrence(tmp_path: Path) -> None:
    w_ih, w_hh, bias = _rand(3 * H, IN), _rand(3 * H, H), _rand(3 * H)
    h0 = _rand(1, H)

    def body(b, x, h0):
        return list(b.gru(x=x, initial_h=h0, weight_ih=w_ih, weight_hh=w_hh, bias=bias, direction="forward",
                          output_sequence=False, recurrent_activation="sigmoid", activation="tanh", name="gru"))

    path = tmp_path / "gru.mlmodel"
    model, _ = _write_and_read(_sequence_program({"h0": H}, body), path)
    # the [1, 1, H] last output is declared [1, 1, H] (the rank-3 rule: C, H, W) from the layer's
    # [1, 1, H, 1, 1]: one reshape
    _check_legacy(model, path, {"gru": 1, "reshape": 1})
    for s in LENGTHS:
        feeds = _feeds(s, {"h0": h0})
        _, h = _np_gru(feeds["x"], h0, w_ih, w_hh, bias, _sigmoid, np.tanh, False)
        y_ours, h_ours = _run(path, feeds)
        assert y_ours.size == H  # output_sequence=False: the last step only
        assert_close(y_ours.reshape(1, H), h, 1e-5)
        assert_close(h_ours.reshape(1, H), h, 1e-5)
    _onnx_agrees(path, _feeds(3, {"h0": h0}))


def test_an_op_that_is_not_per_step_refuses_a_sequence(tmp_path: Path) -> None:
    m, params = _torch_lstm(False)

    def body(b, x):
        y, h, c = b.lstm(x=x, initial_h=np.zeros((1, H), np.float32), initial_c=np.zeros((1, H), np.float32),
                         direction="forward", output_sequence=True, **params, name="lstm")
        return [b.reduce_sum(x=y, axes=[0], name="over_time"), b.softmax(x=y, axis=0, name="time_softmax")]

    with pytest.raises(UnsupportedError) as info:
        _write_and_read(_sequence_program({}, body), tmp_path / "no.mlmodel")
    message = str(info.value)
    assert "reduce_sum 'over_time': reads the sequence" in message
    assert "softmax 'time_softmax': reads the sequence" in message
    assert not (tmp_path / "no.mlmodel").exists()


# ---------------------------------------------------------------------------------------------
# the shared models


def _shared(name: str) -> Path:
    path = (MODELS / f"{name}.mlmodel").resolve()
    if not path.exists():
        pytest.skip("shared models not present")
    return path


def _shared_feeds(path: Path, prog) -> dict:
    from tests.nn_models.shared import feeds_for
    return feeds_for(path, prog)


def _with_length(feeds: dict, name: str, steps: int) -> dict:
    """``feeds`` with the sequence input ``name`` [S, 1, C, H, W] at ``steps`` steps."""
    x = np.asarray(feeds[name])
    rng = np.random.default_rng(steps)
    more = rng.integers(0, 20, (steps,) + x.shape[1:]) if name == "tokens" else \
        rng.uniform(-1, 1, (steps,) + x.shape[1:])
    return dict(feeds, **{name: more.astype(x.dtype)})


def _close(want: dict, got: dict) -> None:
    for k, v in want.items():
        ref = np.asarray(v, np.float64)
        assert got[k].shape == ref.shape, k
        assert np.all(np.abs(np.asarray(got[k], np.float64) - ref) <= 1e-4 * np.maximum(1, np.abs(ref))), k


# layers beyond the source's: the frontend reads embedding's bias as an add, which the rank-5
# gather lowering writes as a bias layer (not folded back into the embedding)
LAYER_ALLOWANCE = {"embedding_simple_rnn": 1}


def _legacy_model(src: Path, tmp_path: Path, target: str = "iOS12") -> Path:
    out = tmp_path / src.name
    converter.convert(src, to="neuralnetwork", out=out, target=target, overwrite=True)  # default pipeline
    model = read_model_file(out).model
    assert model.specificationVersion <= 3
    kinds = [layer.WhichOneof("layer") for layer in model.neuralNetwork.layers]
    assert kinds and all(layer_version(k) <= 3 for k in kinds), kinds
    original = read_model_file(src).model
    assert len(kinds) <= len(original.neuralNetwork.layers) + LAYER_ALLOWANCE.get(src.stem, 0)
    return out


SEQUENCE_MODELS = {  # model -> (sequence input, the source's layer kinds the rank-5 model has too)
    "builder/lstm_unidirectional": ("seq", {"uniDirectionalLSTM"}),
    "builder/gru": ("seq", {"gru"}),
    "builder/lstm_bidirectional": ("seq", {"biDirectionalLSTM"}),
    "builder/embedding_simple_rnn": ("tokens", {"embedding", "simpleRecurrent"}),
}


@pytest.mark.parametrize("name", sorted(SEQUENCE_MODELS))
def test_shared_recurrent_model_converts_at_two_sequence_lengths(name: str, tmp_path: Path) -> None:
    src = _shared(name)
    out = _legacy_model(src, tmp_path)
    seq_input, kinds = SEQUENCE_MODELS[name]
    assert kinds <= set(layer_kinds(out))
    source, mine = converter.load(src), converter.load(out)
    feeds = _shared_feeds(src, source)
    for steps in (None, 3):
        fed = feeds if steps is None else _with_length(feeds, seq_input, steps)
        _close(converter.run(source, fed), converter.run(mine, fed))
    assert np.asarray(feeds[seq_input]).shape[0] != 3


FLEXIBLE_MODELS = {  # model -> (input, the flexibility written, two allowed sizes)
    "builder/flexible_shape_range": ("x", "shapeRange", [(3, 4, 32), (3, 17, 9)]),
    "builder/flexible_shape_enumerated": ("x", "enumeratedShapes", [(3, 10, 24), (3, 16, 16)]),
    "builder/flexible_image_sizes": ("image", "enumeratedSizes", [(32, 24, 3), (16, 16, 3)]),
}


@pytest.mark.parametrize("name", sorted(FLEXIBLE_MODELS))
def test_shared_flexible_model_converts_for_ios12_at_two_sizes(name: str, tmp_path: Path) -> None:
    src = _shared(name)
    out = _legacy_model(src, tmp_path)
    model = read_model_file(out).model
    assert model.specificationVersion == 3
    feature, flexibility, sizes = FLEXIBLE_MODELS[name]
    original = read_model_file(src).model
    written = model.description.input[0].type
    kind = written.WhichOneof("Type")
    assert getattr(written, kind).WhichOneof("ShapeFlexibility" if kind == "multiArrayType"
                                             else "SizeFlexibility") == flexibility
    # the sizes allowed are the source's (a DOUBLE array is taken as FLOAT32: the network computes in fp32)
    assert getattr(getattr(written, kind), flexibility) == getattr(getattr(original.description.input[0].type, kind),
                                                                   flexibility)
    source, mine = converter.load(src), converter.load(out)
    rng = np.random.default_rng(3)
    for size in sizes:
        fed = {feature: rng.integers(0, 256, size).astype(np.uint8) if feature == "image"
               else rng.uniform(-1, 1, size).astype(np.float32)}
        want, got = converter.run(source, fed), converter.run(mine, fed)
        _close(want, got)


@pytest.mark.parametrize("name", sorted(FLEXIBLE_MODELS))
def test_ios11_refuses_flexible_shapes_naming_the_feature(name: str, tmp_path: Path) -> None:
    src = _shared(name)
    out = tmp_path / "no.mlmodel"
    feature, flexibility, _ = FLEXIBLE_MODELS[name]
    with pytest.raises(UnsupportedError) as info:
        converter.convert(src, to="neuralnetwork", out=out, target="iOS11", overwrite=True)
    message = str(info.value)
    assert f"input '{feature}': flexible sizes ({flexibility}) (version 3)" in message
    assert "above the requested 1" in message
    assert not out.exists()


def test_torch_lstm_over_a_fixed_sequence_converts_with_permutes_and_a_slice(tmp_path: Path) -> None:
    """torch/lstm_nn (an ND model, batch-first): a [1, 9, 6] input whose H axis the program moves
    into the lstm's sequence, and the last step taken by a slice of the transposed outputs. In the
    rank-5 model: permutes into and out of Seq, the lstm, and a slice of H."""
    src = _shared("torch/lstm_nn")
    out = _legacy_model(src, tmp_path)
    kinds = layer_kinds(out)
    assert kinds["uniDirectionalLSTM"] == 1 and kinds["slice"] == 1 and kinds["permute"] == 4
    source, mine = converter.load(src), converter.load(out)
    feeds = _shared_feeds(src, source)
    want, got = converter.run(source, feeds), converter.run(mine, feeds)
    # the outputs' batch axis: rank-5 features have none (the shapes differ, the elements agree)
    _close(want, {k: np.asarray(got[k]).reshape(np.shape(want[k])) for k in want})


# ---------------------------------------------------------------------------------------------
# per-step layers on a sequence, flexible sizes through shape-agnostic layers


def test_per_step_layers_before_an_lstm_match_torch(tmp_path: Path) -> None:
    """linear (innerProduct per step), an add of a per-step constant (bias), tanh, then the lstm."""
    m, params = _torch_lstm(False, seed=8)
    w, bias, shift = _rand(IN, IN), _rand(IN), _rand(IN)

    def body(b, x):
        z = b.tanh(x=b.add(x=b.linear(x=x, weight=w, bias=bias, name="dense"), y=shift, name="shift"), name="act")
        zeros = np.zeros((1, H), np.float32)
        y, h, _ = b.lstm(x=z, initial_h=zeros, initial_c=zeros, direction="forward", output_sequence=True,
                         **params, name="lstm")
        return [y, h]

    path = tmp_path / "steps.mlmodel"
    model, _ = _write_and_read(_sequence_program({}, body), path)
    _check_legacy(model, path, {"innerProduct": 1, "bias": 1, "activation": 1, "uniDirectionalLSTM": 1})
    for s in LENGTHS:
        feeds = _feeds(s, {})
        with torch.no_grad():
            z = torch.tanh(torch.from_numpy(feeds["x"]) @ torch.from_numpy(w).T + torch.from_numpy(bias + shift))
            y, (hn, _) = m(z)
        y_ours, h_ours = _run(path, feeds)
        assert_close(y_ours.reshape(s, 1, H), y.numpy(), 1e-5)
        assert_close(h_ours.reshape(1, H), hn.numpy()[0], 1e-5)


def _flexible_program(body):
    hs, ws = Symbol("h", lower=6, upper=40), Symbol("w", lower=6, upper=40)
    return new_program([("x", TensorType(fp32, (1, 3, hs, ws)))], body)


def test_flexible_sizes_through_conv_pool_batchnorm_and_scalar_ops_match_torch(tmp_path: Path) -> None:
    weight, cbias = _rand(5, 3, 3, 3), _rand(5)
    mean, var, gamma, beta = _rand(5), np.abs(_rand(5)) + 0.5, _rand(5), _rand(5)

    def body(b, x):
        y = b.conv(x=b.mul(x=x, y=np.float32(0.5), name="half"), weight=weight, bias=cbias, pad_type="same",
                   name="conv")
        y = b.batch_norm(x=y, mean=mean, variance=var, gamma=gamma, beta=beta, epsilon=1e-3, name="bn")
        y = b.max_pool(x=b.relu(x=y, name="relu"), kernel_sizes=[2, 2], strides=[2, 2], pad_type="valid", name="pool")
        return [b.add(x=y, y=np.float32(-0.25), name="shift")]

    path = tmp_path / "flex.mlmodel"
    converter.convert(_flexible_program(body), to="neuralnetwork", out=path, target="iOS12", passes="none",
                      overwrite=True)
    model = read_model_file(path).model
    assert model.specificationVersion == 3  # the shapeRange
    assert model.description.input[0].type.multiArrayType.WhichOneof("ShapeFlexibility") == "shapeRange"
    assert dict(layer_kinds(path)) == {"multiply": 1, "convolution": 1, "batchnorm": 1, "activation": 1,
                                       "pooling": 1, "add": 1}
    mine = converter.load(path)
    for hw in ((8, 12), (17, 6)):
        x = _rand(3, *hw, scale=1.0)
        want = _torch_pipeline(x, weight, cbias, mean, var, gamma, beta)
        got = list(converter.run(mine, {"x": x}).values())[0]
        assert_close(got.reshape(want.shape), want, 1e-5)


def _torch_pipeline(x, weight, cbias, mean, var, gamma, beta) -> np.ndarray:
    t = torch.from_numpy(x[None] * 0.5)
    y = F.conv2d(t, torch.from_numpy(weight), torch.from_numpy(cbias), padding="same")
    y = F.batch_norm(y, torch.from_numpy(mean), torch.from_numpy(var), torch.from_numpy(gamma),
                     torch.from_numpy(beta), eps=1e-3)
    return (F.max_pool2d(torch.relu(y), 2, 2) - 0.25).numpy()[0]


def test_flexible_sizes_that_a_layer_would_compute_with_are_refused(tmp_path: Path) -> None:
    def body(b, x):
        flat = b.reshape(x=x, shape=[1, -1], name="flatten")
        return [b.add(x=x, y=_rand(1, 3, 1, 1), name="per_channel"), flat]

    with pytest.raises(UnsupportedError) as info:
        converter.convert(_flexible_program(body), to="neuralnetwork", out=tmp_path / "no.mlmodel",
                          target="iOS12", passes="none", overwrite=True)
    message = str(info.value)
    assert "add 'per_channel': a constant of shape [1, 3, 1, 1] on flexible sizes [1, 3, 'h', 'w']" in message
    assert "reshape 'flatten': 'flatten' reshapes flexible sizes" in message
    assert not (tmp_path / "no.mlmodel").exists()


def test_batch_first_lstm_over_a_static_sequence_and_slices_match_torch(tmp_path: Path) -> None:
    """A [1, 5, IN] input moved into the lstm's sequence by a transpose (permutes into and out of
    Seq), the last step sliced (the slice layer along H) and every second unit of it (along W)."""
    m, params = _torch_lstm(False, seed=9)
    steps = 5

    def body(b, x):
        zeros = np.zeros((1, H), np.float32)
        y, _, _ = b.lstm(x=b.transpose(x=x, perm=[1, 0, 2], name="time_major"), initial_h=zeros, initial_c=zeros,
                         direction="forward", output_sequence=True, **params, name="lstm")
        y = b.transpose(x=y, perm=[1, 0, 2], name="batch_major")  # [1, S, H]
        last = b.slice_by_index(x=y, begin=[0, -1, 0], end=[1, steps, H], end_mask=[True, True, True],
                                squeeze_mask=[False, True, False], name="last")  # [1, H]
        odd = b.slice_by_index(x=y, begin=[0, 0, 1], end=[1, steps, H], stride=[1, 1, 2], name="odd_units")
        return [last, odd]

    path = tmp_path / "batch_first.mlmodel"
    prog = new_program([("x", TensorType(fp32, (1, steps, IN)))], body)
    converter.convert(prog, to="neuralnetwork", out=path, target="iOS12", passes="none", overwrite=True)
    assert read_model_file(path).model.specificationVersion == 1
    kinds = layer_kinds(path)
    assert kinds["uniDirectionalLSTM"] == 1 and kinds["slice"] == 2 and kinds["permute"] == 4
    x = _rand(1, steps, IN)
    with torch.no_grad():
        y, _ = m(torch.from_numpy(x[0][:, None]))  # time-major [S, 1, IN]
    y = y.numpy().transpose(1, 0, 2)  # [1, S, H]
    last, odd = converter.run(converter.load(path), {"x": x}).values()
    assert_close(np.asarray(last).reshape(1, H), y[:, -1], 1e-5)
    assert_close(np.asarray(odd).reshape(1, steps, H // 2), y[:, :, 1::2], 1e-5)
