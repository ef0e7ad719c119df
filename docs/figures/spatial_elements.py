"""Draw the geometry of every spatial element of ``mbdgen.model.spatial`` (one panel each).

``python docs/figures/spatial_elements.py -o docs/figures/spatial_elements.png`` writes
the figure that docs/spatial-elements.md shows.  Notation of Haug 1989, ch. 9: body
frames x'y'z' at the origins O_i, O_j; joint points P_i, P_j given in the body frames
by s'_i, s'_j; body-fixed unit vectors h (joint axis), f, g = h × f (a frame about the
axis); d_ij = r_j + A_j s'_j − r_i − A_i s'_i from P_i to P_j.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

BODY_I, BODY_J, JOINT, VECTOR = "#1f77b4", "#d62728", "#2ca02c", "#9467bd"


def _arrow(ax, start, vec, color, label=None, lw=1.8):
    start, vec = np.asarray(start, float), np.asarray(vec, float)
    ax.quiver(*start, *vec, color=color, lw=lw, arrow_length_ratio=0.15)
    if label:
        end = start + 1.08 * vec
        ax.text(*end, label, color=color, fontsize=9)


def _frame(ax, origin, color, name, rot=None, size=0.35):
    rot = np.eye(3) if rot is None else rot
    for k, axis in enumerate("xyz"):
        _arrow(ax, origin, size * rot[:, k], color, f"{axis}'", lw=1.0)
    ax.scatter(*origin, color=color, s=18)
    ax.text(*(np.asarray(origin) - [0.1, 0.1, 0.12]), name, color=color, fontsize=9)


def _point(ax, p, color, name):
    ax.scatter(*p, color=color, s=30, depthshade=False)
    ax.text(*(np.asarray(p) + [0.04, 0.04, 0.06]), name, color=color, fontsize=9)


def _body_line(ax, a, b, color):
    a, b = np.asarray(a, float), np.asarray(b, float)
    ax.plot(*zip(a, b, strict=True), color=color, lw=5, alpha=0.25, solid_capstyle="round")


def _rot_z(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _two_bodies(ax, p_i, p_j, rot_j=None):
    """Bodies i and j with their frames and the vectors s'_i, s'_j to P_i, P_j."""
    o_i, o_j = np.array([-1.0, -0.6, 0.0]), np.array([1.0, 0.5, 0.2])
    _frame(ax, o_i, BODY_I, "O_i")
    _frame(ax, o_j, BODY_J, "O_j", rot_j)
    _body_line(ax, o_i, p_i, BODY_I)
    _body_line(ax, o_j, p_j, BODY_J)
    _arrow(ax, o_i, np.subtract(p_i, o_i), BODY_I, "s'_i")
    _arrow(ax, o_j, np.subtract(p_j, o_j), BODY_J, "s'_j")


def spherical(ax):
    p = np.zeros(3)
    _two_bodies(ax, p, p)
    _point(ax, p, JOINT, "P_i = P_j")


def distance(ax):
    p_i, p_j = np.array([-0.3, 0.0, 0.0]), np.array([0.5, 0.3, 0.6])
    _two_bodies(ax, p_i, p_j)
    _arrow(ax, p_i, p_j - p_i, JOINT, "d_ij, |d_ij| = C")
    _point(ax, p_i, BODY_I, "P_i")
    _point(ax, p_j, BODY_J, "P_j")


def _axis_joint(ax, slide, f_j=False):
    p_i, p_j = np.zeros(3), np.array([0.0, 0.0, 0.6 if slide else 0.0])
    _two_bodies(ax, p_i, p_j)
    ax.plot([0, 0], [0, 0], [-0.8, 1.3], color="k", lw=0.8, ls="--")
    _arrow(ax, p_j, [0, 0, 0.7], VECTOR, "h_i ∥ h_j")
    _arrow(ax, p_i, [0.6, 0, 0], BODY_I, "f_i")
    _arrow(ax, p_i, [0, 0.6, 0], BODY_I, "g_i")
    if f_j:
        _arrow(ax, p_j, [0, 0.6, 0], BODY_J, "g_j ⊥ f_i")
    if slide:
        _arrow(ax, p_i, p_j - p_i, JOINT, "d_ij")
        _point(ax, p_i, BODY_I, "P_i")
        _point(ax, p_j, BODY_J, "P_j")
    else:
        _point(ax, p_i, JOINT, "P")


def revolute(ax):
    _axis_joint(ax, slide=False)


def cylindrical(ax):
    _axis_joint(ax, slide=True)


def translational(ax):
    _axis_joint(ax, slide=True, f_j=True)


def universal(ax):
    p = np.zeros(3)
    _two_bodies(ax, p, p)
    _arrow(ax, p, [0.8, 0, 0], BODY_I, "h_i")
    _arrow(ax, p, [0, 0.8, 0], BODY_J, "h_j ⊥ h_i")
    _point(ax, p, JOINT, "P")


def fixed(ax):
    p = np.zeros(3)
    _two_bodies(ax, p, p)
    _arrow(ax, p, [0, 0, 0.8], VECTOR, "h_i ∥ h_j")
    _arrow(ax, p, [0.7, 0, 0], BODY_I, "f_i ∥ f_j")
    _point(ax, p, JOINT, "P")


def dot1(ax):
    _two_bodies(ax, [-0.4, 0, 0], [0.4, 0.2, 0.2])
    _arrow(ax, [-0.4, 0, 0], [0.8, 0, 0], BODY_I, "a_i")
    _arrow(ax, [0.4, 0.2, 0.2], [0, 0, 0.8], BODY_J, "a_j ⊥ a_i")


def dot2(ax):
    p_i, p_j = np.array([-0.4, 0.0, 0.0]), np.array([0.4, 0.4, 0.0])
    _two_bodies(ax, p_i, p_j)
    _arrow(ax, p_i, [0, 0, 0.8], BODY_I, "a_i ⊥ d_ij")
    _arrow(ax, p_i, p_j - p_i, JOINT, "d_ij")
    _point(ax, p_i, BODY_I, "P_i")
    _point(ax, p_j, BODY_J, "P_j")


def parallel(ax):
    _two_bodies(ax, [-0.4, 0, 0], [0.4, 0.2, 0.2])
    _arrow(ax, [-0.4, 0, 0], [0, 0, 0.8], BODY_I, "h_i")
    _arrow(ax, [0.4, 0.2, 0.2], [0, 0, 0.8], BODY_J, "h_j ∥ h_i")


def revolute_spherical(ax):
    p_i, p_j = np.zeros(3), np.array([0.7, 0.3, 0.0])
    _two_bodies(ax, p_i, p_j)
    _arrow(ax, p_i, [0, 0, 0.8], BODY_I, "h_i")
    ang = np.linspace(0, 2 * np.pi, 60)
    radius = np.linalg.norm(p_j)
    ax.plot(radius * np.cos(ang), radius * np.sin(ang), 0 * ang, color=JOINT, lw=0.8, ls=":")
    _arrow(ax, p_i, p_j, JOINT, "d_ij ⊥ h_i, |d_ij| = C")
    _point(ax, p_i, BODY_I, "P_i")
    _point(ax, p_j, BODY_J, "P_j")


def tsda(ax):
    p_i, p_j = np.array([-0.4, 0.0, 0.0]), np.array([0.6, 0.3, 0.5])
    _two_bodies(ax, p_i, p_j)
    s = np.linspace(0, 1, 200)
    axis = p_j - p_i
    normal = np.cross(axis, [0, 0, 1.0])
    normal /= np.linalg.norm(normal)
    coil = p_i[:, None] + np.outer(axis, s) + 0.06 * np.outer(normal, np.sin(2 * np.pi * 8 * s))
    ax.plot(*coil, color=JOINT, lw=1.2)
    ax.text(*(p_i + 0.5 * axis + [0, 0, 0.15]), "k, c, l0, actuator", color=JOINT, fontsize=9)
    _point(ax, p_i, BODY_I, "P_i")
    _point(ax, p_j, BODY_J, "P_j")


def rsda(ax):
    p = np.zeros(3)
    _two_bodies(ax, p, p)
    _arrow(ax, p, [0, 0, 0.8], VECTOR, "h_i ∥ h_j")
    theta = 0.9
    _arrow(ax, p, [0.7, 0, 0], BODY_I, "f_i")
    _arrow(ax, p, 0.7 * _rot_z(theta)[:, 0], BODY_J, "f_j")
    arc = np.linspace(0, theta, 30)
    ax.plot(0.35 * np.cos(arc), 0.35 * np.sin(arc), 0 * arc, color=JOINT)
    ax.text(0.42, 0.2, 0.0, "θ", color=JOINT, fontsize=11)


PANELS = [
    ("spherical", spherical, "P_i = P_j (3 rows)"),
    ("distance / spherical_spherical", distance, "|d_ij| = C (1 row)"),
    ("revolute", revolute, "P_i = P_j, h_j ⊥ f_i, g_i (5 rows)"),
    ("cylindrical", cylindrical, "h_j ⊥ f_i, g_i; d_ij ⊥ f_i, g_i (4 rows)"),
    ("translational", translational, "cylindrical + f_i ⊥ g_j (5 rows)"),
    ("universal", universal, "P_i = P_j, h_i ⊥ h_j (4 rows)"),
    ("fixed", fixed, "P_i = P_j, frames locked (6 rows)"),
    ("dot1", dot1, "a_iᵀ a_j = 0 (1 row)"),
    ("dot2", dot2, "a_iᵀ d_ij = 0 (1 row)"),
    ("parallel", parallel, "h_j ⊥ f_i, g_i (2 rows)"),
    ("revolute_spherical", revolute_spherical, "h_iᵀd_ij = 0, |d_ij| = C (2 rows)"),
    ("tsda", tsda, "force along d_ij (no rows)"),
    ("rsda / rotational_driver", rsda, "torque / θ(t) about h (0 / 1 row)"),
]


def draw(path: Path) -> Path:
    cols = 4
    rows = -(-len(PANELS) // cols)
    fig = plt.figure(figsize=(4.2 * cols, 3.8 * rows), dpi=90)
    for k, (name, painter, rows_text) in enumerate(PANELS):
        ax = fig.add_subplot(rows, cols, k + 1, projection="3d")
        painter(ax)
        ax.set_title(f"({chr(ord('a') + k)}) {name}\n{rows_text}", fontsize=10)
        ax.set_xlim(-0.9, 0.9)
        ax.set_ylim(-0.9, 0.9)
        ax.set_zlim(-0.6, 1.0)
        ax.set_box_aspect((1, 1, 0.9))
        ax.view_init(elev=22, azim=-60)
        ax.set_axis_off()
    fig.suptitle(
        "Spatial elements of mbdgen.model.spatial (Haug 1989, ch. 9): "
        "body i blue, body j red, joint quantities green",
        fontsize=12,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="spatial_elements.png")
    print(draw(Path(parser.parse_args().output)))
