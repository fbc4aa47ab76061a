"""Bounds on what an input may ask for: sizes, ranks, counts, nesting, loop iterations.

A model file is untrusted: a number in it can say "allocate 2^62 elements", "nest 100,000 deep"
or "loop forever". Every such number is checked against these bounds where it is read, so that a
hostile or broken file is refused with a one-line error instead of a traceback, a hang or an
exhausted machine. The structural bounds are far beyond anything a valid Core ML model uses; the
run-time ones (loop iterations, tensor bytes) have defaults callers can raise.
"""

from __future__ import annotations

from collections.abc import Iterable

#: A Core ML model file is one protobuf message, and protobuf messages hold at most 2 GiB.
MAX_MODEL_FILE_BYTES = 2 << 30
#: A package's Manifest.json lists a handful of items (the model, its weights): a few hundred bytes.
MAX_MANIFEST_BYTES = 1 << 20
MAX_MANIFEST_ITEMS = 10_000
#: Tensor ranks: far above what Core ML models use; numpy stops at 64.
MAX_RANK = 32
#: One dimension: 32-bit, as MIL ops' int32 shape tensors hold it.
MAX_DIMENSION = (1 << 31) - 1
#: Elements of one tensor a model may declare (2^40: 4 TiB of fp32); products of dimensions stay
#: far from int64 overflow below it.
MAX_ELEMENTS = 1 << 40
#: Integer layer parameters (sizes, axes, padding, repetitions): 32-bit, as the int32 constants of
#: the MIL ops they become.
MAX_PARAMETER = (1 << 31) - 1
#: Nested protobuf messages, as protobuf's own parser allows (loops in loops, pipelines in
#: pipelines, blocks in blocks: about 30 levels of them).
MAX_NESTING = 100

#: The interpreter's default bound on loop iterations in one run, all loops together (a while_loop
#: whose condition never turns false would otherwise never end, and nested loops multiply); callers
#: raise it with ``max_loop_iterations``. The shared real models' loops run at most 16 iterations
#: (recurrent layers: one per sequence step); a large loop body takes about 0.5 ms per iteration
#: in the interpreter, so the default also bounds the time a runaway loop takes to about 5 s.
DEFAULT_MAX_LOOP_ITERATIONS = 10_000
#: The most ops flattening control flow may make in one function (`passes.unroll`: loops unrolled for
#: targets without loops, WebNN). The shared models' loops make under 1,000 (torch's bidirectional
#: GRU: 2 loops x 8 steps x ~40 ops); a graph of 10,000 builder calls is already a large model.js.
MAX_UNROLLED_OPS = 10_000
#: The interpreter's default bound on the bytes of one tensor a run makes (``--check`` of a model
#: whose declared sizes would exhaust memory: an image input of 256000 x 256 pixels, a tile of
#: tiles); callers raise it with ``max_tensor_bytes``. The largest activation of the shared real
#: models is under 20 MiB; a 4K RGB image in fp32 is 95 MiB, the largest WebNN conformance vector
#: 137 MiB. A run holds a few tensors at a time (values no later op reads are dropped), and kernels
#: computing in float64 double one: a run peaks at a small multiple of this bound.
DEFAULT_MAX_TENSOR_BYTES = 256 << 20


def shape_problem(shape: Iterable[int]) -> str | None:
    """Why a static shape cannot be a tensor's (negative or oversized dims, too many elements, too
    high a rank), or None."""
    dims = [int(d) for d in shape]
    if len(dims) > MAX_RANK:
        return f"rank {len(dims)} is more than the {MAX_RANK} supported"
    n = 1
    for d in dims:
        if d < 0:
            return f"dimension {d} is negative"
        if d > MAX_DIMENSION:
            return f"dimension {d} is larger than {MAX_DIMENSION}"
        n *= d
    if n > MAX_ELEMENTS:
        return f"{n} elements are more than the {MAX_ELEMENTS} (2^40) supported"
    return None


def size_text(nbytes: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"
