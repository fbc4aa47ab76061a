"""Hostile strings for the WebNN backend's security tests (issue 9): each would break out of, or
corrupt, a JavaScript string literal, an inline script element, an HTML comment or a line comment
if the generated files did not escape it."""

from __future__ import annotations

import numpy as np

from converter.ir.builder import new_program
from converter.ir.core import Program
from converter.ir.runtime import ListValue
from converter.ir.types import TensorType, fp32, string

HOSTILE = [
    'double"quote',
    "single'quote`backtick${x}",
    "back\\slash\\",
    "</script><script>throw new Error('escaped')</script>",
    "<!--comment",
    "line\u2028sep\u2029para",
    "new\nline\r\ttab",
    "nul\x00byte",
    "emoji \U0001F600 \u00e9\u4e2d",
    "<img src=x onerror=\"throw 1\">&amp;",
    "*/ // comment end",
    "L" * 10_000,
]


def hostile_classifier(input_name: str, prob_name: str, label_name: str, labels: list[str],
                       op_name: str, seed: int = 0) -> tuple[Program, np.ndarray]:
    """x [1, 4] -> matmul -> softmax -> classify(labels): a classifier whose input, outputs, op and
    labels carry the given names. Returns the program and its weight matrix."""
    w = np.random.default_rng(seed).standard_normal((4, len(labels))).astype(np.float32)

    def body(b, x):  # type: ignore[no-untyped-def]
        y = b.matmul(x=x, y=w, name=op_name)
        p = b.softmax(x=y, axis=-1, name=op_name + "_softmax")
        label, probs = b.classify(probabilities=p, classes=ListValue(
            TensorType(string, ()), [np.array(s) for s in labels], False), name="classify")
        label.name, probs.name = label_name, prob_name
        return [label, probs]

    return new_program({input_name: TensorType(fp32, (1, 4))}, body), w


def hostile_network(names: list[str]) -> Program:
    """Inputs named names[i] ([2, 3] each), each op named after its input, one output per input
    (relu(x) * 2 + x), the output named names[i] + "_out"."""

    def body(b, *xs):  # type: ignore[no-untyped-def]
        outs = []
        for name, x in zip(names, xs):
            r = b.relu(x=x, name=name)
            y = b.add(x=b.mul(x=r, y=np.float32(2), name=name + "*"), y=x, name=name + "+")
            y.name = name + "_out"
            outs.append(y)
        return outs

    return new_program([(n, TensorType(fp32, (2, 3))) for n in names], body)
