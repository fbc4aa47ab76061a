"""The two independent oracles of the NeuralNetwork backend (issue 10), ready for its tests.

1. `onnxruntime_run`: onnxmltools converts an emitted .mlmodel to ONNX and onnxruntime runs it
   (tests/oracles/onnxmltools_oracle.py: the runtime fixes of onnxmltools 1.16 and the repairs of
   its ONNX). Coverage is partial (classic rank-5 layers only, see
   ../shared/reference/onnxmltools-oracle-notes.md): a model it cannot convert, or whose ONNX
   onnxruntime rejects, gives an `Unavailable` with the reason, so that tests can report coverage.
2. `coremltools_nn`: coremltools' own MIL -> NeuralNetwork conversion of the same MIL program
   (``ct.convert(program, convert_to="neuralnetwork")``) written as an .mlmodel; our NeuralNetwork
   frontend and interpreter then run it next to our backend's output. coremltools refuses programs
   with ops of an opset above iOS15 (iOS16+ ops, or the iOS16+ versions of ops such as reshape and
   clip in an iOS17 program): `Unavailable` again.

How coremltools is fed a MIL program: a coremltools ``Program`` as it is (a deep copy: ct.convert
rewrites the program it is given in place), an ML program package or .mlmodel read by
coremltools' MIL proto loader (milproto ``load``, tests/mil/helpers.py ``CoremltoolsLoader``), or
one of our IR programs saved as an .mlpackage first and read the same way. Then
``ct.convert(prog, convert_to="neuralnetwork", skip_model_load=True)`` (no Core ML runtime here:
the MLModel is not compiled) and the spec's bytes are the .mlmodel (an NeuralNetwork model has no
weight files; ``ct.models.utils.save_spec`` writes the same bytes).
"""

from __future__ import annotations

import copy
import os
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from converter.formats.atomic import atomic_write_bytes
from converter.ir.core import Program as IRProgram
from tests.nn.common import OracleArray, quiet_coremltools


@dataclass(frozen=True)
class Unavailable:
    """Why an oracle cannot judge a model: not a failure of the model, a gap in the oracle's
    coverage that the test reports."""

    reason: str


# -- oracle 1: onnxmltools -> ONNX -> onnxruntime ----------------------------------------------------


def onnxruntime_run(mlmodel_path: str | os.PathLike, feeds: Mapping[str, Any], *,
                    like: Mapping[str, Any] | None = None) -> dict[str, np.ndarray] | Unavailable:
    """onnxruntime's outputs for the NeuralNetwork model at ``mlmodel_path`` on ``feeds`` (in the
    form ``converter.run`` takes), as `OracleArray`s marked "onnxruntime"; `Unavailable` when
    onnxmltools cannot convert the model or onnxruntime rejects its ONNX. The outputs are in ONNX
    form ([N, C] for a [C] vector, ...), or, with ``like`` (our interpreter's outputs), reshaped to
    the shapes of ``like`` by element order (``onnxmltools_oracle.as_coreml``). A failure while
    running a model onnxruntime accepted is raised: it is the caller's (feeds) or a real problem."""
    from tests.oracles import onnxmltools_oracle

    path = Path(mlmodel_path)
    quiet_coremltools()  # onnxmltools imports coremltools' protos: pay (and silence) it once
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = onnxmltools_oracle.to_onnx(path.read_bytes())
        except Exception as e:  # what onnxmltools raises is anything from KeyError to RuntimeError
            return Unavailable(f"onnxmltools cannot convert {path.name}: {type(e).__name__}: {e}")
        try:
            sess = onnxmltools_oracle.session(model)
        except Exception as e:
            return Unavailable(f"onnxruntime rejects onnxmltools' ONNX of {path.name}: {type(e).__name__}: {e}")
        outs = onnxmltools_oracle.run(model, feeds, sess)
    if like is not None:
        outs = onnxmltools_oracle.as_coreml(outs, like)
    return {k: OracleArray.of(v, "onnxruntime") for k, v in outs.items()}


# -- oracle 2: coremltools' MIL -> NeuralNetwork conversion ------------------------------------------


def coremltools_program(source: Any, scratch: Path) -> Any:
    """A coremltools MIL ``Program`` of ``source``: a coremltools Program (deep-copied), one of our
    IR programs (saved into the empty folder ``scratch`` as an .mlpackage, then read back), or the path of an ML
    program (.mlpackage, or an .mlmodel holding an mlProgram), read by coremltools' MIL proto
    loader. Raises what the loader raises."""
    quiet_coremltools()
    from coremltools.converters.mil.mil import Program as CtProgram

    from tests.mil.helpers import CoremltoolsLoader

    if isinstance(source, CtProgram):
        return copy.deepcopy(source)
    if isinstance(source, IRProgram):
        import converter

        source = converter.save(source, scratch / "model.mlpackage")
    return CoremltoolsLoader().load(Path(source))


def coremltools_nn(source: Any, out_path: str | os.PathLike) -> Path | Unavailable:
    """Write coremltools' NeuralNetwork conversion of the MIL program ``source`` (see
    `coremltools_program`) to ``out_path`` (an .mlmodel, written atomically) and return its path;
    `Unavailable` when coremltools cannot read the program or refuses to convert it (ops above
    iOS15, an op without a NeuralNetwork layer)."""
    ct = quiet_coremltools()
    with tempfile.TemporaryDirectory(prefix="ct-nn-") as scratch, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            prog = coremltools_program(source, Path(scratch))
        except Exception as e:
            return Unavailable(f"coremltools' MIL proto loader cannot read the program: {type(e).__name__}: {e}")
        try:
            model = ct.convert(prog, convert_to="neuralnetwork", skip_model_load=True)
        except Exception as e:
            return Unavailable(f"coremltools refuses to convert it to a NeuralNetwork: {type(e).__name__}: {e}")
    return atomic_write_bytes(out_path, model.get_spec().SerializeToString(), durable=False)

