"""A readable text form of the IR, with a printer and a parser that round-trip exactly.

    program
    symbols { n: [1, 64] }
    func main<iOS15>(%x: tensor<fp32, [n, 3]>) {
      %c: tensor<fp32, []> = const() [val=dense<fp32, []>(2)]
      %y: tensor<fp32, [n, 3]> = mul(x=%x, y=%c)
      %a: tensor<fp32, [n, 3]>, %b: tensor<fp32, [n, 3]> = split(x=%y, ...) @split_op
      %r: tensor<fp32, [n, 3]> = cond(pred=%p) {
        block() {
          ...
        } -> (%y)
        block() { } -> (%a)
      }
    } -> (%r)

Values are ``%name`` (quoted ``%"..."`` when the name has other characters). An op's name is
printed as ``@name`` only when it differs from its first output's name. ``[k=v, ...]`` holds
attributes; literals are Python-like scalars and lists, ``"strings"``, ``none``, typed arrays
``dense<dtype, [shape]>(v, v, ...)`` (flat, row-major) and list values ``listval<type>(...)``.
Floats print in the shortest form that round-trips in their own dtype.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import ParseError, UnsupportedError
from . import symexpr
from .core import Block, Function, Op, Program, Value
from .opdef import OPSETS, get_opdef
from .rng import assign_rng_keys
from .runtime import ListValue
from .types import (
    DTYPES,
    DictType,
    ListType,
    StateType,
    Symbol,
    TensorType,
    TupleType,
    Type,
)

_BARE = re.compile(r"^[A-Za-z0-9_@.$]+$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# ---------------------------------------------------------------------------------------------
# Printing


def _fmt_name(name: str) -> str:
    return name if _BARE.match(name) else json.dumps(name)


def format_dim(d: Any) -> str:
    """An int, a symbol's name, or an expression (``2*s0 + 1``, ``(s0 + 1) floordiv 2``)."""
    return symexpr.format_dim(d)


def format_type(t: Type) -> str:
    if isinstance(t, TensorType):
        if t.shape is None:
            return f"tensor<{t.dtype.name}, *>"
        return f"tensor<{t.dtype.name}, [{', '.join(format_dim(d) for d in t.shape)}]>"
    if isinstance(t, ListType):
        length = "?" if t.length is None else format_dim(t.length)
        dyn = "" if t.dynamic_length else ", fixed"
        return f"list<{format_type(t.elem)}, {length}{dyn}>"
    if isinstance(t, TupleType):
        return f"tuple<{', '.join(format_type(x) for x in t.types)}>"
    if isinstance(t, DictType):
        return f"dict<{format_type(t.key)}, {format_type(t.value)}>"
    if isinstance(t, StateType):
        return f"state<{format_type(t.wrapped)}>"
    raise TypeError(f"cannot print type {t!r}")


def _fmt_scalar(x: Any, kind: str) -> str:
    if kind == "f":
        if np.isnan(x):
            return "nan"
        if np.isinf(x):
            return "inf" if x > 0 else "-inf"
        return str(x)  # numpy's shortest round-trip repr for the value's own dtype
    if kind == "b":
        return "true" if x else "false"
    if kind in ("U", "S", "O"):
        return json.dumps(str(x))
    return str(int(x))


def format_array(arr: np.ndarray, dtype_name: str | None = None, *, elide_above: int | None = None) -> str:
    arr = np.asarray(arr)
    if dtype_name is None:
        from .types import dtype_of_array

        dtype_name = dtype_of_array(arr).name
    head = f"dense<{dtype_name}, [{', '.join(str(d) for d in arr.shape)}]>"
    if elide_above is not None and arr.size > elide_above:
        return head + "(...)"
    kind = arr.dtype.kind
    flat = arr.reshape(-1)
    return head + "(" + ", ".join(_fmt_scalar(x, kind) for x in flat) + ")"


