"""Op families. Importing this package registers every module's op definitions.

One module per family (elementwise, activation, conv, pool, linalg, norm, shape, reduce,
gather_scatter, recurrent, control_flow, image, quant, random, classify, ...). Modules are found
automatically, so adding a family never touches this file.
"""

from __future__ import annotations

import importlib
import pkgutil

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
