"""Draw the pictures of the docs: the stand-in body with each marker set's plates.

Run from the repository root (about a minute on a laptop CPU)::

    .venv/bin/python docs/make_images.py

It writes ``docs/images/markers_<set>.png`` for every packaged marker set and
``docs/images/overview.png`` (three poses with their rbm14 plates) for the README. It uses only
rbmcap's public API (the stand-in body, marker sets, the synthesiser, procedural motion, the mesh
renderer) and matplotlib, so the pictures show what synthesis produces.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from rbmcap.body import load_body_model
from rbmcap.body.mesh_pictures import draw_mesh
from rbmcap.markers.markerset import available_marker_sets, load_marker_set
from rbmcap.markers.synth import Synthesizer
from rbmcap.motion.procedural import generate

IMAGES = Path(__file__).resolve().parent / "images"
PLATE_HALF = 0.022
"""Half the side of a drawn plate (m); the synthesised plate is a frame, not a size."""
AXIS = 0.07
"""Length of a drawn plate axis (m)."""
AXIS_COLOURS = ("tab:red", "tab:green", "tab:blue")
MARKER_VIEWS = {
    # name: (direction toward the camera, screen up), in SMPL's canonical frame (Y up, +Z front)
    "front": ((0.35, 0.35, 0.87), (0.0, 1.0, 0.0)),
    "back": ((-0.35, 0.35, -0.87), (0.0, 1.0, 0.0)),
}
OVERVIEW_VIEW = ((-0.55, 0.75, 0.3), (0.0, 0.0, 1.0))
"""World Z up: in front of the subject (who faces +Y in the procedural motions), to its right."""


def camera(toward, up) -> np.ndarray:
    """(3, 3) matrix whose columns are the screen's right, up and toward-camera directions."""
    t = np.asarray(toward, float) / np.linalg.norm(toward)
    r = np.cross(up, t)
    r /= np.linalg.norm(r)
    return np.stack([r, np.cross(t, r), t], axis=1)


def rest_scene(body, markers):
    """Vertices (V, 3), plate positions (N, 3) and rotations (N, 3, 3) in the zero pose."""
    poses = np.zeros((1, 24, 3), np.float32)
    obs = Synthesizer(body, markers)(poses, key="rest")
    with torch.no_grad():
        verts = body(torch.zeros(1, 24, 3)).vertices[0].numpy()
    return verts, obs.pos[0], obs.rot[0]


def visible(p: np.ndarray, verts: np.ndarray, cam: np.ndarray) -> bool:
    """Whether point ``p`` (3,) is in front of the mesh ``verts`` (V, 3) seen through ``cam``:
    no vertex within 2 cm of it on screen lies more than 6 cm nearer the camera (the body's
    far side is further than that; the near edge of a hand or foot is not)."""
    screen = verts @ cam
    q = p @ cam
    near = np.linalg.norm(screen[:, :2] - q[:2], axis=1) < 0.02
    return not near.any() or screen[near, 2].max() < q[2] + 0.06


def draw_plates(ax, pos, rot, verts, cam, kind: str, numbers: bool) -> None:
    """Markers in front of the body: plates as squares in their plane with their normal (x)
    drawn, point markers as dots. ``cam`` from :func:`camera`; metres."""
    for i, (p, r) in enumerate(zip(pos, rot, strict=True)):
        if not visible(p, verts, cam) or (kind != "point" and r[:, 0] @ cam[:, 2] < -0.1):
            continue  # hidden by the body, or facing away
        if kind == "point":
            ax.plot(*(p @ cam[:, :2]), "o", ms=5, color="black", mfc="white", mew=1.5, zorder=5)
            continue
        y, z = r[:, 1] * PLATE_HALF, r[:, 2] * PLATE_HALF
        corners = np.stack([p + y + z, p - y + z, p - y - z, p + y - z]) @ cam[:, :2]
        ax.fill(*corners.T, color="0.15", zorder=5)
        tip = (p + AXIS * r[:, 0]) @ cam[:, :2]
        start = p @ cam[:, :2]
        ax.plot([start[0], tip[0]], [start[1], tip[1]], color="tab:red", lw=2, zorder=6)
        if numbers:
            box = {"boxstyle": "round,pad=0.15", "fc": "0.15", "ec": "none"}
            ax.annotate(str(i), start, xytext=(6, 6), textcoords="offset points", fontsize=9,
                        color="white", zorder=7, bbox=box)  # fmt: skip


