"""The op families: importing this module fills the registry (one line per ``ops_<family>`` module,
so families added in parallel do not conflict)."""

# ruff: noqa: F401, I001
from . import ops_activation
from . import ops_attention
from . import ops_bitwise
from . import ops_control
from . import ops_conv
from . import ops_elementwise
from . import ops_indexing
from . import ops_linalg
from . import ops_loss
from . import ops_misc
from . import ops_norm
from . import ops_normalize
from . import ops_pool
from . import ops_quant
from . import ops_random
from . import ops_recurrent
from . import ops_reduce
from . import ops_resize
from . import ops_sequence
from . import ops_shape
from . import ops_signal
from . import ops_spatial
from . import ops_tensor
