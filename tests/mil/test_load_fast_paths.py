"""The MIL loader's fast paths agree with the general decoding they stand in for."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from converter.formats.milproto import (
    TypeDecoder,
    string_to_proto,
    type_to_proto,
    value_from_proto,
    value_to_proto,
    value_type,
)
from converter.formats.proto import MIL_pb2
from converter.frontends.mil import _Loader
from converter.ir.types import DTYPES, Symbol, TensorType, fresh_symbol, tensor


def _general(v: MIL_pb2.Value) -> str | None:
    """What the general decoding makes of a name attribute (a one-string tensor), else None."""
    val, _ = value_from_proto(v, None, fresh_symbol)
    if isinstance(val, np.ndarray) and val.dtype.kind in "US" and val.size == 1:
        return str(val.reshape(-1)[0])
    return None


def _encoded(val: np.ndarray) -> MIL_pb2.Value:
    v = MIL_pb2.Value()
    value_to_proto(val, value_type(val), v)
    return v


@given(st.text(max_size=300))
def test_a_name_is_read_as_the_general_decoding_reads_it(name: str) -> None:
    v = MIL_pb2.Value()
    if not string_to_proto(name, v):
        v = _encoded(np.array(name))
    v = MIL_pb2.Value.FromString(v.SerializeToString())  # as parsed from a file
    fast = _Loader.plain_string(v)
    assert fast is None or fast == _general(v)
    if name.isascii() and len(name) < 100 and not name.endswith("\x00"):
        assert fast == name  # the fast path is taken for ordinary names


def test_other_values_are_left_to_the_general_decoding() -> None:
    others = [np.array(["a"]), np.array([["ab"]]), np.array(["a", "b"]), np.array(3, np.int32),
              np.array([1.5], np.float32)]
    for val in others:
        assert _Loader.plain_string(_encoded(val)) is None
    v = MIL_pb2.Value()
    string_to_proto("name", v)
    v.docString = "a doc string"  # another field: not the exact shape the fast path reads
    assert _Loader.plain_string(v) is None
    assert _general(v) == "name"


def test_type_decoder_shares_static_types_and_makes_fresh_symbols() -> None:
    decode = TypeDecoder(fresh_symbol)
    static = type_to_proto(tensor("fp32", [1, 3, 8, 8]))
    assert decode(static) is decode(MIL_pb2.ValueType.FromString(static.SerializeToString()))
    assert decode(static) == TensorType(DTYPES["fp32"], (1, 3, 8, 8))
    unknown = MIL_pb2.ValueType()
    unknown.tensorType.dataType = MIL_pb2.FLOAT32
    unknown.tensorType.rank = 2
    unknown.tensorType.dimensions.add().constant.size = 4
    unknown.tensorType.dimensions.add().unknown.variadic = False
    a, b = decode(unknown), decode(unknown)
    assert isinstance(a.shape[1], Symbol) and isinstance(b.shape[1], Symbol) and a.shape[1] != b.shape[1]


def test_a_truncated_name_value_is_left_to_the_general_decoding() -> None:
    """A string-typed name whose immediate value was cut short (found by the hostile fuzzer: an
    IndexError) is not the fast path's to read."""
    v = MIL_pb2.Value()
    v.type.tensorType.dataType = MIL_pb2.STRING
    v.immediateValue.SetInParent()  # the tensor removed
    assert _Loader.plain_string(v) is None