def draw_frames(ax, pos, rot, cam) -> None:
    """Each plate as its coordinate frame: x (the skin normal) red, y green, z blue."""
    for p, r in zip(pos, rot, strict=True):
        start = p @ cam[:, :2]
        for k in range(3):
            tip = (p + AXIS * r[:, k]) @ cam[:, :2]
            ax.plot([start[0], tip[0]], [start[1], tip[1]], color=AXIS_COLOURS[k], lw=2, zorder=6)
        ax.plot(*start, "o", ms=3, color="black", zorder=7)


def frame_axes(ax, verts: np.ndarray, cam: np.ndarray, half: float) -> None:
    """Centre the body in the panel, one scale for every panel, no axes."""
    pts = verts @ cam[:, :2]
    centre = (pts.min(axis=0) + pts.max(axis=0)) / 2
    ax.set_xlim(centre[0] - half, centre[0] + half)
    ax.set_ylim(centre[1] - half, centre[1] + half)
    ax.set_aspect("equal")
    ax.axis("off")


def marker_set_picture(body, name: str, out: Path) -> Path:
    """Front and back views of the stand-in in its zero pose with the set's plates."""
    markers = load_marker_set(name)
    verts, pos, rot = rest_scene(body, markers)
    fig, axes = plt.subplots(1, 2, figsize=(9, 5.2))
    for ax, (view, (toward, up)) in zip(axes, MARKER_VIEWS.items(), strict=True):
        cam = camera(toward, up)
        draw_mesh(ax, verts @ cam, body.faces.numpy(), view="front")
        draw_plates(ax, pos, rot, verts, cam, markers.kind, numbers=markers.kind != "point")
        frame_axes(ax, verts, cam, half=0.95)
        ax.set_title(view)
    count = f"{len(markers)} {'plates' if markers.kind != 'point' else 'point markers'}"
    fig.suptitle(f"{name}: {count} on the stand-in body")
    fig.tight_layout()
    fig.savefig(out, dpi=80, bbox_inches="tight")
    plt.close(fig)
    return out


def overview_picture(body, out: Path) -> Path:
    """Three procedural poses of the stand-in with their rbm14 plates drawn as frames."""
    synth = Synthesizer(body, "rbm14")
    cam = camera(*OVERVIEW_VIEW)
    fig, axes = plt.subplots(1, 3, figsize=(10, 5))
    for ax, (kind, frame) in zip(axes, (("walk", 30), ("reach", 60), ("squat", 60)), strict=True):
        m = generate(kind, seed=0, body=body)
        poses, trans = m.poses[frame : frame + 1], m.trans[frame : frame + 1]
        obs = synth(poses, trans, m.betas, fps=m.fps, key=kind)
        with torch.no_grad():
            out_body = body(torch.as_tensor(poses), torch.as_tensor(m.betas[: body.num_betas]),
                            torch.as_tensor(trans))  # fmt: skip
        verts = out_body.vertices[0].numpy()
        draw_mesh(ax, verts @ cam, body.faces.numpy(), view="front")
        draw_frames(ax, obs.pos[0], obs.rot[0], cam)
        frame_axes(ax, verts, cam, half=0.9)
        ax.set_title(f"procedural {kind}")
    fig.suptitle("The stand-in body and its 14 plates (x: skin normal, red; y green; z blue)")
    fig.tight_layout()
    fig.savefig(out, dpi=80, bbox_inches="tight")
    plt.close(fig)
    return out


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    body = load_body_model("standin")
    for name in available_marker_sets():
        print(marker_set_picture(body, name, IMAGES / f"markers_{name}.png"))
    print(overview_picture(body, IMAGES / "overview.png"))


if __name__ == "__main__":
    main()
