"""A summary of the op registry for ``converter ops`` and the docs."""

from __future__ import annotations

from .opdef import _OPDEF_CLASSES, OPSETS, get_opdef, mil_op_types, opsets_of, registered_op_types, versions_of


def op_table() -> list[dict]:
    """One row per op type: opsets, versions, kernel presence, MIL or IR-only, and how the WebNN,
    NeuralNetwork and ONNX backends write it (``webnn``, ``neuralnetwork``, ``onnx``: status
    direct/decomposed/unsupported, with a note or the reason)."""
    # the backends read the IR, not the reverse
    from ..backends.neuralnetwork.lowering.registry import neuralnetwork_entry
    from ..backends.onnx.lowering.registry import onnx_entry
    from ..backends.webnn.lowering.registry import webnn_entry

    undefined = {"status": "unsupported", "reason": "the converter has no definition of this op"}

    rows = []
    for name in sorted(set(registered_op_types()) | set(mil_op_types())):
        opsets = opsets_of(name) if name in _OPDEF_CLASSES or name in mil_op_types() else []
        cls = _OPDEF_CLASSES.get(name)
        has_kernel = False
        if cls is not None and opsets:
            has_kernel = get_opdef(name, opsets[-1]).has_kernel
        rows.append(
            {
                "op": name,
                "opsets": opsets,
                "versions": versions_of(name),
                "defined": cls is not None,
                "has_kernel": has_kernel,
                "ir_only": bool(cls is not None and cls.ir_only),
                "webnn": webnn_entry(name) if cls is not None else undefined,
                "neuralnetwork": neuralnetwork_entry(name) if cls is not None else undefined,
                "onnx": onnx_entry(name) if cls is not None else undefined,
            }
        )
    return rows


__all__ = ["OPSETS", "op_table"]
