"""The element path (kernels per element type, loops over index tables).

* the element-path module and the flat-path module of the same mechanism give the
  same numbers for every ABI kernel, the same sparse patterns and values, and the
  same metadata (DESIGN "Scale: element kernels": the flat path is the cross-check);
  (every kernel is also checked against sympy.lambdify of the flat derivation and
  against finite differences in tests/test_kernels.py, case ``element_zoo``);
* generated code size does not grow with the number of bodies;
* energy and joint reactions on the Result: a hanging body's reaction is its weight,
  a conservative mechanism conserves T + V to the integrator's order.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import GENERATED, MODELS, TEST_GENERATED, TEST_MODELS

import mbdgen
from mbdgen.analysis.assembly import assemble
from mbdgen.bench import module_sizes
from mbdgen.codegen.abi import KERNELS, SPARSE_BLOCKS, block_shape
from mbdgen.compiler import _write_if_changed, import_generated, render, stale_reason

FLAT = TEST_GENERATED / "flat"


@pytest.fixture(scope="module")
def zoo_flat(element_zoo):
    """The same mechanism through Mechanism.flatten() and the generalized-coordinate path."""
    path = FLAT / "element_zoo.py"
    if stale_reason(TEST_MODELS / "element_zoo.py", path) is not None:
        _write_if_changed(path, render(TEST_MODELS / "element_zoo.py", flat=True))
    return import_generated(path)


def test_element_and_flat_paths_agree(element_zoo, zoo_flat):
    el, fl = element_zoo, zoo_flat
    n, m = el.N_COORDINATES, el.N_CONSTRAINTS
    assert (n, m) == (fl.N_COORDINATES, fl.N_CONSTRAINTS) == (23, 16)
    for name in ("COORDINATE_NAMES", "VELOCITY_NAMES", "PARAMETER_NAMES", "CONSTRAINT_NAMES"):
        assert tuple(getattr(el, name)) == tuple(getattr(fl, name)), name
    for name in ("P_DEFAULT", "Q0", "QD0"):
        np.testing.assert_array_equal(getattr(el, name), getattr(fl, name), err_msg=name)
    rng = np.random.default_rng(3)
    for _ in range(2):
        st = {
            "t": float(rng.uniform(0, 2)),
            "q": rng.uniform(-1, 1, n),
            "qd": rng.uniform(-1, 1, n),
            "a": rng.uniform(-1, 1, n),
            "lam": rng.uniform(-1, 1, m),
            "p": el.P_DEFAULT * rng.uniform(0.5, 1.5, el.P_DEFAULT.size),
            "qdd": rng.uniform(-1, 1, n),  # the states' residual kernels (no states here)
            "xd": np.zeros(el.N_STATES),
        }
        for spec in KERNELS:
            args = [st[a] for a in spec.inputs]
            outs = []
            for module in (el, fl):
                o = [
                    np.full(getattr(module, f"{x.block.upper()}_ROWS").size, np.nan)
                    if x.sparse
                    else np.full(block_shape(x.block, n, m), np.nan)
                    for x in spec.outputs
                ]
                getattr(module, spec.name)(*args, *o)
                outs.append(o)
            for x, a, b in zip(spec.outputs, *outs, strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=x.block)
        for block in SPARSE_BLOCKS:
            big = block.upper()
            np.testing.assert_array_equal(getattr(el, f"{big}_ROWS"), getattr(fl, f"{big}_ROWS"))
            np.testing.assert_array_equal(getattr(el, f"{big}_COLS"), getattr(fl, f"{big}_COLS"))
            spec = next(k for k in KERNELS if k.name == block)
            vals = [np.full(getattr(el, f"{big}_ROWS").size, np.nan) for _ in range(2)]
            getattr(el, f"{block}_values")(*[st[a] for a in spec.inputs], vals[0])
            getattr(fl, f"{block}_values")(*[st[a] for a in spec.inputs], vals[1])
            np.testing.assert_allclose(vals[0], vals[1], rtol=1e-12, atol=1e-12, err_msg=block)


def test_code_size_does_not_grow_with_the_number_of_bodies(tmp_path):
    """Rendering only (no JIT): 8 and 512 links give the same code, more data."""
    sizes = {}
    for n_links in (8, 512):
        src = tmp_path / f"planar_chain_{n_links}.py"
        src.write_text((MODELS / "planar_chain.py").read_text())
        out = tmp_path / f"gen_{n_links}.py"
        out.write_text(render(src))
        sizes[n_links] = module_sizes(out)
    small, big = sizes[8], sizes[512]
    # The code differs only in the digits of the counts and in the model name.
    assert abs(big["code_bytes"] - small["code_bytes"]) < 100, sizes
    assert big["data_bytes"] > 10 * small["data_bytes"]


def test_hanging_bodies_carry_their_weight(element_zoo):
    """At rest and hanging straight down, λ makes each pin's reaction equal the weight:
    F = (0, +m g) on the body, no torque about the pin (Haug 1989, Eq. 6.6.2)."""
    a = assemble(element_zoo)
    names = element_zoo.REACTION_NAMES
    out = np.zeros((element_zoo.N_REACTIONS, 12))
    element_zoo.reactions(0.0, a.q, a.lam, element_zoo.P_DEFAULT, out)
    g = 9.81
    planar_row = out[names.index("hang_pin.hang")]
    np.testing.assert_allclose(planar_row[:6], [0, 2.0 * g, 0, 0, 0, 0], atol=1e-10)
    np.testing.assert_allclose(planar_row[6:], [0, 2.0 * g, 0, 0, 0, 0], atol=1e-10)
    spatial_row = out[names.index("ball.sbody")]
    np.testing.assert_allclose(spatial_row[:6], [0, 3.0 * g, 0, 0, 0, 0], atol=1e-10)
    np.testing.assert_allclose(spatial_row[6:], [0, 3.0 * g, 0, 0, 0, 0], atol=1e-10)


def test_result_carries_energy_and_reactions(element_zoo, tmp_path):
    r = mbdgen.simulate(element_zoo, "abm", 4, 1e-3, 0.05, alpha=5, beta=5, assemble=True)
    assert r.energy.shape == (len(r), 2)
    assert r.reactions.shape == (len(r), element_zoo.N_REACTIONS, 12)
    pin = r.reaction("pin2.link2")  # a planar body: force in the plane, torque about z
    assert pin.shape == (len(r), 3) and pin.columns == ("Fx", "Fy", "Tz")
    np.testing.assert_array_equal(
        pin["Tz"], r.reactions[:, r.reaction_names.index("pin2.link2"), 5]
    )
    assert r.reaction("ball.sbody").columns == ("Fx", "Fy", "Fz", "Tx", "Ty", "Tz")
    assert r.constraint_names == tuple(element_zoo.CONSTRAINT_NAMES)
    back = mbdgen.load(r.save(tmp_path / "zoo.npz"))
    np.testing.assert_array_equal(back.reactions, r.reactions)
    np.testing.assert_array_equal(back.energy, r.energy)
    assert back.reaction_names == r.reaction_names
    header = (tmp_path / "zoo.csv").read_text() if r.save(tmp_path / "zoo.csv") else ""
    assert "kinetic,potential" in header and "pin2.link2.Fx_body" in header
    with pytest.raises(mbdgen.errors.MbdgenError, match="no reaction"):
        r.reaction("nowhere")


def test_conservative_mechanism_conserves_energy_to_the_integrator_order():
    """Planar double pendulum with RSDA springs k = 10 (no damping, no actuator): the
    drift of T + V over 1 s with ABM 4 falls like h⁴ (ratio ≥ 10 per halving) and is
    below 1e-7 of the energy scale at h = 1e-3."""
    module = mbdgen.compile(MODELS / "double_pendulum_rsda.py", GENERATED, recompile=False)
    params = {name: 0.0 for name in module.PARAMETER_NAMES if name.endswith("_c")}
    params.update({name: 10.0 for name in module.PARAMETER_NAMES if name.endswith("_k")})
    drifts = []
    for h in (2e-3, 1e-3):
        r = mbdgen.simulate(module, "abm", 4, h, 1.0, params=params, alpha=0, beta=0)
        e = r.total_energy
        drifts.append(float(np.max(np.abs(e - e[0]))))
        scale = float(np.max(np.abs(r.energy)))
    assert drifts[0] / drifts[1] > 10, drifts
    assert drifts[1] < 1e-7 * scale, (drifts, scale)