def format_literal(v: Any, *, dtype_name: str | None = None, elide_above: int | None = None) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)) and not isinstance(v, np.bool_):
        return str(int(v))
    if isinstance(v, float):
        return _fmt_scalar(v, "f") if not np.isfinite(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (np.ndarray, np.generic)):
        return format_array(np.asarray(v), dtype_name, elide_above=elide_above)
    if isinstance(v, ListValue):
        items = ", ".join(format_literal(x, elide_above=elide_above) for x in v.items)
        fixed = "" if v.dynamic_length else "fixed "
        return f"listval<{fixed}{format_type(v.elem_type)}>({items})"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(format_literal(x, elide_above=elide_above) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {format_literal(x, elide_above=elide_above)}"
                               for k, x in v.items()) + "}"
    if isinstance(v, bytes):
        return f"bytes({json.dumps(v.hex())})"
    raise TypeError(f"cannot print literal of type {type(v).__name__}")


class _Printer:
    def __init__(self, elide_above: int | None) -> None:
        self.elide_above = elide_above
        self.lines: list[str] = []
        self.display: dict[Value, str] = {}
        self.used: set[str] = set()

    def name_of(self, v: Value) -> str:
        got = self.display.get(v)
        if got is None:
            return "%" + _fmt_name(v.name) + "<?>"  # not defined in scope: printed, flagged
        return got

    def define(self, v: Value) -> str:
        base = v.name or "v"
        name = base
        n = 1
        while name in self.used:
            name = f"{base}.{n}"
            n += 1
        self.used.add(name)
        shown = "%" + _fmt_name(name)
        self.display[v] = shown
        return shown

    def attrs(self, attrs: dict[str, Any], op: Op | None = None) -> str:
        if not attrs:
            return ""
        parts = []
        for k, v in attrs.items():
            dn = None
            if op is not None and k == "val" and op.outputs and isinstance(op.outputs[0].type, TensorType):
                dn = op.outputs[0].type.dtype.name
            parts.append(f"{k}={format_literal(v, dtype_name=dn, elide_above=self.elide_above)}")
        return " [" + ", ".join(parts) + "]"

    def program(self, prog: Program) -> str:
        head = "program"
        pattrs = dict(prog.attributes)
        if prog.doc_string:
            pattrs = {"__doc__": prog.doc_string, **pattrs}
        if prog.default_function != next(iter(prog.functions), prog.default_function):
            pattrs = {"__default__": prog.default_function, **pattrs}
        self.lines.append(head + self.attrs(pattrs))
        syms = self.collect_symbols(prog)
        if syms:
            body = ", ".join(self.fmt_symbol(s) for s in syms)
            self.lines.append(f"symbols {{ {body} }}")
        for fn in prog.functions.values():
            self.function(fn)
        return "\n".join(self.lines) + "\n"

    @staticmethod
    def fmt_symbol(s: Symbol) -> str:
        if s.choices:
            return f"{s.name}: {{{', '.join(str(c) for c in s.choices)}}}"
        upper = "?" if s.upper is None else str(s.upper)
        return f"{s.name}: [{s.lower}, {upper}]"

    @staticmethod
    def collect_symbols(prog: Program) -> list[Symbol]:
        """Symbols carrying bounds or choices, in order of first appearance (they get declared)."""
        from .symbols import program_values, type_symbols

        found: dict[str, Symbol] = {}
        for v in program_values(prog):
            for d in type_symbols(v.type):
                if d.lower != 1 or d.upper is not None or d.choices:
                    found.setdefault(d.name, d)
        return list(found.values())

    def function(self, fn: Function) -> None:
        args = ", ".join(f"{self.define(v)}: {format_type(v.type)}" for v in fn.inputs)
        self.lines.append(f"func {_fmt_name(fn.name)}<{fn.opset}>({args}){self.attrs(fn.attributes)} {{")
        self.block_body(fn.block, 1)
        outs = ", ".join(self.name_of(v) for v in fn.outputs)
        self.lines.append(f"}} -> ({outs})")

    def block_body(self, block: Block, depth: int) -> None:
        for op in block.ops:
            self.op(op, depth)

    def op(self, op: Op, depth: int) -> None:
        ind = "  " * depth
        ins = []
        for k, arg in op.inputs.items():
            if isinstance(arg, tuple):
                ins.append(f"{k}=({', '.join(self.name_of(v) for v in arg)})")
            else:
                ins.append(f"{k}={self.name_of(arg)}")
        outs = ", ".join(f"{self.define(v)}: {format_type(v.type)}" for v in op.outputs)
        lhs = f"{outs} = " if outs else ""
        name = "" if op.outputs and op.outputs[0].name == op.name else f" @{_fmt_name(op.name)}"
        line = f"{ind}{lhs}{op.type}({', '.join(ins)}){name}{self.attrs(op.attributes, op)}"
        if not op.blocks:
            self.lines.append(line)
            return
        self.lines.append(line + " {")
        for b in op.blocks:
            args = ", ".join(f"{self.define(v)}: {format_type(v.type)}" for v in b.inputs)
            battrs = self.attrs(b.attributes)
            self.lines.append(f"{ind}  block({args}){battrs} {{")
            self.block_body(b, depth + 2)
            self.lines.append(f"{ind}  }} -> ({', '.join(self.name_of(v) for v in b.outputs)})")
        self.lines.append(f"{ind}}}")


