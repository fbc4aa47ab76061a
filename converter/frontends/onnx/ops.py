"""The op families: importing this module fills the registry (one line per ``ops_<family>`` module)."""

from . import (  # noqa: F401
    ops_activation,
    ops_attention,
    ops_elementwise,
    ops_normalize,
    ops_recurrent,
    ops_resize,
    ops_spatial,
    ops_tensor,
)
