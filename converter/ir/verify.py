"""The verifier: SSA form, scoping and dominance, use-list integrity, and types re-inferred.

Runs after each pass in tests and under ``--verify``; not on the default path (it re-infers every
op, which is linear but not free).
"""

from __future__ import annotations

from ..errors import VerifyError
from .core import Block, Op, Program, Use, Value
from .opdef import get_opdef
from .types import TensorType, types_compatible


def is_compile_time_const(v: Value, _memo: dict[Value, bool] | None = None) -> bool:
    """Whether a value is known before run time: a const, a constexpr_* result, or a pure op of such.

    Iterative (no recursion limit on long chains) and memoised per call.
    """
    memo = _memo if _memo is not None else {}  # keyed by the Value itself (identity hash)
    stack = [v]
    while stack:
        cur = stack[-1]
        key = cur
        if key in memo:
            stack.pop()
            continue
        op = cur.producer
        if op is None:
            memo[key] = False
            stack.pop()
            continue
        if op.type == "const" or (op.opdef is not None and "constexpr" in op.opdef.traits):
            memo[key] = True
            stack.pop()
            continue
        traits = op.opdef.traits if op.opdef is not None else frozenset()
        if "pure" not in traits or op.blocks or "random" in traits:
            memo[key] = False
            stack.pop()
            continue
        pending = [x for x in op.input_values() if x not in memo]
        if pending:
            stack.extend(pending)
            continue
        memo[key] = all(memo[x] for x in op.input_values())
        stack.pop()
    return memo[v]


class _Verifier:
    def __init__(self, program: Program, *, check_types: bool) -> None:
        self.program = program
        self.check_types = check_types
        self.const_memo: dict[Value, bool] = {}

    def fail(self, message: str, op: Op | None = None, function: str | None = None) -> None:
        loc = op.location() if op is not None else {"function": function}
        raise VerifyError(message, **loc)

    def run(self) -> None:
        if self.program.default_function not in self.program.functions:
            self.fail(f"default function '{self.program.default_function}' does not exist")
        for name, fn in self.program.functions.items():
            if fn.name != name:
                self.fail(f"function registered as '{name}' is named '{fn.name}'", function=name)
            if fn.block.function is not fn:
                self.fail("function block is not linked to its function", function=name)
            self.verify_block(fn.block, set(), fn_name=name)

    def verify_block(self, block: Block, scope: set[Value], fn_name: str) -> None:
        """Check ``block`` with ``scope`` holding the values visible from outside; the values the
        block defines are added while it is checked and removed after (no copy per block)."""
        defined: list[Value] = []
        try:
            self._verify_block(block, scope, defined, fn_name)
        finally:
            scope.difference_update(defined)

    def _verify_block(self, block: Block, scope: set[Value], defined: list[Value], fn_name: str) -> None:
        for i, v in enumerate(block.inputs):
            if v.owner is not block or v.producer is not None or v.index != i:
                self.fail(f"block input '{v.name}' is not linked to its block", function=fn_name)
            if v in scope:
                self.fail(f"value '{v.name}' defined twice", function=fn_name)
            self.verify_users(v, fn_name)
            scope.add(v)
            defined.append(v)
        for op in block.ops:
            if op.block is not block:
                self.fail("op is not linked to its block", op)
            for key, arg in op.inputs.items():
                vals = arg if isinstance(arg, tuple) else (arg,)
                for idx, v in enumerate(vals):
                    if v not in scope:
                        where = "defined later or in another scope" if v.producer or v.owner else "undefined"
                        self.fail(f"input '{key}' uses value '{v.name}', which is {where}", op)
                    if Use(op, key, idx) not in v.uses:
                        self.fail(f"use-list of '{v.name}' misses its use by input '{key}'", op)
            for b in op.blocks:
                if b.parent_op is not op:
                    self.fail("nested block is not linked to its op", op)
                self.verify_block(b, scope, fn_name)
            if self.check_types:
                self.verify_types(op)
            for i, v in enumerate(op.outputs):
                if v.producer is not op or v.index != i:
                    self.fail(f"output '{v.name}' is not linked to its op", op)
                if v in scope:
                    self.fail(f"value '{v.name}' defined twice", op)
                self.verify_users(v, fn_name)
                for u in v.uses:
                    if isinstance(u.user, Op):
                        arg = u.user.inputs.get(u.key)
                        got = arg[u.index] if isinstance(arg, tuple) and u.index < len(arg) else arg
                        if got is not v:
                            self.fail(f"stale use of '{v.name}' recorded for op '{u.user.name}'", op)
                scope.add(v)
                defined.append(v)
        for i, v in enumerate(block.outputs):
            if v not in scope:
                self.fail(f"block output '{v.name}' is not visible in the block", function=fn_name)
            if Use(block, "", i) not in v.uses:
                self.fail(f"use-list of '{v.name}' misses its use as block output {i}", function=fn_name)

    def verify_users(self, v: Value, fn_name: str) -> None:
        """No use of ``v`` is held by an op that is no longer in the program (a removal that did not
        release its uses: dead code elimination would see ``v`` as used)."""
        for u in v.uses:
            if isinstance(u.user, Op) and u.user.block is None:
                self.fail(f"'{v.name}' is still used by op '{u.user.name}', which was removed", function=fn_name)

    def verify_types(self, op: Op) -> None:
        fn = op.function
        if op.opdef is None:
            self.fail("op has no definition", op)
        expected = get_opdef(op.type, fn.opset) if fn is not None else op.opdef
        if fn is not None and expected is not op.opdef:
            self.fail(f"op is resolved for opset {op.opdef.opset}, its function uses {fn.opset}", op)
        inferred = op.opdef.infer_op(op, lambda v: is_compile_time_const(v, self.const_memo))
        if len(inferred) != len(op.outputs):
            self.fail(f"op has {len(op.outputs)} outputs, type inference gives {len(inferred)}", op)
        for v, t in zip(op.outputs, inferred):
            if not types_compatible(v.type, t):
                self.fail(f"output '{v.name}' is declared {v.type} but inferred {t}", op)
        if op.type == "const":
            val = op.attributes.get("val")
            if val is None:
                self.fail("const op has no value", op)
            t = op.outputs[0].type
            if isinstance(t, TensorType) and t.shape is not None and tuple(getattr(val, "shape", ())) != t.shape:
                self.fail(f"const value shape {getattr(val, 'shape', ())} differs from its type {t}", op)


def verify(program: Program, *, check_types: bool = True) -> None:
    """Raise VerifyError at the first broken invariant."""
    _Verifier(program, check_types=check_types).run()
