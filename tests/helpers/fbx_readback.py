"""An FBX file read back by an independent reader, ufbx (not Blender's importer):
``python fbx_readback.py FILE.fbx`` prints one JSON object: the file's unit (metres per unit),
up axis, frame rate, frame count, every bone's name and parent, its bind pose's world rotation and
at each frame its world rotation and position, in the file's own axes and units.

Run by a Python that has the ``ufbx`` bindings (the tests run it in the Blender environment,
which has numpy < 2); it uses only ufbx and the standard library.
"""

import json
import os
import sys

import ufbx


def rotation(m) -> list:
    """The 3 × 3 rotation of a ufbx affine matrix (columns c0, c1, c2), as rows."""
    cols = [m.c0, m.c1, m.c2]
    return [[c.x for c in cols], [c.y for c in cols], [c.z for c in cols]]


_KEPT = []
"""ufbx wrappers kept alive to the end: the bindings (0.0.5) crash when one is freed early."""


def binds(scene) -> dict:
    """Each skinned bone's bind-pose world rotation (every wrapper held in a local: the
    bindings crash on attributes of a freed temporary)."""
    out = {}
    for cluster in list(scene.skin_clusters):
        node = cluster.bone_node
        matrix = cluster.bind_to_world
        out[node.name] = rotation(matrix)
        _KEPT.append((cluster, node, matrix))
    return out


def main(path: str) -> None:
    scene = ufbx.load_file(path)
    settings = scene.settings
    stack = scene.anim_stacks[0]
    fps = settings.frames_per_second
    frames = round((stack.time_end - stack.time_begin) * fps) + 1
    bones = [n for n in scene.nodes if n.bone is not None]
    names = [b.name for b in bones]
    ups = [b.parent for b in bones]
    parents = [u.name if u is not None else None for u in ups]
    _KEPT.append((scene, settings, stack, bones, ups))
    bind = binds(scene)
    header = {
        "unit_meters": settings.unit_meters,
        "up": str(settings.axes.up),
        "fps": fps,
        "frames": frames,
        "bones": names,
        "parents": parents,
        "bind": [bind.get(n) for n in names],
    }
    worlds, positions = [], []
    anim = stack.anim
    for f in range(frames):
        evaluated = ufbx.evaluate_scene(scene, anim, stack.time_begin + f / fps)
        nodes = [evaluated.find_node(n) for n in names]
        matrices = [node.node_to_world for node in nodes]
        columns = [(m.c0, m.c1, m.c2, m.c3) for m in matrices]
        _KEPT.append((evaluated, nodes, matrices, columns))
        worlds.append([[[c.x, c.y, c.z] for c in cols[:3]] for cols in columns])
        positions.append([[cols[3].x, cols[3].y, cols[3].z] for cols in columns])
    # columns, not rows: as rows, like the bind rotations
    worlds = [[[list(r) for r in zip(*m)] for m in frame] for frame in worlds]
    out = {**header, "world": worlds, "position": positions}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
    # ufbx 0.0.5's Python bindings crash when an evaluated scene is freed, at exit too (a
    # segmentation fault after everything is read): leave without freeing
    os._exit(0)
