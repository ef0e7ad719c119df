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

import os
import sys

from mbdgen import (
    _numba_cache,  # noqa: F401  (must precede any @njit(cache=True))
    _numba_inline,  # noqa: F401  (inlining without its quadratic IR copies)
)
from mbdgen.runtime import (
    adaptive,
    adaptive_rk,
    dop853,
    explicit,
    genalpha,
    hht,
    index1,
    library,
    linalg,
    newmark_gcp,
    partition,
    postprocess,
    sparse_newton,
    status,
    tables,
    welch,
)
from mbdgen.runtime.library import library_kernel

#: Prefix of the name every generated module runs under (see :func:`canonical_name`).
MODULE_PREFIX = "mbdgen_generated_"


def module_name(path: str) -> str:
    """The canonical module name of the generated module at ``path``."""
    return MODULE_PREFIX + os.path.splitext(os.path.basename(path))[0]


def canonical_name(namespace: dict) -> None:
    """Run the generated module whose globals are ``namespace`` under its canonical name.

    Numba's disk cache is indexed by file, but each entry records the name of the
    module it was compiled in and imports that name when loaded.  Without one name,
    machine code cached by ``import pendulum`` (``generated/`` on ``sys.path``) made
    ``mbdgen.compile("pendulum.py")`` in a later process fail with
    ModuleNotFoundError, and the other way round.  The module is also registered under
    that name, so the import succeeds whichever way it was first loaded.
    """
    name = module_name(namespace["__file__"])
    module = sys.modules.get(namespace["__name__"])
    if module is not None:
        sys.modules.setdefault(name, module)
    namespace["__name__"] = name


__all__ = [
    "MODULE_PREFIX",
    "canonical_name",
    "library_kernel",
    "module_name",
    "adaptive",
    "adaptive_rk",
    "dop853",
    "explicit",
    "genalpha",
    "hht",
    "index1",
    "library",
    "linalg",
    "newmark_gcp",
    "partition",
    "postprocess",
    "sparse_newton",
    "status",
    "tables",
    "welch",
]