def print_program(prog: Program, *, elide_above: int | None = None) -> str:
    """The text form. ``elide_above`` shortens large constants (the result no longer parses)."""
    return _Printer(elide_above).program(prog)


# ---------------------------------------------------------------------------------------------
# Parsing

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|//[^\n]*)
  | (?P<value>%(?:"(?:[^"\\]|\\.)*"|[A-Za-z0-9_@.$]+))
  | (?P<opname>@(?:"(?:[^"\\]|\\.)*"|[A-Za-z0-9_@.$]+))
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<number>-?(?:(?:inf|nan)(?![A-Za-z0-9_])|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))
  | (?P<arrow>->)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.$]*)
  | (?P<punct>[()\[\]{}<>,=:*?+\-^])
    """,
    re.VERBOSE,
)


class _Tok:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind: str, text: str, pos: int) -> None:
        self.kind, self.text, self.pos = kind, text, pos

    def __repr__(self) -> str:
        return f"{self.kind}:{self.text!r}"


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            line = text.count("\n", 0, pos) + 1
            col = pos - (text.rfind("\n", 0, pos) + 1) + 1
            raise ParseError(f"unexpected character {text[pos]!r}", line=line, column=col)
        kind = m.lastgroup
        if kind != "ws":
            toks.append(_Tok(kind, m.group(), pos))
        pos = m.end()
    toks.append(_Tok("eof", "", n))
    return toks


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0
        self.symbols: dict[str, Symbol] = {}
        self.values: dict[str, Value] = {}
        self.opset = "iOS18"

    # -- token helpers ---------------------------------------------------------------------------

    def peek(self, k: int = 0) -> _Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> _Tok:
        t = self.toks[self.i]
        if t.kind != "eof":  # never run past the end: every later read sees end of input again
            self.i += 1
        return t

    def error(self, msg: str, tok: _Tok | None = None) -> ParseError:
        tok = tok or self.peek()
        line = self.text.count("\n", 0, tok.pos) + 1
        col = tok.pos - (self.text.rfind("\n", 0, tok.pos) + 1) + 1
        return ParseError(msg, line=line, column=col)

    def expect(self, text: str) -> _Tok:
        t = self.next()
        if t.text != text:
            raise self.error(f"expected '{text}', found '{t.text or 'end of input'}'", t)
        return t

    @staticmethod
    def _shown(t: _Tok) -> str:
        return t.text or "end of input"

    def _int(self, tok: _Tok, what: str, *, minimum: int | None = None) -> int:
        """The integer a number token spells; a ParseError at the token for anything else."""
        try:
            n = int(tok.text) if tok.kind == "number" else None
        except ValueError:
            n = None
        if n is None:
            raise self.error(f"expected an integer {what}, found '{self._shown(tok)}'", tok)
        if minimum is not None and n < minimum:
            raise self.error(f"{what} must be at least {minimum}, got {n}", tok)
        return n

    def _string(self, tok: _Tok, what: str = "string") -> str:
        """The text of a quoted string token (JSON escapes); a ParseError for a bad escape."""
        if tok.kind != "string":
            raise self.error(f"expected a quoted {what}, found '{self._shown(tok)}'", tok)
        try:
            return json.loads(tok.text)
        except ValueError as e:  # json.JSONDecodeError: a bad escape or a control character
            msg = getattr(e, "msg", str(e))
            raise self.error(f"bad {what} {tok.text}: {msg}", tok) from None

    def _name(self, tok: _Tok, text: str) -> str:
        """A bare name, or a quoted one (``"x.1"``) decoded."""
        return self._string(_Tok("string", text, tok.pos), "name") if text.startswith('"') else text

    def accept(self, text: str) -> bool:
        if self.peek().text == text and self.peek().kind != "string":
            self.i += 1
            return True
        return False

    def ident(self) -> str:
        t = self.next()
        if t.kind not in ("ident", "string"):
            raise self.error(f"expected a name, found '{self._shown(t)}'", t)
        return self._name(t, t.text)

    # -- grammar ---------------------------------------------------------------------------------

    def program(self) -> Program:
        prog = Program()
        if self.ident() != "program":
            raise self.error("text must start with 'program'", self.toks[0])
        attrs = self.attr_list()
        prog.doc_string = attrs.pop("__doc__", "")
        default = attrs.pop("__default__", None)
        if not isinstance(prog.doc_string, str):
            raise self.error(f"__doc__ must be a string, got {format_literal(prog.doc_string)}", self.toks[0])
        if default is not None and not isinstance(default, str):
            raise self.error(f"__default__ must be a function name, got {format_literal(default)}", self.toks[0])
        prog.attributes = attrs
        if self.peek().text == "symbols":
            self.next()
            self.symbol_decls()
        while self.peek().kind != "eof":
            fn = self.function()
            if fn.name in prog.functions:
                raise self.error(f"function '{fn.name}' defined twice")
            prog.functions[fn.name] = fn
        if not prog.functions:
            raise self.error("program has no functions")
        if default is not None and default not in prog.functions:
            known = ", ".join(repr(k) for k in prog.functions)
            raise self.error(f"__default__ names no function: {default!r} (defined: {known})", self.toks[0])
        prog.default_function = default or next(iter(prog.functions))
        return prog

    def symbol_decls(self) -> None:
        self.expect("{")
        while not self.accept("}"):
            name = self.ident()
            self.expect(":")
            if self.accept("{"):
                start = self.peek()
                choices = []
                while not self.accept("}"):
                    choices.append(self._int(self.next(), f"size of symbol '{name}'", minimum=0))
                    self.accept(",")
                if not choices:
                    raise self.error(f"symbol '{name}' lists no sizes", start)
                self.symbols[name] = Symbol(name, lower=min(choices), upper=max(choices), choices=tuple(choices))
            else:
                self.expect("[")
                lower = self._int(self.next(), f"lower bound of symbol '{name}'", minimum=0)
                self.expect(",")
                up = self.next()
                upper = None if up.text == "?" else self._int(up, f"upper bound of symbol '{name}' (or '?')",
                                                              minimum=lower)
                self.expect("]")
                self.symbols[name] = Symbol(name, lower=lower, upper=upper)
            self.accept(",")

    def function(self) -> Function:
        kw = self.next()
        if kw.text != "func":
            raise self.error(f"expected 'func', found '{kw.text}'", kw)
        name = self.ident()
        self.expect("<")
        opset = self.ident()
        if opset not in OPSETS:
            raise self.error(f"unknown opset '{opset}'")
        self.expect(">")
        self.opset = opset
        fn = Function(name, opset)
        self.values = {}
        self.expect("(")
        while not self.accept(")"):
            vname = self.value_def()
            self.expect(":")
            v = fn.block.new_input(vname, self.type())
            self.values[vname] = v
            self.accept(",")
        fn.attributes = self.attr_list()
        self.expect("{")
        self.block_body(fn.block)
        self.expect("->")
        fn.block.set_outputs(self.value_list())
        assign_rng_keys(fn)  # random ops written without their stream key (printed ones keep theirs)
        return fn

    def value_def(self) -> str:
        t = self.next()
        if t.kind != "value":
            raise self.error(f"expected a %value, found '{t.text}'", t)
        name = self._name(t, t.text[1:])
        if name in self.values:
            raise self.error(f"value %{name} defined twice", t)
        return name

    def value_ref(self) -> Value:
        t = self.next()
        if t.kind != "value":
            raise self.error(f"expected a %value, found '{t.text}'", t)
        name = self._name(t, t.text[1:])
        v = self.values.get(name)
        if v is None:
            raise self.error(f"undefined value %{name}", t)
        return v

    def value_list(self) -> list[Value]:
        self.expect("(")
        out = []
        while not self.accept(")"):
            out.append(self.value_ref())
            self.accept(",")
        return out

    def block_body(self, block: Block) -> None:
        # the opening '{' was consumed by the caller
        while not self.accept("}"):
            self.op(block)

    def op(self, block: Block) -> None:
        start = self.peek()
        outs: list[tuple[str, Type]] = []
        if start.kind == "value":
            while True:
                name = self.value_def()
                self.expect(":")
                outs.append((name, self.type()))
                if not self.accept(","):
                    break
            self.expect("=")
        op_type = self.ident()
        try:
            opdef = get_opdef(op_type, self.opset)
        except UnsupportedError as e:
            raise self.error(e.message, start) from None
        self.expect("(")
        inputs: dict[str, Any] = {}
        while not self.accept(")"):
            key = self.ident()
            self.expect("=")
            if self.accept("("):
                vals = []
                while not self.accept(")"):
                    vals.append(self.value_ref())
                    self.accept(",")
                inputs[key] = tuple(vals)
            else:
                inputs[key] = self.value_ref()
            self.accept(",")
        op_name = None
        if self.peek().kind == "opname":
            t = self.next()
            op_name = self._name(t, t.text[1:])
        attrs = self.attr_list()
        if op_name is None:
            op_name = outs[0][0] if outs else op_type
        op = Op(op_type, opdef, inputs=inputs, name=op_name, attributes=attrs)
        block.append(op)
        if self.accept("{"):
            while not self.accept("}"):
                kw = self.next()
                if kw.text != "block":
                    raise self.error(f"expected 'block', found '{kw.text}'", kw)
                blk = Block()
                op.add_block(blk)
                self.expect("(")
                while not self.accept(")"):
                    vname = self.value_def()
                    self.expect(":")
                    self.values[vname] = blk.new_input(vname, self.type())
                    self.accept(",")
                blk.attributes = self.attr_list()
                self.expect("{")
                self.block_body(blk)
                self.expect("->")
                blk.set_outputs(self.value_list())
        op.create_outputs([t for _, t in outs], [n for n, _ in outs])
        for v in op.outputs:
            self.values[v.name] = v

    # -- types -----------------------------------------------------------------------------------

    def dim(self) -> Any:
        """A dimension: an integer, a symbol, or an expression of them (``+ - *``, ``^`` by an
        integer, ``floordiv``/``ceildiv`` by a positive integer, parentheses)."""
        start = self.peek()
        d = self.dim_sum()
        if not symexpr.is_symbolic(d) and d < 0:
            raise self.error(f"dimension must be at least 0, got {d}", start)
        return d

    def _minus_number(self) -> bool:
        """A number token ``-3`` standing where an operator is expected is ``- 3``: split it."""
        t = self.peek()
        if t.kind == "number" and t.text.startswith("-") and t.text[1:2].isdigit():
            self.toks[self.i: self.i + 1] = [_Tok("punct", "-", t.pos), _Tok("number", t.text[1:], t.pos + 1)]
            return True
        return False

    def dim_sum(self) -> Any:
        self._minus_number()  # "-2*a" starts with the number token "-2": a minus, then 2
        negate = self.accept("-")
        total = self.dim_term()
        if negate:
            total = -total
        while True:
            self._minus_number()
            if self.accept("+"):
                total = total + self.dim_term()
            elif self.accept("-"):
                total = total - self.dim_term()
            else:
                return total

    def dim_term(self) -> Any:
        value = self.dim_power()
        while True:
            t = self.peek()
            if self.accept("*"):
                value = value * self.dim_power()
            elif t.kind == "ident" and t.text in ("floordiv", "ceildiv"):
                self.next()
                k = self._int(self.next(), f"divisor of {t.text}", minimum=1)
                value = symexpr.floordiv(value, k) if t.text == "floordiv" else symexpr.ceildiv(value, k)
            else:
                return value

    def dim_power(self) -> Any:
        base = self.dim_atom()
        if self.accept("^"):
            e = self._int(self.next(), "exponent", minimum=1)
            if e > 64:
                raise self.error(f"exponent {e} is too large")
            out: Any = 1
            for _ in range(e):
                out = out * base
            return out
        return base

    def dim_atom(self) -> Any:
        t = self.next()
        if t.kind == "number":
            return self._int(t, "dimension", minimum=0)
        if t.kind == "ident":
            return self.symbols.setdefault(t.text, Symbol(t.text))
        if t.text == "(" and t.kind == "punct":
            d = self.dim_sum()
            self.expect(")")
            return d
        raise self.error(f"expected a dimension, found '{self._shown(t)}'", t)

    def type(self) -> Type:
        kw = self.ident()
        self.expect("<")
        if kw == "tensor":
            dt = self.ident()
            if dt not in DTYPES:
                raise self.error(f"unknown dtype '{dt}'")
            self.expect(",")
            if self.accept("*"):
                shape = None
            else:
                self.expect("[")
                shape = []
                while not self.accept("]"):
                    shape.append(self.dim())
                    self.accept(",")
                shape = tuple(shape)
            self.expect(">")
            return TensorType(DTYPES[dt], shape)
        if kw == "list":
            elem = self.type()
            self.expect(",")
            length = None if self.accept("?") else self.dim()
            dynamic = True
            if self.accept(","):
                if self.ident() != "fixed":
                    raise self.error("expected 'fixed'")
                dynamic = False
            self.expect(">")
            return ListType(elem, length, dynamic)
        if kw == "tuple":
            types = []
            while not self.accept(">"):
                types.append(self.type())
                self.accept(",")
            return TupleType(tuple(types))
        if kw == "dict":
            k = self.type()
            self.expect(",")
            v = self.type()
            self.expect(">")
            return DictType(k, v)
        if kw == "state":
            w = self.type()
            self.expect(">")
            if not isinstance(w, TensorType):
                raise self.error("state wraps a tensor type")
            return StateType(w)
        raise self.error(f"unknown type '{kw}'")

    # -- literals --------------------------------------------------------------------------------

    def attr_list(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.peek().text != "[":
            return out
        self.next()
        while not self.accept("]"):
            key = self.ident()
            self.expect("=")
            out[key] = self.literal()
            self.accept(",")
        return out

    def literal(self) -> Any:
        t = self.peek()
        if t.kind == "string":
            self.next()
            return self._string(t)
        if t.kind == "number":
            self.next()
            return _parse_number(t.text)
        if t.text == "[":
            self.next()
            items = []
            while not self.accept("]"):
                items.append(self.literal())
                self.accept(",")
            return items
        if t.text == "{":
            self.next()
            d = {}
            while not self.accept("}"):
                k = self._string(self.next(), "dictionary key")
                self.expect(":")
                d[k] = self.literal()
                self.accept(",")
            return d
        if t.kind == "ident":
            self.next()
            if t.text == "true":
                return True
            if t.text == "false":
                return False
            if t.text == "none":
                return None
            if t.text == "dense":
                return self.dense()
            if t.text == "listval":
                return self.listval()
            if t.text == "bytes":
                self.expect("(")
                h = self.next()
                try:
                    data = bytes.fromhex(self._string(h, "hex string"))
                except ValueError as e:
                    raise self.error(f"bad bytes literal {h.text}: {e}", h) from None
                self.expect(")")
                return data
        raise self.error(f"expected a literal, found '{t.text}'", t)

    def dense(self) -> np.ndarray:
        self.expect("<")
        dt = self.ident()
        if dt not in DTYPES:
            raise self.error(f"unknown dtype '{dt}'")
        self.expect(",")
        self.expect("[")
        shape = []
        while not self.accept("]"):
            shape.append(self._int(self.next(), f"dimension of dense<{dt}>", minimum=0))
            self.accept(",")
        self.expect(">")
        self.expect("(")
        raw: list[Any] = []
        first = self.peek()
        while not self.accept(")"):
            t = self.next()
            if t.kind == "number":
                raw.append(_parse_number(t.text))
            elif t.kind == "string":
                raw.append(self._string(t))
            elif t.text in ("true", "false"):
                raw.append(t.text == "true")
            else:
                raise self.error(f"bad array element '{self._shown(t)}'", t)
            self.accept(",")
        d = DTYPES[dt]
        storage = np.str_ if d.name == "string" else d.storage
        try:
            arr = np.array(raw, dtype=storage) if raw else np.zeros((0,), dtype=storage)
        except (ValueError, TypeError, OverflowError) as e:  # 300 as int8, nan as int32, "a" as fp32
            raise self.error(f"dense<{dt}> cannot hold these values: {e}", first) from None
        n = int(np.prod(shape)) if shape else 1
        if arr.size != n:
            raise self.error(f"dense<{dt}> with shape {shape} needs {n} values, has {arr.size}")
        return arr.reshape(shape)

    def listval(self) -> ListValue:
        self.expect("<")
        dynamic = True
        if self.peek().text == "fixed":
            self.next()
            dynamic = False
        elem = self.type()
        self.expect(">")
        self.expect("(")
        items = []
        while not self.accept(")"):
            items.append(self.literal())
            self.accept(",")
        return ListValue(elem, items, dynamic)


def _parse_number(s: str) -> int | float:
    if s in ("nan", "-nan"):
        return float("nan")
    if s in ("inf", "-inf"):
        return float(s)
    if any(c in s for c in ".eE") or "inf" in s or "nan" in s:
        return float(s)
    return int(s)


def parse_program(text: str) -> Program:
    """Parse the text form back into a Program (types as written; run verify() to re-check).
    Malformed text raises `ParseError` with the line and column."""
    parser = _Parser(text)
    try:
        return parser.program()
    except RecursionError:
        raise parser.error("nested too deeply") from None


def parse_dim(text: str, symbols: dict[str, Symbol] | None = None) -> Any:
    """One dimension in the text form (``3``, ``s0``, ``2*s0 + 1``, ``(s0 + 1) floordiv 2``);
    symbols not in ``symbols`` are made with default bounds."""
    parser = _Parser(text)
    if symbols:
        parser.symbols.update(symbols)
    d = parser.dim()
    if parser.peek().kind != "eof":
        raise parser.error(f"unexpected '{parser.peek().text}' after the dimension")
    return d


def iter_lines(prog: Program) -> Iterator[str]:
    yield from print_program(prog).splitlines()
