"""Registry cases: rnn, gru, lstm (every direction, the iOS17 fp16 and iOS18 gru versions)."""

import numpy as np

from tests.ops.harness import Case

_rng = np.random.default_rng(7)
S, B, IN, H = 5, 2, 3, 4


def _w(*shape: int, dt=np.float32) -> np.ndarray:
    return (_rng.standard_normal(shape) * 0.5).astype(dt)


def _inputs(states: int, width: int = H, dt=np.float32) -> dict:
    names = ("initial_h", "initial_c")[:states]
    return {"x": _w(S, B, IN, dt=dt), **{n: _w(B, width, dt=dt) for n in names}}


def _weights(gates: int, dt=np.float32, suffix: str = "") -> dict:
    return {f"weight_ih{suffix}": _w(gates * H, IN, dt=dt), f"weight_hh{suffix}": _w(gates * H, H, dt=dt),
            f"bias{suffix}": _w(gates * H, dt=dt)}


CASES = [
    Case("rnn", _inputs(1), {**_weights(1), "output_sequence": True}, id="forward"),
    Case("rnn", _inputs(1), {**_weights(1), "direction": "reverse", "activation": "relu"}, id="reverse"),
    Case("rnn", _inputs(1, dt=np.float16), {**_weights(1, np.float16), "output_sequence": True}, opset="iOS17",
         id="fp16"),
    Case("gru", _inputs(1), {**_weights(3), "output_sequence": True}, id="forward"),
    Case("gru", _inputs(1), {**_weights(3), "direction": "reverse", "recurrent_activation": "hard_sigmoid"},
         id="reverse"),
    Case("gru", _inputs(1, dt=np.float16), {**_weights(3, np.float16), "output_sequence": True}, opset="iOS17",
         id="fp16"),
    Case("gru", _inputs(1), {**_weights(3), "input_bias": _w(3 * H), "reset_after": True, "output_sequence": True},
         opset="iOS18", id="reset_after"),
    Case("lstm", _inputs(2), {**_weights(4), "output_sequence": True}, id="forward"),
    Case("lstm", _inputs(2), {**_weights(4), "peephole": _w(3 * H), "clip": 0.5, "direction": "reverse"},
         id="reverse_peephole_clip"),
    Case("lstm", _inputs(2, 2 * H), {**_weights(4), **_weights(4, suffix="_back"), "direction": "bidirectional",
                                     "output_sequence": True}, id="bidirectional"),
    Case("lstm", _inputs(2, dt=np.float16), {**_weights(4, np.float16), "cell_activation": "scaled_tanh"},
         opset="iOS17", id="fp16"),
]
