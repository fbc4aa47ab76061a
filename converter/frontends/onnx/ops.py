"""The op families: importing this module fills the registry (one line per ``ops_<family>`` module)."""

from . import (  # noqa: F401
    ops_activation,
    ops_elementwise,
    ops_indexing,
    ops_loss,
    ops_misc,
    ops_quant,
    ops_tensor,
)
