"""Issue 7: the real 8-bit lookup-table models re-target to iOS18 and back, keeping their compression.

Both shared LUT models (SqueezeNetInt8LUT, DeepLabV3Int8LUT), from the .mlmodel and from our iOS16
.mlpackage, go iOS16 -> iOS18 -> iOS16. Oracles:
- coremltools' MIL loader reads every package (its type inference re-run on every op);
- the dense weights coremltools' own op definitions compute from each package equal, bit for bit,
  the weights decoded from the NeuralNetwork file by the spec (``floatValue[rawValue byte]`` for
  8-bit lookup tables), written in this test;
- round trip: the interpreter's outputs on the same inputs are identical to the source model's,
  and the iOS16 package written back from iOS18 holds the same compressed parameters.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import cli
import converter
from converter.check import random_feeds
from converter.formats.model_file import read_model_file
from converter.frontends.neuralnetwork.weights import iter_weight_params
from converter.ir.verify import verify
from tests.conftest import MODELS
from tests.mil.helpers import CoremltoolsLoader, large_constants, program_text, same_bits

from .oracle import dense_weights
from .test_constexpr import params_of

pytestmark = pytest.mark.usefixtures("no_fsync")

SQUEEZENET = MODELS / "real/8dbda0d2_SqueezeNetInt8LUT.mlmodel"
DEEPLAB = MODELS / "real/9de70cc9_DeepLabV3Int8LUT.mlmodel"
LUT_OPS = {SQUEEZENET: 22, DEEPLAB: 45}


def spec_weights(path: Path) -> Counter:
    """The dense weights of every 8-bit lookup-table WeightParams, decoded as the NeuralNetwork spec
    says (one byte per index into ``floatValue``), as a multiset of their bytes."""
    out: Counter = Counter()
    for w in iter_weight_params(read_model_file(path).model):
        q = w.quantization
        if not q.HasField("lookupTableQuantization"):
            continue
        assert q.numberOfBits == 8
        lut = np.asarray(q.lookupTableQuantization.floatValue, np.float32)
        out[lut[np.frombuffer(w.rawValue, np.uint8)].tobytes()] += 1
    return out


def as_multiset(weights: dict[str, np.ndarray]) -> Counter:
    for name, w in weights.items():
        assert w.dtype == np.float32, (name, w.dtype)
    return Counter(np.ascontiguousarray(w).tobytes() for w in weights.values())


def lut_index_dtypes(path: Path) -> Counter:
    return Counter(op.inputs["indices"].type.dtype.name for op in converter.load(path).walk()
                   if op.type == "constexpr_lut_to_dense")


@pytest.fixture(scope="module", params=[SQUEEZENET, DEEPLAB], ids=lambda p: p.stem)
def packages(request, tmp_path_factory) -> dict[str, Path]:
    """The model written for iOS16 and iOS18 from the .mlmodel, and each re-targeted from the other."""
    src: Path = request.param
    tmp = tmp_path_factory.mktemp(src.stem)
    prog = converter.load(src)
    out = {"mlmodel": src,
           "16": converter.save(prog, tmp / "16.mlpackage", target="iOS16"),
           "18": converter.save(prog, tmp / "18.mlpackage", target="iOS18")}
    out["16->18"] = converter.save(converter.load(out["16"]), tmp / "16_18.mlpackage", target="iOS18")
    out["16->18->16"] = converter.save(converter.load(out["16->18"]), tmp / "16_18_16.mlpackage", target="iOS16")
    out["18->16"] = converter.save(converter.load(out["18"]), tmp / "18_16.mlpackage", target="iOS16")
    return out


def test_compression_is_kept_in_every_opset(packages):
    n = LUT_OPS[packages["mlmodel"]]
    for key in ("16", "18", "16->18", "16->18->16", "18->16"):
        prog = converter.load(packages[key])
        assert prog.main.opset == ("iOS18" if key.endswith("18") else "iOS16"), key
        assert lut_index_dtypes(packages[key]) == Counter({"uint8": n}), key  # packed bytes or uint8 indices
    size = lambda p: (p / "Data/com.apple.CoreML/weights/weight.bin").stat().st_size  # noqa: E731
    assert size(packages["16->18"]) < 1.02 * size(packages["16"])


def test_dense_weights_equal_the_spec_decoding(packages, coremltools_loader: CoremltoolsLoader):
    """Each compressed weight (the large ones: small quantized tensors are stored dense by the
    NeuralNetwork frontend) is one of the file's weights, decoded by the spec."""
    want = spec_weights(packages["mlmodel"])
    for key in ("16", "18", "16->18", "16->18->16", "18->16"):
        got = as_multiset(dense_weights(coremltools_loader, packages[key]))
        assert sum(got.values()) == LUT_OPS[packages["mlmodel"]], key
        assert not got - want, f"{key}: {sum((got - want).values())} weights differ from the spec decoding"


