"""The text report of ``converter inspect``: a `ModelSummary` (converter/inspect.py) as lines a
person reads. Strings from the model are returned as they are; the CLI escapes them when printing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .inspect import FunctionSummary, ModelSummary
    from .inspect_onnx import OnnxFacts

#: Histogram entries printed per line group before "..." (the JSON form has them all).
HISTOGRAM_SHOWN = 40


def summary_text(s: ModelSummary) -> str:
    lines: list[str] = []
    if s.file:
        lines.append(f"file:        {s.file}")
    version = f", specification version {s.specification_version}" if s.specification_version is not None else ""
    lines.append(f"format:      {s.format}{version}")
    if s.onnx is not None:
        o = s.onnx
        opsets = ", ".join(f"{d} {v}" for d, v in o.opset_imports.items()) or "none"
        lines[-1] = f"format:      ONNX, IR version {o.ir_version}, opsets {opsets}"
        producer = " ".join(x for x in (o.producer_name, o.producer_version) if x)
        if producer:
            lines.append(f"producer:    {producer}")
    if s.pipeline_stages:
        lines.append(f"stages:      {' -> '.join(s.pipeline_stages)}")
    if s.refusal:
        lines.append(f"refused:     {s.refusal}")
    lines.extend(_metadata_lines(s.metadata))
    for f in s.functions:
        lines.extend(_function_lines(f, several=len(s.functions) > 1))
    if s.classifier is not None:
        c = s.classifier
        more = ", ..." if c.count > len(c.first) else ""
        lines.append(f"classifier:  {c.count} {c.label_type} labels: {', '.join(map(str, c.first))}{more}")
    if s.layer_histogram is not None:
        lines.append(f"layers:      {sum(s.layer_histogram.values())} NeuralNetwork layers: "
                     f"{_histogram(s.layer_histogram)}")
    if s.program is not None:
        lines.append(f"ops:         {sum(s.op_histogram.values())} (const excluded, nested blocks included): "
                     f"{_histogram(s.op_histogram)}")
    if s.parameters is not None:
        lines.extend(_parameter_lines(s))
    if s.onnx is not None:
        lines.extend(_onnx_lines(s.onnx))
    lines.extend(f"note:        {n}" for n in s.notes)
    return "\n".join(lines)


def _metadata_lines(m: dict) -> list[str]:
    out = []
    for key, label in (("short_description", "description"), ("author", "author"), ("license", "license"),
                       ("version", "version")):
        if m.get(key):
            out.append(f"{label + ':':<12} {m[key]}")
    for k, v in (m.get("user_defined") or {}).items():
        out.append(f"metadata:    {k} = {v}")
    return out


def _function_lines(f: FunctionSummary, *, several: bool) -> list[str]:
    head = f"function {f.name}" + (" (default)" if f.default and several else "")
    if f.opset:
        head += f": opset {f.opset}" + (f" ({f.file_opset} in the file)" if f.file_opset else " (as read into the IR)")
    if f.ops is not None:
        head += f", {f.ops} op{'' if f.ops == 1 else 's'}"
    out = [head]
    for kind, feats in (("input", f.inputs), ("output", f.outputs), ("state", f.states)):
        for feat in feats:
            desc = f"  ({feat.description})" if feat.description else ""
            out.append(f"  {kind:<6} {feat.name}: {feat.text()}{desc}")
    return out


def _histogram(h: dict[str, int]) -> str:
    items = list(h.items())
    text = ", ".join(f"{k} {v}" for k, v in items[:HISTOGRAM_SHOWN])
    return text + (f", ... ({len(items) - HISTOGRAM_SHOWN} more kinds)" if len(items) > HISTOGRAM_SHOWN else "")


def _parameter_lines(s: ModelSummary) -> list[str]:
    p = s.parameters
    assert p is not None
    compressed = (f"; {p.compressed_tensors} tensors compressed, decompressed when the model loads"
                  if p.compressed_tensors else "")
    out = [f"parameters:  {p.parameters:,} in constants: {_bytes(p.stored_bytes)} stored, "
           f"{_bytes(p.decompressed_bytes)} decompressed{compressed}"]
    dtypes = sorted(set(p.stored) | set(p.decompressed))
    if dtypes:
        out.append(f"  {'':<8} {'--------- as stored ---------':>29}  {'--------------- decompressed ---------------':>44}")
        out.append(f"  {'dtype':<8} {'tensors':>14} {'bytes':>14}  {'tensors':>14} {'elements':>14} {'bytes':>14}")
        for d in dtypes:
            st, de = p.stored.get(d), p.decompressed.get(d)
            out.append(f"  {d:<8} {st.tensors if st else 0:>14,} {st.bytes if st else 0:>14,}  "
                       f"{de.tensors if de else 0:>14,} {de.elements if de else 0:>14,} {de.bytes if de else 0:>14,}")
    return out


def _bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
    return f"{n} B"  # pragma: no cover


def _onnx_lines(o: OnnxFacts) -> list[str]:
    """An ONNX model's op types as the file names them, and its initializers by element type."""
    out = [f"onnx ops:    {sum(o.op_histogram.values())} nodes (nested graphs included): {_histogram(o.op_histogram)}"]
    count = sum(d["tensors"] for d in o.initializers.values())
    total = sum(d["bytes"] for d in o.initializers.values())
    external = (f", {_bytes(o.external_bytes)} in external data ({', '.join(o.external_files)})"
                if o.external_bytes else "")
    out.append(f"initializers: {count:,} tensors, {_bytes(total)}{external}")
    for d, v in o.initializers.items():
        out.append(f"  {d:<10} {v['tensors']:>10,} tensors {v['elements']:>14,} elements {v['bytes']:>14,} bytes")
    return out
