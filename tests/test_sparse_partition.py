"""Sparse GCP / hybrid solves and the sparse redundancy check at t0 (issue 11, item 1).

The redundancy check: the sparse LU of [[I, Φ_qᵀ], [Φ_q, 0]] on the module's index-1
plan proves the rows of Φ_q independent in O(n + m); whenever it cannot (a redundant
row, a pivot near the threshold) the dense QR of
:func:`mbdgen.analysis.assembly.redundant_rows` decides and names the rows as before.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import TEST_GENERATED, TEST_MODELS

import mbdgen
from mbdgen.analysis.assembly import (
    _kernel,
    assemble,
    redundant_rows,
    removable_rows,
    sparse_rows_independent,
)
from mbdgen.compiler import import_generated
from mbdgen.simulation import parameter_vector

GENERATED = Path(__file__).resolve().parent.parent / "generated"
SPARSE_EXAMPLES = [
    "andrews",
    "iftomm_a05_flyball_governor",
    "planar_chain",
    "spatial_slider_crank",
]


@pytest.mark.parametrize("name", SPARSE_EXAMPLES)
def test_sparse_independence_proof_agrees_with_the_dense_qr(name):
    """Every sparse example model's rows are independent at q0 and at a random
    perturbation of it (Φ_q's rank does not need a consistent q): the sparse proof
    says so, and so does the dense QR it replaces."""
    module = import_generated(GENERATED / f"{name}.py")
    assert module.LINEAR_ALGEBRA == "sparse"
    p = parameter_vector(module, None)
    rng = np.random.default_rng(3)
    q0 = np.asarray(module.Q0, dtype=float)
    for q in (q0, q0 + 0.05 * rng.standard_normal(q0.size)):
        assert sparse_rows_independent(module, 0.0, q, p)
        rank, redundant = redundant_rows(_kernel(module, "phi_q", 0.0, q, p))
        assert (rank, redundant) == (module.N_CONSTRAINTS, [])


def test_redundant_rows_fall_back_to_the_dense_test():
    """Bricard's mechanism (sparse, one redundant row J6[4]): the sparse proof fails,
    on a multiplier pivot at rounding level, and the dense QR names the row."""
    bricard = mbdgen.compile(TEST_MODELS / "bricard.py", TEST_GENERATED)
    assert bricard.LINEAR_ALGEBRA == "sparse"
    a = assemble(bricard)
    p = parameter_vector(bricard, None)
    assert not sparse_rows_independent(bricard, 0.0, a.q, p)
    removed = removable_rows(bricard, 0.0, a.q, p)
    assert removed.names == ("J6[4]",) and removed.rank == 34
