"""The op families: importing this module fills the registry (one line per ``ops_<family>`` module)."""

from . import ops_activation, ops_elementwise, ops_tensor  # noqa: F401
