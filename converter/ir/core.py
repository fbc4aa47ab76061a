"""The SSA IR: Program -> Function -> Block -> Op -> Value.

A Value has exactly one producer (an Op output, or a block/function input) and a use-list that is
kept exact by every mutation made through this module, so passes can rewrite in O(uses) instead
of rescanning the graph. Object identity is a value's identity; ``name`` is only a label.

Complexity guarantees passes can rely on (n = ops in the block, u = uses of the value):

- ``Block.append``, ``insert_before``, ``insert_after``, ``remove_op``: O(1) (plus O(inputs) to
  drop an op's uses and O(size) of the nested blocks of a removed op). A block's ops form an
  intrusive doubly linked list; ``block.ops`` is an ordered view over it: iteration, ``len()``,
  ``in``, ``first``/``last`` are O(1) per step; ``op.next_op``/``op.prev_op`` are O(1). Indexing
  ``block.ops[i]``, ``index()`` and ``Block.insert(i, op)`` are O(i) (kept for old callers; passes
  should anchor on ops). Assigning ``block.ops = [...]`` relinks the whole block: O(n).
- Iterating ``block.ops`` while editing: the successor is read when the iterator advances, so ops
  inserted after the current op are visited, ops inserted before it are not; the current op may
  be removed (iteration goes on with its successor at the time of removal); other ops may be
  removed. Moving ops backwards over the current position while iterating is not supported.
- ``Value.uses``: an insertion-ordered set of `Use` (deterministic iteration); adding and removing
  a use is O(1), so ``Op.set_input``, ``_replace_input_at`` and ``remove_op`` never scan use-lists;
  ``replace_all_uses_with`` is O(u).
- Names: each Function keeps one `NameScope` (``Function.names``), built once on first use (O(n))
  and then kept current by the mutations of this module (ops inserted or removed, outputs
  created, block inputs added, values renamed), so creating a ``Builder`` and naming an op are
  O(1). Removing an op frees its values' names for reuse once no live value carries them.
  Values renamed or attached behind this module's back are not seen: names are labels, made
  unique when a program is written, so that costs at worst a suffixed name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from .names import NameScope
from .types import Type

if TYPE_CHECKING:
    from .opdef import OpDef


# Op attributes the IR keeps for itself and writers never emit: ``rng_key``, a random op's stream
# key (see `converter.ir.rng`); ``indices_in_range``, on a gather whose source model requires its
# indices to be in [0, size) (`INDICES_IN_RANGE`).
IR_ONLY_ATTRIBUTES = frozenset({"rng_key", "indices_in_range"})
#: set (True) by a frontend on a gather read from a source op whose indices must be in [0, size)
#: (the NeuralNetwork embedding layers: "Input values must be in the range [0, vocabSize - 1]"):
#: a negative index, which the op itself reads as counting from the end before iOS17, is outside
#: what the source model defines, so a backend may write a layer that needs indices >= 0
INDICES_IN_RANGE = "indices_in_range"


class Use(NamedTuple):
    """One use of a value: by an op input (``key``, position in a tuple input) or a block output."""

    user: Op | Block
    key: str  # input name, or "" for a block output
    index: int  # position within a tuple input / block outputs; 0 for single inputs


class UseList(dict):
    """The uses of a value: an insertion-ordered set (a dict of Use -> None: O(1) add, remove and
    ``in``; iteration in the order the uses were made). Compares equal to a list or tuple of the
    same uses in order."""

    __slots__ = ()

    def append(self, use: Use) -> None:
        self[use] = None

    def remove(self, use: Use) -> None:
        try:
            del self[use]
        except KeyError:
            raise ValueError(f"{use} is not a use of this value") from None

    def discard(self, use: Use) -> None:
        self.pop(use, None)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (UseList, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"UseList({list(self)!r})"


class Value:
    """An SSA value."""

    __slots__ = ("_name", "type", "producer", "index", "owner", "uses", "__weakref__")

    def __init__(
        self,
        name: str,
        type: Type,
        producer: Op | None = None,
        index: int = 0,
        owner: Block | None = None,
    ) -> None:
        self._name = name
        self.type = type
        self.producer = producer  # the op producing it, None for block inputs
        self.index = index  # output index in producer, or input index in owner block
        self.owner = owner  # the block for block inputs
        self.uses = UseList()

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, new: str) -> None:
        """Rename (the function's name scope follows: the old name is freed, the new one taken)."""
        old = self._name
        if new == old:
            return
        scope = _scope_of_value(self)
        self._name = new
        if scope is not None:
            scope.release(old)
            scope.claim(new)

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
    """One operation: a type name resolved to an OpDef, named inputs, outputs, nested blocks.

    ``block`` is the block holding the op (None when detached); ``prev_op``/``next_op`` its
    neighbours there.
    """

    __slots__ = ("type", "opdef", "name", "inputs", "outputs", "blocks", "attributes", "block", "_prev", "_next")

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
        self._prev: Op | None = None
        self._next: Op | None = None
        self.blocks: list[Block] = []
        for b in blocks:
            self.add_block(b)
        self.outputs: list[Value] = []
        if output_types or output_names:
            self.create_outputs(output_types, output_names)
        for key, arg in (inputs or {}).items():
            self.set_input(key, arg)

    def create_outputs(self, types: Sequence[Type], names: Sequence[str] | None = None) -> list[Value]:
        """Create the output values (an op whose outputs are already used cannot be re-typed here)."""
        if self.outputs and any(v.uses for v in self.outputs):
            raise ValueError(f"op '{self.name}': outputs are in use")
        if names is None:
            names = [self.name if len(types) == 1 else f"{self.name}_{i}" for i in range(len(types))]
        if len(names) != len(types):
            raise ValueError("output names and output types differ in length")
        scope = _scope_of_block(self.block) if self.block is not None else None
        if scope is not None:
            for v in self.outputs:
                scope.release(v.name)
        self.outputs = [Value(n, t, self, i) for i, (n, t) in enumerate(zip(names, types))]
        if scope is not None:
            for v in self.outputs:
                scope.claim(v.name)
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
            for i, v in enumerate(arg):
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

    # -- position --------------------------------------------------------------------------------

    @property
    def next_op(self) -> Op | None:
        """The op after this one in its block (None at the end or when detached)."""
        return self._next if self.block is not None else None

    @property
    def prev_op(self) -> Op | None:
        """The op before this one in its block (None at the start or when detached)."""
        return self._prev if self.block is not None else None

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


class OpList:
    """The ops of a block in order: a live view over the block's linked list (see the module
    docstring for what editing during iteration does)."""

    __slots__ = ("_block",)

    def __init__(self, block: Block) -> None:
        self._block = block

    def __iter__(self) -> Iterator[Op]:
        block = self._block
        op = block._first
        while op is not None:
            yield op
            nxt = op._next
            while nxt is not None and nxt.block is not block:  # removed since: its links are stale
                nxt = nxt._next
            op = nxt

    def __reversed__(self) -> Iterator[Op]:
        block = self._block
        op = block._last
        while op is not None:
            yield op
            prv = op._prev
            while prv is not None and prv.block is not block:
                prv = prv._prev
            op = prv

    def __len__(self) -> int:
        return self._block._count

    def __bool__(self) -> bool:
        return self._block._count > 0

    def __contains__(self, op: object) -> bool:
        return isinstance(op, Op) and op.block is self._block

    @property
    def first(self) -> Op | None:
        return self._block._first

    @property
    def last(self) -> Op | None:
        return self._block._last

    def __getitem__(self, i: int | slice) -> Any:
        """O(i) (O(1) for the first and last op); a slice gives a list."""
        if isinstance(i, slice):
            return list(self)[i]
        n = self._block._count
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError(f"op index {i} out of range for a block of {n} ops")
        if j <= n // 2:
            it = iter(self)
            for _ in range(j):
                next(it)
            return next(it)
        it = reversed(self)
        for _ in range(n - 1 - j):
            next(it)
        return next(it)

    def index(self, op: Op) -> int:
        """O(n): the position of ``op``."""
        for i, x in enumerate(self):
            if x is op:
                return i
        raise ValueError(f"{op!r} is not in the block")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (OpList, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"OpList({list(self)!r})"


class Block:
    """Ops in topological order (a doubly linked list, O(1) insertion and removal), with block
    inputs (arguments) and outputs."""

    __slots__ = ("inputs", "_first", "_last", "_count", "outputs", "parent_op", "function", "attributes", "name")

    def __init__(self, inputs: Sequence[Value] = (), name: str = "") -> None:
        self.inputs: list[Value] = []
        self._first: Op | None = None
        self._last: Op | None = None
        self._count = 0
        self.outputs: list[Value] = []
        self.parent_op: Op | None = None
        self.function: Function | None = None
        self.attributes: dict[str, Any] = {}
        self.name = name
        for v in inputs:
            self.add_input(v)

    def __repr__(self) -> str:
        return f"<Block {self.name or ''} {self._count} ops>"

    def add_input(self, value: Value) -> Value:
        value.owner = self
        value.producer = None
        value.index = len(self.inputs)
        self.inputs.append(value)
        scope = _scope_of_block(self)
        if scope is not None:
            scope.claim(value.name)
        return value

    def new_input(self, name: str, type: Type) -> Value:
        return self.add_input(Value(name, type))

    # -- ops -------------------------------------------------------------------------------------

    @property
    def ops(self) -> OpList:
        """The ops in order (a live view; ``list(block.ops)`` for a snapshot)."""
        return OpList(self)

    @ops.setter
    def ops(self, ops: Iterable[Op]) -> None:
        """Replace the whole op list (O(n)): ops left out are detached, ops listed are linked in
        this order (an op of another block is refused)."""
        new = list(ops)
        keep = set(map(id, new))
        if len(keep) != len(new):
            raise ValueError("an op is listed twice")
        old = set(map(id, OpList(self)))
        for op in new:
            if op.block is not None and op.block is not self:
                raise ValueError(f"{op!r} belongs to another block")
        for op in list(OpList(self)):
            if id(op) not in keep:
                op.block = None
        prev: Op | None = None
        for op in new:
            op.block = self
            op._prev = prev
            if prev is not None:
                prev._next = op
            prev = op
        if prev is not None:
            prev._next = None
        self._first = new[0] if new else None
        self._last = prev
        self._count = len(new)
        if keep != old:
            fn = self.owning_function()
            if fn is not None:
                fn.invalidate_names()

    @property
    def first_op(self) -> Op | None:
        return self._first

    @property
    def last_op(self) -> Op | None:
        return self._last

    def _link(self, op: Op, prev: Op | None, nxt: Op | None) -> Op:
        if op.block is not None:
            raise ValueError(f"{op!r} is already in a block: remove it first")
        op.block = self
        op._prev = prev
        op._next = nxt
        if prev is None:
            self._first = op
        else:
            prev._next = op
        if nxt is None:
            self._last = op
        else:
            nxt._prev = op
        self._count += 1
        scope = _scope_of_block(self)
        if scope is not None:
            _claim_names(scope, op)
        return op

    def append(self, op: Op) -> Op:
        """Add ``op`` at the end: O(1)."""
        return self._link(op, self._last, None)

    def insert_before(self, anchor: Op, op: Op) -> Op:
        """Add ``op`` right before ``anchor`` (an op of this block): O(1)."""
        if anchor.block is not self:
            raise ValueError(f"anchor {anchor!r} is not in this block")
        return self._link(op, anchor._prev, anchor)

    def insert_after(self, anchor: Op, op: Op) -> Op:
        """Add ``op`` right after ``anchor`` (an op of this block): O(1)."""
        if anchor.block is not self:
            raise ValueError(f"anchor {anchor!r} is not in this block")
        return self._link(op, anchor, anchor._next)

    def prepend(self, op: Op) -> Op:
        """Add ``op`` at the start: O(1)."""
        return self._link(op, None, self._first)

    def insert(self, index: int, op: Op) -> Op:
        """Add ``op`` at position ``index`` (O(index); prefer ``insert_before``)."""
        if index >= self._count:
            return self.append(op)
        if index <= -self._count:
            return self.prepend(op)
        return self.insert_before(self.ops[index], op)

    def _unlink(self, op: Op) -> None:
        """Take ``op`` out of the list; its own links are left as they were, so an iterator
        standing on it goes on with its successor."""
        prev, nxt = op._prev, op._next
        if prev is None:
            self._first = nxt
        else:
            prev._next = nxt
        if nxt is None:
            self._last = prev
        else:
            nxt._prev = prev
        self._count -= 1
        op.block = None

    def remove_op(self, op: Op, *, force: bool = False) -> None:
        """Detach an op (its outputs must be unused unless ``force``) and drop its input uses: O(1)
        plus its inputs and nested blocks."""
        if op.block is not self:
            raise ValueError(f"{op!r} is not in this block")
        if not force:
            for v in op.outputs:
                if v.uses:
                    raise ValueError(f"cannot remove op '{op.name}': output '{v.name}' is still used")
        scope = _scope_of_block(self)
        if scope is not None:
            _release_names(scope, op)
        self._unlink(op)
        op.drop_all_inputs()
        for b in op.blocks:
            b.drop_all()

    def drop_all(self) -> None:
        """Release every use held by this block and its ops (when discarding the block)."""
        for i, v in enumerate(self.outputs):
            v.uses.remove(Use(self, "", i))
        self.outputs = []
        for op in OpList(self):
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
        for op in OpList(self):
            if op.blocks:
                yield from op.walk()
            else:
                yield op  # no nested generator for an op without blocks (nearly every op)

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


def _scope_of_block(block: Block | None) -> NameScope | None:
    """The live name scope of the function holding ``block`` (None if none is built yet)."""
    if block is None:
        return None
    fn = block.owning_function()
    return fn._names if fn is not None else None


def _scope_of_value(v: Value) -> NameScope | None:
    return _scope_of_block(v.owner if v.producer is None else v.producer.block)


def _op_values(op: Op) -> Iterator[Value]:
    """The values an op brings into its function: its outputs and everything its blocks define."""
    yield from op.outputs
    for b in op.blocks:
        yield from _block_values(b)


def _claim_names(scope: NameScope, op: Op) -> None:
    for v in _op_values(op):
        scope.claim(v.name)


def _release_names(scope: NameScope, op: Op) -> None:
    for v in _op_values(op):
        scope.release(v.name)


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
        self._names: NameScope | None = None
        self._rng_next: int | None = None  # next random-op stream key (converter.ir.rng)

    def __repr__(self) -> str:
        return f"<Function {self.name} ({self.opset})>"

    @property
    def names(self) -> NameScope:
        """The function's name scope: built on first use (O(values)), then kept current by the
        IR's mutations, so builders share it and never rescan the function."""
        if self._names is None:
            self._names = NameScope(v.name for v in self.values())
        return self._names

    def invalidate_names(self) -> None:
        """Drop the name scope (rebuilt on next use): for edits made outside this module's API."""
        self._names = None

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
