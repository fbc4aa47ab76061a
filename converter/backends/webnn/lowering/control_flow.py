"""Control flow and lists: WebNN graphs have none. `converter.passes.unroll` (run by
`prepare_program`) flattens what is known at conversion time: loops with a known number of
iterations unrolled, conds as both branches and ``where``, lists with known indices as the values
they hold. An op still here is one that pass could not flatten: lowering reports the reason it
gave (`lower_function`'s ``refused``), or the general one below."""

from __future__ import annotations

from ....ir.core import Op
from ..emitter import GraphEmitter, LoweringError
from .registry import lowering

_WHY = {
    "while_loop": "its number of iterations is not known at conversion time (WebNN graphs have no loops)",
    "cond": "its predicate is not known at conversion time and its branches cannot both run "
            "(WebNN graphs have no branches)",
}
_LIST_WHY = "its indices are not known at conversion time (WebNN has no lists)"


def _refuse(e: GraphEmitter, op: Op) -> None:
    raise LoweringError(_WHY.get(op.type, _LIST_WHY))


lowering("while_loop", kind="decomposed", note="unrolled before lowering when its number of iterations is known at "
                                               "conversion time; otherwise refused")(_refuse)
lowering("cond", kind="decomposed", note="a known predicate: the taken branch; else both branches (when free of "
                                         "effects) and where(); otherwise refused")(_refuse)
lowering("make_list", "list_read", "list_write", "list_gather", "list_scatter", "list_length", kind="decomposed",
         note="with indices known at conversion time (after unrolling): the tensors the list holds (slices, "
              "stack); otherwise refused")(_refuse)
