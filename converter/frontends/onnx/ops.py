"""The op families: importing this module fills the registry (one line per ``ops_<family>`` module)."""

from . import (  # noqa: F401
    ops_activation,
    ops_bitwise,
    ops_control,
    ops_elementwise,
    ops_random,
    ops_sequence,
    ops_signal,
    ops_tensor,
)
