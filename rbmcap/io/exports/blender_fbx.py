"""Blender's side of ``rbmcap export fbx``: run by a Python that has ``bpy`` (Blender's own, or
the ``bpy`` wheel in an environment of its own), never imported by rbmcap.

``python blender_fbx.py PAYLOAD.npz OUT.fbx`` (or ``blender -b --python blender_fbx.py --
PAYLOAD.npz OUT.fbx``) builds, in an empty scene, the skinned body the payload describes
(:func:`rbmcap.io.exports.fbx.fbx_payload`) and writes it with Blender's FBX exporter:

- an armature of the 24 SMPL joints, each bone from its joint towards its child (its rest frame
  the bone's, Blender's usual), in the rest pose the payload gives (the body's T pose, upright);
- the body's mesh at the subject's shape, skinned to it (one vertex group per joint, the
  model's linear-blend weights);
- the motion as keyframes of every bone's rotation (quaternions) and the root's location, one per
  frame at the motion's rate;
- FBX's conventions for DCC tools: Y up, −Z forward, centimetres, no leaf bones.

It uses only bpy, numpy and the standard library (this environment is not rbmcap's).
"""

import sys

import bpy
import numpy as np
from mathutils import Quaternion, Vector


def main(payload_path: str, out_path: str) -> None:
    data = np.load(payload_path)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.unit_settings.system = "METRIC"
    scene.unit_settings.scale_length = 0.01  # 1 unit = 1 cm: the file needs no scale anywhere
    fps = float(data["fps"])
    scene.render.fps = max(1, round(fps))
    scene.render.fps_base = scene.render.fps / fps
    scene.frame_start, scene.frame_end = 1, len(data["rotations"])
    armature = _armature(scene, data)
    _body(scene, data, armature)
    _keys(armature, data)
    bpy.ops.export_scene.fbx(
        filepath=out_path,
        object_types={"ARMATURE", "MESH"},
        axis_forward="-Z",
        axis_up="Y",
        apply_unit_scale=True,
        apply_scale_options="FBX_SCALE_UNITS",
        add_leaf_bones=False,
        bake_anim=True,
        bake_anim_use_all_actions=False,
        bake_anim_use_nla_strips=False,
        bake_anim_simplify_factor=0.0,
        bake_anim_step=1.0,
        use_armature_deform_only=True,
    )


CM = 100.0
"""Centimetres per metre: the payload is in metres, the scene in centimetres."""


def _armature(scene, data):
    """The armature of the payload's joints, each bone from its joint along its tail offset."""
    names = [str(n) for n in data["names"]]
    joints = CM * data["rest_joints"]  # (24, 3), Blender's Z-up world, upright
    arm_data = bpy.data.armatures.new("smpl")
    armature = bpy.data.objects.new("smpl", arm_data)
    scene.collection.objects.link(armature)
    bpy.context.view_layer.objects.active = armature
    bpy.ops.object.mode_set(mode="EDIT")
    for j, name in enumerate(names):
        bone = arm_data.edit_bones.new(name)
        bone.head = joints[j]
        bone.tail = joints[j] + CM * data["tails"][j]
        if data["parents"][j] >= 0:
            bone.parent = arm_data.edit_bones[names[int(data["parents"][j])]]
    bpy.ops.object.mode_set(mode="OBJECT")
    return armature


def _body(scene, data, armature) -> None:
    """The body's mesh, one vertex group per joint with its skin weights, deformed by the
    armature."""
    mesh = bpy.data.meshes.new("body")
    mesh.from_pydata((CM * data["vertices"]).tolist(), [], data["faces"].tolist())
    mesh.update()
    body = bpy.data.objects.new("body", mesh)
    scene.collection.objects.link(body)
    weights = data["weights"]  # (V, 24)
    for j, name in enumerate(str(n) for n in data["names"]):
        group = body.vertex_groups.new(name=name)
        for v in np.nonzero(weights[:, j] > 0)[0]:
            group.add([int(v)], float(weights[v, j]), "REPLACE")
    body.parent = armature
    body.modifiers.new("armature", "ARMATURE").object = armature


def _keys(armature, data) -> None:
    """A key a frame: each bone's rotation (its joint's rotation seen in the bone's rest frame,
    basis = M⁻¹ A M with A the joint's local rotation in the armature's axes, in double
    precision) and the root's location (likewise in its rest frame)."""
    names = [str(n) for n in data["names"]]
    rest = {
        b.name: np.array(b.matrix_local.to_3x3(), dtype=np.float64) for b in armature.data.bones
    }
    previous = {}
    for name in names:
        armature.pose.bones[name].rotation_mode = "QUATERNION"
    root = armature.pose.bones[names[0]]
    for f in range(len(data["rotations"])):
        for j, name in enumerate(names):
            m = rest[name]
            q = Quaternion(_quaternion(m.T @ data["rotations"][f, j] @ m))
            if name in previous and q.dot(previous[name]) < 0:
                q.negate()  # q and −q are one rotation: keys on one hemisphere interpolate short
            previous[name] = q
            pose = armature.pose.bones[name]
            pose.rotation_quaternion = q
            pose.keyframe_insert("rotation_quaternion", frame=f + 1)
        root.location = Vector((rest[names[0]].T @ (CM * data["offsets"][f])).tolist())
        root.keyframe_insert("location", frame=f + 1)


def _quaternion(r: np.ndarray) -> list:
    """(w, x, y, z) of a rotation matrix, in double precision (Shepperd's method)."""
    t = np.trace(r)
    k = int(np.argmax([t, r[0, 0], r[1, 1], r[2, 2]]))
    if k == 0:
        s = 2.0 * np.sqrt(1.0 + t)
        q = [0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s]
    else:
        i, j, n = k - 1, k % 3, (k + 1) % 3
        s = 2.0 * np.sqrt(1.0 + r[i, i] - r[j, j] - r[n, n])
        q = [0.0, 0.0, 0.0, 0.0]
        q[0] = (r[n, j] - r[j, n]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (r[j, i] + r[i, j]) / s
        q[1 + n] = (r[n, i] + r[i, n]) / s
    q = np.array(q)
    return (q / np.linalg.norm(q)).tolist()


if __name__ == "__main__":
    argv = sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else sys.argv[1:]
    main(argv[0], argv[1])
