"""Animation (issue 12 §3): the geometry metadata of generated modules and the
GIF/MP4 writer.  Cheap by construction: the committed generated/ modules are only
imported (their kernels are not called) and the animated results are built here from
rigid motions; one short run of the four-bar reuses the ABM entry point that
test_faults compiles."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from click.testing import CliRunner
from conftest import GENERATED, MODELS, cli
from PIL import Image

import mbdgen
from mbdgen import geometry
from mbdgen.animation import animate
from mbdgen.cli import main
from mbdgen.codegen.geometry import _affine
from mbdgen.compiler import import_generated
from mbdgen.errors import MbdgenError, ModelError, OutputError, ResultFileError
from mbdgen.results import Result

#: Points that a consistent q0 puts together agree to round-off of O(1) coordinates.
TOL = 1e-12


@pytest.fixture(scope="module")
def chain():
    return import_generated(GENERATED / "planar_chain.py")


@pytest.fixture(scope="module")
def spatial_crank():
    return import_generated(GENERATED / "spatial_slider_crank.py")


def _world_points(module, q):
    """{element: [global point per attachment]} at configuration q."""
    geo = geometry.describe(module, module.P_DEFAULT)
    out: dict[str, list[np.ndarray]] = {}
    for p in geo["points"]:
        if p["body"] < 0:
            x = np.zeros(3)
            x[: len(p["local"])] = p["local"]
        else:
            x = geometry.world(geo["bodies"][p["body"]], q[None, :], np.array(p["local"]))[0]
        out.setdefault(p["element"], []).append(x)
    return out


def test_planar_metadata_puts_the_pendulum_pivot_and_hinges_where_they_are(chain):
    """A chain of 8 unit links lying along +x (φ0 = 0): link k's hinges at x = k and
    k + 1; the first at the ground pivot (0, 0).  Body layout [x, y, φ] per body."""
    assert list(chain.BODY_SIZES) == [3] * 8 and list(chain.BODY_OFFSETS) == list(range(0, 24, 3))
    pts = _world_points(chain, chain.Q0)
    assert len(pts["link_pin0"]) == 2  # ground and link0
    np.testing.assert_allclose(pts["link_pin0"][0], [0, 0, 0], atol=TOL)
    for k in range(8):
        for x in pts[f"link_pin{k}"]:
            np.testing.assert_allclose(x, [k, 0, 0], atol=TOL)
    geo = geometry.describe(chain, chain.P_DEFAULT)
    roles = {p["element"]: p["role"] for p in geo["points"]}
    assert roles["link_pin3"] == "joint" and [b["kind"] for b in geo["bodies"]] == ["planar"] * 8


def test_planar_points_follow_runtime_parameters(chain):
    """Geometry parameters are runtime values: half-length 0.7 moves the hinges."""
    p = chain.P_DEFAULT.copy()
    names = list(chain.PARAMETER_NAMES)
    p[names.index("link_half")], p[names.index("link_mhalf")] = 0.7, -0.7
    geo = geometry.describe(chain, p)
    link1 = {p["element"]: p["local"] for p in geo["points"] if p["body"] == 1}
    assert link1 == {"link_pin1": [-0.7, 0.0], "link_pin2": [0.7, 0.0]}


def test_spatial_metadata_joint_points_coincide_at_the_consistent_q0(spatial_crank):
    """Revolute, spherical and universal joints join two points: at the model's consistent
    q0 (Φ(q0) = 0) both attachment points of each land on one global point; layout
    [r, e0..e3] per body."""
    m = spatial_crank
    assert list(m.BODY_SIZES) == [7, 7, 7]
    pts = _world_points(m, m.Q0)
    kinds = {
        name: m.ELEMENT_TYPE_NAMES[m.ELEMENT_TYPES[i]] for i, name in enumerate(m.ELEMENT_NAMES)
    }
    checked = 0
    for name, xs in pts.items():
        if kinds[name].split("_")[0] in ("revolute", "spherical", "universal"):
            np.testing.assert_allclose(xs[0], xs[1], atol=TOL)
            checked += 1
    assert checked == 3


def test_rotation_matches_the_model_library():
    """geometry.rotation (NumPy) against mbdgen.model.spatial.A (SymPy), Haug Eq. 9.3.16."""
    from mbdgen.model import spatial

    rng = np.random.default_rng(3)
    e = rng.normal(size=(4, 4))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    ours = geometry.rotation(e)
    for k in range(4):
        ref = np.array(spatial.A(sp.Matrix(e[k])).evalf(), dtype=float)
        np.testing.assert_allclose(ours[k], ref, atol=1e-14)


def test_affine_form_of_point_coordinates():
    a, b = sp.symbols("a b")
    index = {a: 0, b: 1}
    assert _affine(2 * a - b / 2 + 3, index, {}) == (3.0, [(0, 2.0), (1, -0.5)], False)
    assert _affine(sp.Integer(0), index, {}) == (0.0, [], False)
    assert _affine(a * b, index, {a: 2.0, b: 3.0}) == (6.0, [], True)  # frozen at defaults


def _rigid_chain_result(chain, t_end=1.0, rows=101):
    """The straight chain turning rigidly about the pivot, θ = −π/2 + sin t."""
    t = np.linspace(0.0, t_end, rows)
    th = -math.pi / 2 + np.sin(t)
    q = np.zeros((rows, 24))
    for k in range(8):
        q[:, 3 * k] = (k + 0.5) * np.cos(th)
        q[:, 3 * k + 1] = (k + 0.5) * np.sin(th)
        q[:, 3 * k + 2] = th
    zeros = np.zeros((rows, 24))
    return Result(
        t=t,
        q=q,
        qd=zeros,
        qdd=zeros,
        lam=np.zeros((rows, 16)),
        phi_norm=np.zeros(rows),
        phid_norm=np.zeros(rows),
        coordinates=tuple(chain.COORDINATE_NAMES),
        info={"model": "planar_chain", "geometry": geometry.describe(chain, chain.P_DEFAULT)},
    )


def test_gif_has_the_frames_and_size_asked_for(chain, tmp_path):
    """1 s at 10 fps in real time: 11 frames; every=25 of 101 rows: 5 frames; the
    picture moves."""
    r = _rigid_chain_result(chain)
    gif = tmp_path / "chain.gif"
    out = animate(r, gif, fps=10, speed=1.0, size=(200, 150), trace=["link7:0.5,0"])
    with Image.open(out) as im:
        assert (im.n_frames, im.size) == (11, (200, 150))
        first = np.asarray(im.convert("RGB"))
        im.seek(10)
        last = np.asarray(im.convert("RGB"))
        assert im.info["duration"] == 100
    assert np.abs(first.astype(int) - last.astype(int)).sum() > 0
    r.save(tmp_path / "chain.npz")  # through a saved file, as the CLI does
    with Image.open(animate(tmp_path / "chain.npz", tmp_path / "b.gif", every=25)) as im:
        assert im.n_frames == 5 and im.size == (640, 480)


def test_a_short_run_is_slowed_down_and_speed_is_obeyed(chain, tmp_path):
    """0.5 s at 10 fps would be 6 frames (< MIN_FRAMES): slowed down to one frame per
    output row (51); speed=0.25 gives 0.5 / 0.25 · 10 + 1 = 21 frames."""
    r = _rigid_chain_result(chain, t_end=0.5, rows=51)
    with Image.open(animate(r, tmp_path / "a.gif", fps=10, size=(64, 48))) as im:
        assert im.n_frames == 51
    with Image.open(animate(r, tmp_path / "b.gif", fps=10, speed=0.25, size=(64, 48))) as im:
        assert im.n_frames == 21
    with pytest.raises(MbdgenError, match="speed or every, not both"):
        animate(r, tmp_path / "c.gif", speed=1.0, every=2)


def test_mp4_is_written_with_imageio_ffmpeg(chain, tmp_path):
    ffmpeg = pytest.importorskip("imageio_ffmpeg")
    r = _rigid_chain_result(chain, t_end=0.5, rows=51)
    out = animate(r, tmp_path / "chain.mp4", fps=20, speed=1.0, size=(161, 120))  # width: even
    reader = ffmpeg.read_frames(str(out))
    meta = next(reader)
    assert tuple(meta["size"]) == (160, 120)
    assert sum(1 for _ in reader) == 11


def test_mp4_without_imageio_ffmpeg_is_one_line(chain, tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "imageio_ffmpeg", None)
    with pytest.raises(OutputError, match="MP4 needs the imageio-ffmpeg package") as err:
        animate(_rigid_chain_result(chain), tmp_path / "x.mp4")
    assert "\n" not in str(err.value)


def test_bad_inputs_are_named(chain, tmp_path):
    r = _rigid_chain_result(chain)
    with pytest.raises(OutputError, match=r"\.gif or \.mp4 file, not \.avi"):
        animate(r, tmp_path / "x.avi")
    with pytest.raises(MbdgenError, match="no body 'crank'; the bodies are link0"):
        animate(r, tmp_path / "x.gif", trace=["crank"])
    with pytest.raises(MbdgenError, match="neither an element attached to 'link1'"):
        animate(r, tmp_path / "x.gif", trace=["link1:elbow"])
    old = _rigid_chain_result(chain)
    del old.info["geometry"]  # a result saved before results carried geometry
    old.save(tmp_path / "old.npz")
    with pytest.raises(ResultFileError, match="carries no body geometry.*run the simulation"):
        animate(tmp_path / "old.npz", tmp_path / "x.gif")
    assert animate(tmp_path / "old.npz", tmp_path / "x.gif", module=chain).exists()
    flat = _rigid_chain_result(chain)
    flat.info["geometry"] = None  # what a generalized-coordinate model's run carries
    with pytest.raises(ModelError, match="generalized coordinates and has no bodies"):
        animate(flat, tmp_path / "x.gif")
    assert not (tmp_path / "x.avi").exists()


def test_simulate_records_geometry_and_the_cli_animates_it(tmp_path):
    """End to end: a short run of the four-bar (driven crank), saved, animated by the CLI."""
    module = mbdgen.compile(MODELS / "fourbar.py", GENERATED)
    r = mbdgen.simulate(module, "abm", 4, 1e-3, 0.2)
    geo = r.info["geometry"]
    assert [b["name"] for b in geo["bodies"]] == ["crank", "coupler", "rocker"]
    assert sum(p["body"] < 0 for p in geo["points"]) == 2  # pivots A and D
    r.save(tmp_path / "fourbar.npz")
    runner = CliRunner()
    args = ["animate", str(tmp_path / "fourbar.npz"), "-o", str(tmp_path / "f.gif")]
    options = ["--trace", "coupler", "--fps", "50", "--speed", "1", "--size", "120x90"]
    res = runner.invoke(main, [*args, *options])
    assert res.exit_code == 0, res.output
    with Image.open(tmp_path / "f.gif") as im:
        assert im.n_frames == 11 and im.size == (120, 90)
    res = runner.invoke(main, [*args[:2], "-o", str(tmp_path / "f.webm")])
    assert res.exit_code == 1 and res.output.count("\n") == 1
    assert res.output.startswith("error: cannot write")
    res = runner.invoke(main, [*args, "--size", "big"])
    assert res.exit_code == 1 and "--size 'big': write WIDTHxHEIGHT" in res.output


def test_point_mass_bodies_are_drawn_at_their_position():
    """A planar point mass (IFToMM A01) has kind ``planar_point`` and q = [x, y] only:
    its attachment point is its position, and the distance element's ground point is
    the pivot (0, 0); both ends of the rod are 1 m apart at q0."""
    module = import_generated(GENERATED / "iftomm_a01_pendulum.py")
    geo = geometry.describe(module, module.P_DEFAULT)
    assert [b["kind"] for b in geo["bodies"]] == ["planar_point"]
    q0 = np.asarray(module.Q0, dtype=float)
    r, A = geometry.frames(geo["bodies"][0], q0[None, :])
    assert np.allclose(r[0, :2], q0[:2], atol=TOL) and np.allclose(A[0], np.eye(3))
    pts = [x for xs in _world_points(module, q0).values() for x in xs]
    assert any(np.linalg.norm(x) < TOL for x in pts)
    assert any(abs(np.linalg.norm(x) - 1.0) < TOL for x in pts)


def _stamps(monkeypatch) -> list[str]:
    """The time-stamp texts the renderer sets (matplotlib's Text.set_text, spied on)."""
    from matplotlib.text import Text

    seen: list[str] = []
    original = Text.set_text

    def spy(self, s):
        if str(s).startswith("t = "):
            seen.append(str(s))
        return original(self, s)

    monkeypatch.setattr(Text, "set_text", spy)
    return seen


def _durations(path) -> list[int]:
    with Image.open(path) as im:
        out = []
        for k in range(im.n_frames):
            im.seek(k)
            out.append(im.info["duration"])
    return out


def test_every_plays_in_real_time_where_the_gif_can(chain, tmp_path, monkeypatch):
    """``--every k`` plays in real time: a fixed 25 fps would run rows 0.01 s apart 4×
    slower than real time without a word on the stamp.  Rows
    0.005 s apart, every 5th: 0.025 s between frames, which GIF's 10 ms delays give as
    20/30 ms alternating, in real time over the whole run (within one 10 ms tick)."""
    stamps = _stamps(monkeypatch)
    r = _rigid_chain_result(chain, t_end=1.0, rows=201)
    gif = animate(r, tmp_path / "a.gif", every=5, size=(64, 48))
    durations = _durations(gif)
    assert len(durations) == 41 and set(durations) <= {20, 30}
    assert abs(sum(durations) - 41 * 25) <= 10
    assert stamps and not any("real time" in s for s in stamps)


def test_every_faster_than_a_gif_can_show_says_its_speed(chain, tmp_path, monkeypatch):
    """Frames 0.01 s apart need 10 ms delays, which viewers clamp: the GIF plays at its
    fastest, 20 ms (50 fps), and the stamp (its second line) and the CLI's summary say
    0.5× real time; an
    explicit --fps is obeyed and its speed said too (0.25× at 25 fps)."""
    stamps = _stamps(monkeypatch)
    r = _rigid_chain_result(chain, t_end=1.0, rows=1001)
    gif = animate(r, tmp_path / "a.gif", every=10, size=(64, 48))
    assert set(_durations(gif)) == {20}
    assert stamps[-1] == "t = 1.00 s\n(0.5× real time)"
    r.save(tmp_path / "r.npz")
    code, out = cli("animate", tmp_path / "r.npz", "-o", tmp_path / "b.gif", "--every", 10,
                    "--fps", 25, "--size", "64x48")  # fmt: skip
    assert code == 0, out
    assert out.strip() == f"wrote {tmp_path / 'b.gif'} (101 frames at 25 fps, 0.25× real time)"
    assert set(_durations(tmp_path / "b.gif")) == {40}
    assert stamps[-1] == "t = 1.00 s\n(0.25× real time)"


def test_mp4_every_takes_the_rate_of_its_frames(chain, tmp_path):
    """MP4 frame rates are rationals: frames 1/30 s apart play at 30 fps, real time."""
    ffmpeg = pytest.importorskip("imageio_ffmpeg")
    r = _rigid_chain_result(chain, t_end=1.0, rows=91)
    seen = []
    out = animate(r, tmp_path / "a.mp4", every=3, size=(64, 48), on_playback=seen.append)
    assert seen[0].fps == pytest.approx(30.0) and seen[0].speed == 1.0
    meta = next(ffmpeg.read_frames(str(out)))
    assert meta["fps"] == pytest.approx(30.0)


def test_a_gif_faster_than_50_fps_is_sampled_at_50(chain, tmp_path):
    """--fps 100 into a GIF used to sample 100 frames a second and show each for 20 ms
    (half speed, unsaid); it now samples at the 50 fps a GIF can show, in real time."""
    r = _rigid_chain_result(chain, t_end=1.0, rows=1001)
    seen = []
    gif = animate(r, tmp_path / "a.gif", fps=100, size=(64, 48), on_playback=seen.append)
    assert set(_durations(gif)) == {20} and len(_durations(gif)) == 51
    assert seen[0].fps == 50 and seen[0].speed == 1.0
