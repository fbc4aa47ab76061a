"""The conv/linear fusions against torch, an oracle we did not write: programs of conv /
conv_transpose (groups > 1, strides, dilations, padding) followed by batch_norm (eval mode; gamma,
beta, mean, variance and epsilon all distinct and away from 0 and 1), a per-channel scale or bias;
matmul + add; pad + conv; reduce_mean; are fused by the ``fuse_conv`` pass (and
``fuse_global_pool``), lose the ops they fold, and our interpreter's outputs of the fused program
match torch's functional ops on random inputs. The quantize-of-dequantize identity is checked
exhaustively with torch's own quantized tensors.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from converter.ir.builder import new_program
from converter.ir.interpreter import run
from converter.ir.types import TensorType, dtype
from converter.ir.verify import verify
from converter.passes.fusions.conv_family import FuseConvFamily, FuseGlobalPool

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(1234)


def rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def bn_params(c: int) -> dict[str, np.ndarray]:
    """Distinct, non-trivial batch_norm parameters (no 0 or 1, no two alike)."""
    return {
        "mean": rand(c, scale=0.7) + 0.3,
        "variance": RNG.uniform(0.4, 2.5, c).astype(np.float32),
        "gamma": RNG.uniform(0.5, 1.8, c).astype(np.float32) * RNG.choice([-1, 1], c).astype(np.float32),
        "beta": rand(c, scale=0.9) - 0.2,
        "epsilon": np.float32(0.0375),
    }


def torch_bn(y, p):
    t = {k: torch.from_numpy(np.asarray(v)) for k, v in p.items() if k != "epsilon"}
    return F.batch_norm(y, t["mean"], t["variance"], t["gamma"], t["beta"], training=False, eps=float(p["epsilon"]))


def fused(prog, *passes) -> Counter:
    for p in passes or (FuseConvFamily(),):
        p.run(prog)
    verify(prog)
    return Counter(op.type for op in prog.walk() if op.type != "const")


def close(got: np.ndarray, want) -> None:
    want = want.detach().numpy() if hasattr(want, "detach") else np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())))


def only(prog, feeds) -> np.ndarray:
    (out,) = run(prog, feeds).values()
    return out


def tensor(shape) -> TensorType:
    return TensorType(dtype("fp32"), tuple(shape))


@pytest.mark.parametrize("bias", [False, True])
def test_conv2d_grouped_strided_dilated_then_batch_norm(bias: bool) -> None:
    x, w = rand(2, 6, 11, 9), rand(4, 3, 3, 2)  # 6 -> 4 channels in 2 groups
    b = rand(4) if bias else None
    p = bn_params(4)

    def body(bd, xv):
        y = bd.conv(x=xv, weight=bd.const(w), bias=None if b is None else bd.const(b), strides=[2, 1],
                    dilations=[2, 1], pad_type="custom", pad=[1, 1, 2, 2], groups=2)
        return bd.batch_norm(x=y, **{k: bd.const(v) for k, v in p.items()})

    prog = new_program({"x": tensor(x.shape)}, body)
    assert fused(prog) == Counter(conv=1)
    want = torch_bn(F.conv2d(torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b),
                             stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2), p)
    close(only(prog, {"x": x}), want)


def test_conv1d_then_batch_norm_without_gamma_beta() -> None:
    x, w, b = rand(3, 4, 10), rand(5, 4, 3), rand(5)
    p = bn_params(5)
    p2 = {k: p[k] for k in ("mean", "variance", "epsilon")}

    def body(bd, xv):
        return bd.batch_norm(x=bd.conv(x=xv, weight=bd.const(w), bias=bd.const(b)), **{k: bd.const(v) for k, v in p2.items()})

    prog = new_program({"x": tensor(x.shape)}, body)
    assert fused(prog) == Counter(conv=1)
    want = F.batch_norm(F.conv1d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)),
                        torch.from_numpy(p["mean"]), torch.from_numpy(p["variance"]), training=False,
                        eps=float(p["epsilon"]))
    close(only(prog, {"x": x}), want)


@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose2d_grouped_then_batch_norm(bias: bool) -> None:
    # conv_transpose weight [C_in, C_out / groups, *K]: 6 inputs, 3 groups, 2 outputs per group
    x, w = rand(2, 6, 5, 4), rand(6, 2, 3, 2)
    b = rand(6) if bias else None
    p = bn_params(6)

    def body(bd, xv):
        y = bd.conv_transpose(x=xv, weight=bd.const(w), bias=None if b is None else bd.const(b), strides=[2, 3],
                              groups=3)
        return bd.batch_norm(x=y, **{k: bd.const(v) for k, v in p.items()})

    prog = new_program({"x": tensor(x.shape)}, body)
    assert fused(prog) == Counter(conv_transpose=1)
    want = torch_bn(F.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w),
                                       None if b is None else torch.from_numpy(b), stride=(2, 3), groups=3), p)
    close(only(prog, {"x": x}), want)


def test_conv_transpose_grouped_times_per_channel_scale_plus_bias() -> None:
    x, w, b = rand(1, 4, 3, 3), rand(4, 3, 2, 2), rand(6)  # 2 groups, 6 outputs
    s, c = RNG.uniform(0.3, 2.0, 6).astype(np.float32), rand(6)

    def body(bd, xv):
        y = bd.conv_transpose(x=xv, weight=bd.const(w), bias=bd.const(b), groups=2)
        return bd.sub(x=bd.mul(x=bd.const(s.reshape(6, 1, 1)), y=y), y=bd.const(c.reshape(1, 6, 1, 1)))

    prog = new_program({"x": tensor(x.shape)}, body)
    assert fused(prog) == Counter(conv_transpose=1)
    ct = F.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), groups=2)
    want = ct * torch.from_numpy(s).reshape(1, 6, 1, 1) - torch.from_numpy(c).reshape(1, 6, 1, 1)
    close(only(prog, {"x": x}), want)


def test_conv_plus_bias_constant_and_scalar() -> None:
    x, w, c = rand(2, 3, 6, 6), rand(4, 3, 3, 3), rand(4)

    def body(bd, xv):
        y = bd.conv(x=xv, weight=bd.const(w))
        return bd.add(x=bd.add(x=bd.const(c.reshape(4, 1, 1)), y=y), y=bd.const(np.float32(0.625)))

    prog = new_program({"x": tensor(x.shape)}, body)
    assert fused(prog) == Counter(conv=1)
    close(only(prog, {"x": x}), F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(c)) + 0.625)


@pytest.mark.parametrize("transpose_y", [False, True])
def test_matmul_plus_vector_is_torch_linear(transpose_y: bool) -> None:
    x, wt, c = rand(2, 5, 7), rand(3, 7), rand(3)  # torch's linear weight [out=3, in=7]
    w = wt if transpose_y else wt.T.copy()

    def body(bd, xv):
        return bd.add(x=bd.matmul(x=xv, y=bd.const(w), transpose_y=transpose_y), y=bd.const(c))

    prog = new_program({"x": tensor(x.shape)}, body)
    assert fused(prog) == Counter(linear=1)
    close(only(prog, {"x": x}), F.linear(torch.from_numpy(x), torch.from_numpy(wt), torch.from_numpy(c)))


def test_transposes_folded_into_matmul_flags_match_torch() -> None:
    a, b = rand(3, 4, 5), rand(3, 6, 4)  # a^T @ b^T: [3, 5, 4] @ [3, 4, 6]

    def body(bd, av, bv):
        return bd.matmul(x=bd.transpose(x=av, perm=[0, 2, 1]), y=bd.transpose(x=bv, perm=[0, 2, 1]))

    prog = new_program({"a": tensor(a.shape), "b": tensor(b.shape)}, body)
    assert fused(prog) == Counter(matmul=1)
    close(only(prog, {"a": a, "b": b}),
          torch.from_numpy(a).transpose(1, 2) @ torch.from_numpy(b).transpose(1, 2))


def test_pad_then_conv_and_avg_pool_match_torch() -> None:
    x, w = rand(2, 3, 7, 8), rand(4, 3, 3, 3)

    def body(bd, xv):
        px = bd.pad(x=xv, pad=[2, 1, 0, 3])  # H: 2 before, 1 after; W: 0 before, 3 after
        y = bd.conv(x=px, weight=bd.const(w), strides=[2, 2])
        py = bd.pad(x=y, pad=[0, 0, 0, 0, 1, 1, 1, 1])
        return bd.avg_pool(x=py, kernel_sizes=[3, 3], strides=[1, 1], pad_type="valid")

    prog = new_program({"x": tensor(x.shape)}, body)
    assert fused(prog) == Counter(conv=1, avg_pool=1)
    conv = F.conv2d(F.pad(torch.from_numpy(x), (0, 3, 2, 1)), torch.from_numpy(w), stride=2)
    close(only(prog, {"x": x}), F.avg_pool2d(conv, 3, stride=1, padding=1, count_include_pad=True))


def test_reduce_mean_as_global_avg_pool_matches_torch() -> None:
    x = rand(2, 5, 6, 7)

    def body(bd, xv):
        return bd.reduce_mean(x=xv, axes=[2, 3], keep_dims=True)

    prog = new_program({"x": tensor(x.shape)}, body)
    assert fused(prog, FuseGlobalPool()) == Counter(avg_pool=1)
    close(only(prog, {"x": x}), F.adaptive_avg_pool2d(torch.from_numpy(x), 1))


@pytest.mark.filterwarnings("ignore:.*quantized tensor creation functions.*:UserWarning")
@pytest.mark.parametrize("scale", [0.0375, 1.7e-3, 3.1e4, 2.0**-120, 1.1e35])
@pytest.mark.parametrize("zero_point", [0, 77, 255])
def test_quantize_of_dequantize_is_identity_in_torch(scale: float, zero_point: int) -> None:
    """The fact quantize_of_dequantize relies on, by torch's quantized tensors on every uint8 code:
    requantizing a dequantized tensor with its own scale and zero point gives back its codes, for
    scales whose ``* 255`` and reciprocal stay finite (torch multiplies by ``1 / scale``: at
    ``scale = 2^-140`` that is inf and the codes clip; the rule refuses such scales)."""
    q = torch.arange(256, dtype=torch.uint8)
    qt = torch._make_per_tensor_quantized_tensor(q, scale, zero_point)
    back = torch.quantize_per_tensor(qt.dequantize(), scale, zero_point, torch.quint8)
    assert torch.equal(back.int_repr(), q)
