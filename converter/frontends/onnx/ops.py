"""The op families: importing this module fills the registry (one line per ``ops_<family>`` module,
so families added in parallel do not conflict)."""

# ruff: noqa: F401, I001
from . import ops_activation
from . import ops_bitwise
from . import ops_control
from . import ops_elementwise
from . import ops_random
from . import ops_sequence
from . import ops_signal
from . import ops_tensor
