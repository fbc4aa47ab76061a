"""The table WebNN builder method -> IR mapping, filled by the ``ops_*`` modules.

A mapping takes the conversion context and the operator and returns one IR value per WebNN output;
``out`` says which WebNN data type each output has (so the driver can convert the IR result to it:
e.g. a comparison's IR bool becomes WebNN's uint8).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...ir.core import Value
from .context import Ctx
from .graph import Operator

MapFn = Callable[[Ctx, Operator], list[Value]]
OutFn = Callable[[Ctx, Operator], list[str]]


@dataclass(frozen=True)
class Mapping:
    fn: MapFn
    out: OutFn


MAPPINGS: dict[str, Mapping] = {}


def first_operand_dtype(ctx: Ctx, op: Operator) -> list[str]:
    """Default: every output has the data type of the op's first operand."""
    first = next(iter(op.args.values()))
    oid = first[0] if isinstance(first, list) else first
    return [ctx.wdtype(oid)] * len(op.outputs)


def maps(*methods: str, out: str | OutFn | None = None) -> Callable[[MapFn], MapFn]:
    def out_fn(ctx: Ctx, op: Operator) -> list[str]:
        if out is None:
            return first_operand_dtype(ctx, op)
        if isinstance(out, str):
            return [out] * len(op.outputs)
        return out(ctx, op)

    def register(fn: MapFn) -> MapFn:
        for m in methods:
            assert m not in MAPPINGS, m
            MAPPINGS[m] = Mapping(fn, out_fn)
        return fn

    return register
