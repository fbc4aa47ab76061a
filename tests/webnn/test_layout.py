"""Issue 9: a CNN converted with ``layout="nhwc"`` has transposes only at its inputs and outputs
(the layout is tracked through the graph; constants are transposed at conversion time), and model.d.ts
declares the module's exports.

"At an input / output", precisely, on the dataflow graph read from model.js (one builder call per
line; reshape, cast and identity do not move data between axes, so they are "pass-through"):
- a transpose is at an input if its operand, followed back through pass-through calls, is a
  ``builder.input``;
- it is at an output if it has at least one use and every use, followed forward through
  pass-through calls, is a value the graph returns (``builder.build``);
- every other transpose is interior. The CNN shared models must have none in NHWC beyond the
  model's own transposes, i.e. no more interior transposes than their NCHW conversion.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import converter

from ..nn_models.shared import model_id
from ..passes.test_models import MODELS

PASS_THROUGH = {"reshape", "cast", "identity"}
_CALL = re.compile(r"^\s*const (\w+) = (?:builder\.(\w+)|(constant))\((.*)\);(?: //.*)?$")
_RETURN = re.compile(r"^\s*return builder\.build\(\{(.*)\}\);")
_IDENT = re.compile(r"\b(?:t|c|input)\d+\b")

CNN_MODELS = {
    "builder/cnn_conv_pool_fc.mlmodel", "builder/cnn_conv_pool_fc_fp16.mlmodel",
    "builder/cnn_conv_pool_fc_int8_linear.mlmodel", "builder/cnn_conv_pool_fc_lut4.mlmodel",
    "builder/flexible_image_sizes.mlmodel", "builder/image_classifier_preprocessed.mlmodel",
    "real/50a282d4_my_network.mlmodel", "real/56e485a2_my_network_image.mlmodel",
    "real/7485461f_SqueezeNetFP16.mlmodel", "real/8dbda0d2_SqueezeNetInt8LUT.mlmodel",
    "real/b9214af7_TinyDrawingEmbedding.mlmodel", "real/c3284a54_MNIST.mlmodel", "real/c39a15ad_my_model.mlmodel",
    "real/cdceb1a6_my_network_image_ct4.mlmodel", "torch/cnn_bn_nn.mlmodel", "torch/cnn_bn_mlprogram.mlpackage",
    "torch/cnn_bn_mlprogram_fp16.mlpackage", "torch/transformer_encoder_layer_nn.mlmodel",
}
PATHS = [p for p in MODELS if model_id(p) in CNN_MODELS]


class Dataflow:
    """The builder calls of model.js's build(): name -> (method, operand names), uses, returned names."""

    def __init__(self, js: str) -> None:
        body = js[js.index("export async function build("):]
        self.calls: dict[str, tuple[str, list[str]]] = {}
        self.uses: dict[str, list[str]] = {}
        self.returned: set[str] = set()
        for line in body.splitlines():
            m = _CALL.match(line)
            if m:
                name, method, const, args = m.groups()
                operands = _IDENT.findall(args) if method else []
                self.calls[name] = (method or const, operands)
                for o in operands:
                    self.uses.setdefault(o, []).append(name)
            r = _RETURN.match(line)
            if r:
                self.returned = set(_IDENT.findall(r.group(1)))

    def transposes(self) -> list[str]:
        return [n for n, (method, _) in self.calls.items() if method == "transpose"]

    def at_input(self, name: str) -> bool:
        operand = self.calls[name][1][0]
        while self.calls[operand][0] in PASS_THROUGH:
            operand = self.calls[operand][1][0]
        return self.calls[operand][0] == "input"

    def at_output(self, name: str) -> bool:
        def reaches_only_outputs(n: str) -> bool:
            uses = self.uses.get(n, [])
            if not uses:
                return n in self.returned
            return all(self.calls[u][0] in PASS_THROUGH and reaches_only_outputs(u) for u in uses)

        return reaches_only_outputs(name)

    def interior(self) -> list[str]:
        return [t for t in self.transposes() if not (self.at_input(t) or self.at_output(t))]


@pytest.fixture(autouse=True)
def _quiet_notes(recwarn: pytest.WarningsRecorder) -> None:
    """Conversion notes are not the subject here."""


def test_every_chosen_model_is_present() -> None:
    assert sorted(model_id(p) for p in PATHS) == sorted(CNN_MODELS)


def test_dataflow_reader_classifies_transposes() -> None:
    js = """export async function build(context, weights) {
  const input1 = builder.input("x", inputs["x"]); // input x
  const t2 = builder.reshape(input1, [1, 3, 4, 4]);
  const t3 = builder.transpose(t2, {permutation: [0, 2, 3, 1]}); // conv a
  const t4 = builder.relu(t3);
  const t5 = builder.transpose(t4, {permutation: [0, 3, 1, 2]}); // middle
  const t6 = builder.relu(t5);
  const t7 = builder.transpose(t6, {permutation: [0, 2, 3, 1]}); // to the output
  const t8 = builder.reshape(t7, [48]);
  return builder.build({"y": t8, "z": t6});
}"""
    flow = Dataflow(js)
    assert flow.transposes() == ["t3", "t5", "t7"]
    assert flow.at_input("t3") and not flow.at_output("t3")
    assert flow.at_output("t7") and not flow.at_input("t7")
    assert flow.interior() == ["t5"]


@pytest.mark.parametrize("path", PATHS, ids=model_id)
def test_nhwc_transposes_only_at_inputs_and_outputs(path: Path, tmp_path: Path) -> None:
    flows = {}
    for layout in ("nchw", "nhwc"):
        converter.convert(path, to="webnn", out=tmp_path / layout, layout=layout)
        flows[layout] = Dataflow((tmp_path / layout / "model.js").read_text(encoding="utf-8"))
    own = len(flows["nchw"].interior())  # the model's own transpose ops (none in a plain CNN)
    assert len(flows["nhwc"].interior()) <= own, flows["nhwc"].interior()
    edge = [t for t in flows["nhwc"].transposes() if t not in flows["nhwc"].interior()]
    n_inputs = sum(1 for m, _ in flows["nhwc"].calls.values() if m == "input")
    assert len(edge) <= n_inputs + len(flows["nhwc"].returned)
    print(model_id(path), "nhwc transposes:", len(flows["nhwc"].transposes()), "edge:", len(edge),
          "interior:", len(flows["nhwc"].interior()), "(nchw:", len(flows["nchw"].transposes()), ")")
