"""The SSA IR: Program -> Function -> Block -> Op -> Value.

A Value has exactly one producer (an Op output, or a block/function input) and a use-list that is
kept exact by every mutation made through this module, so passes can rewrite in O(uses) instead
of rescanning the graph. Object identity is a value's identity; ``name`` is only a label.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from .types import Type

if TYPE_CHECKING:
    from .opdef import OpDef


class Use(NamedTuple):
    """One use of a value: by an op input (``key``, position in a tuple input) or a block output."""

    user: Op | Block
    key: str  # input name, or "" for a block output
    index: int  # position within a tuple input / block outputs; 0 for single inputs


class Value:
    """An SSA value."""

    __slots__ = ("name", "type", "producer", "index", "owner", "uses", "__weakref__")

    def __init__(
        self,
        name: str,
        type: Type,
        producer: Op | None = None,
        index: int = 0,
        owner: Block | None = None,
    ) -> None:
        self.name = name
        self.type = type
        self.producer = producer  # the op producing it, None for block inputs
        self.index = index  # output index in producer, or input index in owner block
        self.owner = owner  # the block for block inputs
        self.uses: list[Use] = []

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"

    @property
    def is_block_input(self) -> bool:
        return self.producer is None

    @property
    def const_val(self) -> Any:
        """The compile-time value if produced by a ``const`` op, else None."""
        p = self.producer
        if p is not None and p.type == "const":
            return p.attributes.get("val")
        return None

    @property
    def is_const(self) -> bool:
        p = self.producer
        return p is not None and p.type == "const"

    def defining_block(self) -> Block:
        if self.producer is None:
            assert self.owner is not None
            return self.owner
        assert self.producer.block is not None, f"value {self.name} has a detached producer"
        return self.producer.block

    def users(self) -> list[Op]:
        return [u.user for u in self.uses if isinstance(u.user, Op)]

    def replace_all_uses_with(self, new: Value) -> None:
        """Rewire every use of this value to ``new`` (op inputs and block outputs)."""
        if new is self:
            return
        for use in list(self.uses):
            if isinstance(use.user, Op):
                use.user._replace_input_at(use.key, use.index, new)
            else:
                use.user._replace_output_at(use.index, new)
        assert not self.uses


InputArg = Value | tuple  # a Value, or a tuple of Values for variadic (tuple) inputs


class Op:
    """One operation: a type name resolved to an OpDef, named inputs, outputs, nested blocks."""

    __slots__ = ("type", "opdef", "name", "inputs", "outputs", "blocks", "attributes", "block")

    def __init__(
        self,
        op_type: str,
        opdef: OpDef | None,
        inputs: dict[str, InputArg] | None = None,
        output_types: Sequence[Type] = (),
        output_names: Sequence[str] | None = None,
        name: str | None = None,
        blocks: Sequence[Block] = (),
        attributes: dict[str, Any] | None = None,
    ) -> None:
        self.type = op_type
        self.opdef = opdef
        self.name = name or op_type
        self.inputs: dict[str, InputArg] = {}
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.block: Block | None = None
        self.blocks: list[Block] = []
        for b in blocks:
            self.add_block(b)
        self.outputs: list[Value] = []
        self.create_outputs(output_types, output_names)
        for key, arg in (inputs or {}).items():
            self.set_input(key, arg)

    def create_outputs(self, types: Sequence[Type], names: Sequence[str] | None = None) -> list[Value]:
        """Create the output values (an op whose outputs are already used cannot be re-typed here)."""
        if any(v.uses for v in self.outputs):
            raise ValueError(f"op '{self.name}': outputs are in use")
        if names is None:
            names = [self.name if len(types) == 1 else f"{self.name}_{i}" for i in range(len(types))]
        if len(names) != len(types):
            raise ValueError("output names and output types differ in length")
        self.outputs = [Value(n, t, producer=self, index=i) for i, (n, t) in enumerate(zip(names, types))]
        return self.outputs

    def __repr__(self) -> str:
        return f"<Op {self.type} '{self.name}'>"

    # -- inputs ----------------------------------------------------------------------------------

    def set_input(self, key: str, arg: InputArg | list | None) -> None:
        """Bind (or with None, unbind) an input, keeping use-lists exact."""
        self.remove_input(key)
        if arg is None:
            return
        if isinstance(arg, list):
            arg = tuple(arg)
        if isinstance(arg, tuple):
            for i, v in enumerate(arg):
                if not isinstance(v, Value):
                    raise TypeError(f"op {self.name}: input {key}[{i}] is not a Value: {v!r}")
                v.uses.append(Use(self, key, i))
        else:
            if not isinstance(arg, Value):
                raise TypeError(f"op {self.name}: input {key} is not a Value: {arg!r}")
            arg.uses.append(Use(self, key, 0))
        self.inputs[key] = arg

    def remove_input(self, key: str) -> None:
        old = self.inputs.pop(key, None)
        if old is None:
            return
        for i, v in enumerate(old if isinstance(old, tuple) else (old,)):
            v.uses.remove(Use(self, key, i))

    def _replace_input_at(self, key: str, index: int, new: Value) -> None:
        old = self.inputs[key]
        if isinstance(old, tuple):
            old[index].uses.remove(Use(self, key, index))
            self.inputs[key] = old[:index] + (new,) + old[index + 1 :]
        else:
            old.uses.remove(Use(self, key, 0))
            self.inputs[key] = new
        new.uses.append(Use(self, key, index))

    def input_values(self) -> Iterator[Value]:
        """Every input value in binding order (tuple inputs flattened)."""
        for arg in self.inputs.values():
            if isinstance(arg, tuple):
                yield from arg
            else:
                yield arg

    def drop_all_inputs(self) -> None:
        for key in list(self.inputs):
            self.remove_input(key)

    # -- blocks ----------------------------------------------------------------------------------

    def add_block(self, block: Block) -> Block:
        block.parent_op = self
        self.blocks.append(block)
        return block

    # -- misc ------------------------------------------------------------------------------------

    @property
    def output(self) -> Value:
        if len(self.outputs) != 1:
            raise ValueError(f"op {self.name} has {len(self.outputs)} outputs")
        return self.outputs[0]

    @property
    def function(self) -> Function | None:
        return self.block.owning_function() if self.block is not None else None

    def location(self) -> dict[str, str | None]:
        """Location fields for error messages."""
        fn = self.function
        return {"function": fn.name if fn else None, "op": self.name, "op_type": self.type}

    def walk(self) -> Iterator[Op]:
        """This op and every op nested in its blocks, in program order."""
        yield self
        for b in self.blocks:
            yield from b.walk()


class Block:
    """A list of ops in topological order, with block inputs (arguments) and outputs."""

    __slots__ = ("inputs", "ops", "outputs", "parent_op", "function", "attributes", "name")

    def __init__(self, inputs: Sequence[Value] = (), name: str = "") -> None:
        self.inputs: list[Value] = []
        self.ops: list[Op] = []
        self.outputs: list[Value] = []
        self.parent_op: Op | None = None
        self.function: Function | None = None
        self.attributes: dict[str, Any] = {}
        self.name = name
        for v in inputs:
            self.add_input(v)

    def __repr__(self) -> str:
        return f"<Block {self.name or ''} {len(self.ops)} ops>"

    def add_input(self, value: Value) -> Value:
        value.owner = self
        value.producer = None
        value.index = len(self.inputs)
        self.inputs.append(value)
        return value

    def new_input(self, name: str, type: Type) -> Value:
        return self.add_input(Value(name, type))

    # -- ops -------------------------------------------------------------------------------------

    def append(self, op: Op) -> Op:
        op.block = self
        self.ops.append(op)
        return op

    def insert(self, index: int, op: Op) -> Op:
        op.block = self
        self.ops.insert(index, op)
        return op

    def insert_before(self, anchor: Op, op: Op) -> Op:
        return self.insert(self.ops.index(anchor), op)

    def remove_op(self, op: Op, *, force: bool = False) -> None:
        """Detach an op (its outputs must be unused unless ``force``) and drop its input uses."""
        if not force:
            for v in op.outputs:
                if v.uses:
                    raise ValueError(f"cannot remove op '{op.name}': output '{v.name}' is still used")
        self.ops.remove(op)
        op.drop_all_inputs()
        for b in op.blocks:
            b.drop_all()
        op.block = None

    def drop_all(self) -> None:
        """Release every use held by this block and its ops (when discarding the block)."""
        for i, v in enumerate(self.outputs):
            v.uses.remove(Use(self, "", i))
        self.outputs = []
        for op in self.ops:
            op.drop_all_inputs()
            for b in op.blocks:
                b.drop_all()

    # -- outputs ---------------------------------------------------------------------------------

    def set_outputs(self, values: Sequence[Value]) -> None:
        for i, v in enumerate(self.outputs):
            v.uses.remove(Use(self, "", i))
        self.outputs = list(values)
        for i, v in enumerate(self.outputs):
            v.uses.append(Use(self, "", i))

    def _replace_output_at(self, index: int, new: Value) -> None:
        self.outputs[index].uses.remove(Use(self, "", index))
        self.outputs[index] = new
        new.uses.append(Use(self, "", index))

    # -- traversal -------------------------------------------------------------------------------

    def walk(self) -> Iterator[Op]:
        for op in self.ops:
            yield from op.walk()

    @property
    def parent_block(self) -> Block | None:
        return self.parent_op.block if self.parent_op is not None else None

    def owning_function(self) -> Function | None:
        b: Block | None = self
        while b is not None:
            if b.function is not None:
                return b.function
            b = b.parent_block
        return None


@dataclass
class FeatureInfo:
    """How a function input/output appears in a Core ML model description (kept for round trips).

    ``feature_type`` is the FeatureType protobuf message (bytes-serialised), ``short_description``
    the doc string. Frontends fill this; backends write it back when they emit the same kind.
    """

    name: str
    feature_type: bytes | None = None
    short_description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Function:
    """A named entry point: one main block whose inputs are the function inputs."""

    def __init__(self, name: str, opset: str = "iOS15", inputs: Sequence[Value] = ()) -> None:
        self.name = name
        self.opset = opset
        self.block = Block(inputs, name=name)
        self.block.function = self
        self.attributes: dict[str, Any] = {}
        # Model-description info per input/output/state name (see FeatureInfo); optional.
        self.input_info: dict[str, FeatureInfo] = {}
        self.output_info: dict[str, FeatureInfo] = {}
        self.state_info: dict[str, FeatureInfo] = {}
        self.meta: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"<Function {self.name} ({self.opset})>"

    @property
    def inputs(self) -> list[Value]:
        return self.block.inputs

    @property
    def outputs(self) -> list[Value]:
        return self.block.outputs

    def input(self, name: str) -> Value:
        for v in self.inputs:
            if v.name == name:
                return v
        raise KeyError(name)

    def walk(self) -> Iterator[Op]:
        return self.block.walk()

    def values(self) -> Iterator[Value]:
        """Every value of the function in definition order (a nested block's values before its op's
        outputs)."""
        return _block_values(self.block)


def _block_values(block: Block) -> Iterator[Value]:
    yield from block.inputs
    for op in block.ops:
        for b in op.blocks:
            yield from _block_values(b)
        yield from op.outputs


class Program:
    """A set of functions plus model-level information."""

    def __init__(self) -> None:
        self.functions: dict[str, Function] = {}
        self.default_function: str = "main"
        self.attributes: dict[str, Any] = {}
        self.doc_string: str = ""
        # Model-level information (spec version, metadata, classifier labels ...), keyed by
        # frontend; see converter.formats.model_info.
        self.meta: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"<Program {list(self.functions)}>"

    def add_function(self, fn: Function) -> Function:
        if fn.name in self.functions:
            raise ValueError(f"duplicate function name {fn.name!r}")
        self.functions[fn.name] = fn
        if len(self.functions) == 1:
            self.default_function = fn.name
        return fn

    @property
    def main(self) -> Function:
        return self.functions[self.default_function]

    def walk(self) -> Iterator[Op]:
        for fn in self.functions.values():
            yield from fn.walk()