@pytest.mark.parametrize("source,target", [("16", "iOS18"), ("18", "iOS16")])
def test_pass_output_verifies_and_the_source_is_untouched(packages, source, target):
    """The re-targeted clone passes the IR verifier (types re-inferred with the target's
    definitions); the program it came from is left as it was (saving never modifies it)."""
    from converter.passes.retarget import retarget

    prog = converter.load(packages[source])
    before = (program_text(prog), large_constants(prog))
    clone, problems, _ = retarget(prog, target)
    assert clone is not prog and not problems
    verify(clone)
    assert all(op.opdef.opset == target for op in clone.walk())
    assert (program_text(prog), large_constants(prog)) == before


def test_round_trip_gives_back_the_ios16_parameters(packages):
    original = params_of(converter.load(packages["16"]))
    assert params_of(converter.load(packages["16->18->16"])) == original
    assert params_of(converter.load(packages["18->16"])) == original


def _outputs_identical(packages: dict[str, Path], keys: tuple[str, ...]) -> None:
    src = converter.load(packages["mlmodel"])
    feeds = random_feeds(src.main)
    want = converter.run(src, feeds)
    for key in keys:
        got = converter.run(converter.load(packages[key]), feeds)
        assert list(got) == list(want), key
        for name in want:
            if isinstance(want[name], dict):
                assert got[name] == want[name], (key, name)
            else:
                assert same_bits(got[name], want[name]), (key, name)


@pytest.mark.parametrize("packages", [SQUEEZENET], indirect=True, ids=lambda p: p.stem)  # DeepLabV3: below
def test_outputs_identical(packages):
    _outputs_identical(packages, ("16->18", "18->16", "16->18->16"))


@pytest.mark.slow  # about 15 s: three 513x513 DeepLabV3 runs in the reference interpreter
@pytest.mark.parametrize("packages", [DEEPLAB], indirect=True, ids=lambda p: p.stem)
def test_deeplab_outputs_identical(packages):
    _outputs_identical(packages, ("16->18", "18->16"))


@pytest.mark.parametrize("src", [SQUEEZENET, DEEPLAB], ids=lambda p: p.stem)
def test_cli_retargets_to_ios18(src, tmp_path):
    """The issue's reproduction: ``converter convert X -o y.mlpackage --target iOS18`` from the
    .mlmodel and from its iOS16 package."""
    runner = CliRunner()
    pkg16 = tmp_path / "16.mlpackage"
    for source, out in ((src, pkg16), (src, tmp_path / "a.mlpackage"), (pkg16, tmp_path / "b.mlpackage")):
        args = ["convert", str(source), "-o", str(out)] + ([] if out == pkg16 else ["--target", "iOS18"])
        result = runner.invoke(cli.main, args)
        assert result.exit_code == 0, result.output
        assert result.stderr == "", result.stderr
        if out != pkg16:
            assert converter.load(out).main.opset == "iOS18"
