"""Layer lowerings, one module per family; each module registers its kinds with ``@lowers``."""
