"""Generic jitted numerics; generated modules bind their kernels to these functions.

Nothing here knows a model: every routine receives kernels as arguments
(DESIGN rule 6).  Importing this package configures Numba's cache first.

Generic routines that take kernels or other routines as arguments are declared
``inline="always"``.  Numba then inlines them into the generated module's entry
point, where the kernels are module constants, and the entry point stays
cacheable.  A dispatcher that reaches a call through an argument of a routine that
is not inlined marks the entry point as using "dynamic globals", and every process
would recompile it (checked by ``tests/test_compiler.py``; it happens even for the
last routine in the chain, e.g. a non-inlined ``index1_rhs``).
"""

from mbdgen import _numba_cache  # noqa: F401  (must precede any @njit(cache=True))
from mbdgen.runtime import (
    adaptive,
    explicit,
    index1,
    linalg,
    partition,
    postprocess,
    status,
    tables,
    welch,
)

__all__ = [
    "adaptive",
    "explicit",
    "index1",
    "linalg",
    "partition",
    "postprocess",
    "status",
    "tables",
    "welch",
]
