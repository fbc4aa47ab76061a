"""Opset handling: re-resolve every op of a program for another opset, and materialise
compile-time decompression (constexpr_*) ops for opsets that lack them."""

from __future__ import annotations

from ..errors import UnsupportedError
from ..ir.core import Op, Program
from ..ir.interpreter import Interpreter
from ..ir.opdef import get_opdef
from ..ir.verify import is_compile_time_const
from .base import Pass, PassResult


class Retarget(Pass):
    """Point every op at its definition in ``opset`` (checking its inputs still fit)."""

    def __init__(self, opset: str) -> None:
        self.opset = opset

    def run(self, program: Program) -> PassResult:
        memo: dict[int, bool] = {}
        changed = False
        problems = []
        for fn in program.functions.values():
            for op in fn.walk():
                try:
                    opdef = get_opdef(op.type, self.opset)
                    opdef.check_inputs(op, lambda v: is_compile_time_const(v, memo))
                except UnsupportedError as e:
                    problems.append(f"'{op.name}': {e.message}")
                    continue
                changed |= opdef is not op.opdef
                op.opdef = opdef
            changed |= fn.opset != self.opset
            fn.opset = self.opset
        if problems:
            raise UnsupportedError(f"cannot retarget to {self.opset}: " + "; ".join(problems))
        return PassResult(changed)


class MaterializeConstexpr(Pass):
    """Replace constexpr_* ops (weight decompression) by plain constants holding their result.

    Used when the target opset predates an op (constexpr ops exist from iOS16; some from iOS18):
    the weights are then stored decompressed, which is the only faithful option.
    """

    def __init__(self, opset: str) -> None:
        self.opset = opset

    def run(self, program: Program) -> PassResult:
        changed = False
        for fn in program.functions.values():
            interp = Interpreter(program)
            for op in list(fn.walk()):
                if op.opdef is None or "constexpr" not in op.opdef.traits or op.block is None:
                    continue
                try:
                    get_opdef(op.type, self.opset)
                    continue  # the target has it: keep the compression
                except UnsupportedError:
                    pass
                self._materialize(op, interp, fn.opset)
                changed = True
        return PassResult(changed)

    @staticmethod
    def _materialize(op: Op, interp: Interpreter, opset: str) -> None:
        env: dict = {}
        for v in op.input_values():
            p = v.producer
            assert p is not None and p.type == "const", "constexpr inputs are constants"
            env[v] = p.attributes["val"]
        interp.run_op(op, env)
        block = op.block
        assert block is not None
        for out in op.outputs:
            const = Op("const", get_opdef("const", opset), name=out.name, attributes={"val": env[out]})
            const.create_outputs([out.type], [out.name])
            block.insert_before(op, const)
            out.replace_all_uses_with(const.outputs[0])
        block.remove_op(op)
