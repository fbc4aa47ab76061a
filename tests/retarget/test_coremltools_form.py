"""Issue 7: iOS16/17 constexpr ops as coremltools writes them (parameters in attributes, not input
bindings) are read, re-targeted, and written back in that form.

coremltools' writer is the oracle for the file form (for opsets before iOS18 it puts a constexpr
op's parameters in attributes, and the iOS18 constexpr_cast documentation says the iOS16 op takes
them as attributes); its op definitions are the oracle for the dense weights.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import converter
from converter.formats.package import write_package
from converter.formats.proto import Model_pb2
from tests.mil.helpers import CoremltoolsLoader
from tests.ops.cases.quant import pack_lsb_first

from .oracle import assert_same_weights, dense_weights

pytestmark = pytest.mark.usefixtures("no_fsync")
rng = np.random.default_rng(5)


def coremltools_ios16_package(tmp: Path) -> Path:
    """Four iOS16 constexpr ops built and written by coremltools itself."""
    import coremltools as ct
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.backend.mil.load import load as ct_write

    @mb.program(input_specs=[mb.TensorSpec((1, 3))], opset_version=ct.target.iOS16)
    def prog(x):
        lut = mb.constexpr_lut_to_dense(indices=pack_lsb_first(rng.integers(0, 16, 12), 4),
                                        lut=rng.standard_normal(16).astype(np.float32),
                                        shape=np.array([3, 4], np.uint32), name="lut")
        q = mb.constexpr_affine_dequantize(quantized_data=rng.integers(0, 256, (3, 4)).astype(np.uint8),
                                           zero_point=np.uint8(100), scale=np.float32(0.05), axis=np.int32(0),
                                           name="affine")
        mask = rng.integers(0, 2, 12)
        s = mb.constexpr_sparse_to_dense(nonzero_data=rng.standard_normal(int(mask.sum())).astype(np.float32),
                                         mask=pack_lsb_first(mask, 1), shape=np.array([3, 4], np.uint32),
                                         name="sparse")
        c = mb.constexpr_cast(source_val=rng.standard_normal((3, 4)).astype(np.float16), output_dtype="fp32",
                              name="cast")
        y = mb.matmul(x=x, y=lut)
        for w in (q, s, c):
            y = mb.add(x=y, y=mb.matmul(x=x, y=w))
        return y

    blobs = tmp / "ct_weights"
    blobs.mkdir()
    spec = ct_write(prog, weights_dir=str(blobs), specification_version=7)
    return write_package(tmp / "ct.mlpackage", spec.SerializeToString(),
                         lambda weights: shutil.copy(blobs / "weight.bin", weights / "weight.bin"))


def constexpr_ops(path: Path) -> dict[str, Model_pb2.Model]:
    m = Model_pb2.Model()
    m.ParseFromString((path / "Data/com.apple.CoreML/model.mlmodel").read_bytes())
    fn = m.mlProgram.functions["main"]
    ops = fn.block_specializations[fn.opset].operations
    return {op.attributes["name"].immediateValue.tensor.strings.values[0]: op for op in ops
            if op.type.startswith("constexpr_")}


@pytest.mark.parametrize("target", ["iOS16", "iOS17", "iOS18"])
def test_coremltools_ios16_package_read_and_retargeted(target, tmp_path, coremltools_loader: CoremltoolsLoader):
    src = coremltools_ios16_package(tmp_path)
    want = dense_weights(coremltools_loader, src)
    assert sorted(want) == ["affine", "cast", "lut", "sparse"]
    theirs = constexpr_ops(src)
    assert all(not op.inputs and "lut" in op.attributes for name, op in theirs.items() if name == "lut")

    prog = converter.load(src)
    x = rng.standard_normal((1, 3)).astype(np.float32)
    out = converter.save(prog, tmp_path / "ours.mlpackage", target=target)
    assert_same_weights(want, dense_weights(coremltools_loader, out))
    back = converter.load(out)
    assert np.array_equal(converter.run(back, {"x": x})[back.main.outputs[0].name],
                          converter.run(prog, {"x": x})[prog.main.outputs[0].name])

    ours = constexpr_ops(out)
    if target == "iOS18":
        assert {op.type for op in ours.values()} == {"constexpr_lut_to_dense", "constexpr_blockwise_shift_scale",
                                                     "constexpr_sparse_to_dense", "constexpr_cast"}
        assert all(op.inputs for op in ours.values())
    else:  # coremltools' form: every parameter an attribute, with the same names and no input bindings
        for name, op in ours.items():
            assert not op.inputs, name
            assert set(op.attributes) == set(theirs[name].attributes), name
