"""Control flow and lists: WebNN graphs have none. `converter.passes.unroll` (run by
`prepare_program`) flattens what is known at conversion time (loops with a known trip count,
conds into both branches and ``where``, lists with known indices); what is left is refused here,
with the reason that pass gave where it gave one."""

from __future__ import annotations

from .registry import unsupported

unsupported("a while_loop is converted only when its number of iterations is known at conversion time "
            "(then it is unrolled): WebNN graphs have no loops", "while_loop")
unsupported("a cond is converted only when its predicate is known at conversion time or both branches are "
            "free of effects (then both run and where() selects): WebNN graphs have no branches", "cond")
unsupported("lists have no WebNN form: a list op is converted only when its indices are known at conversion "
            "time (after loop unrolling)", "make_list", "list_read", "list_write", "list_gather", "list_scatter",
            "list_length")
