"""A motion out: AMASS-style ``.npz`` and the other exports of
:func:`~rbmcap.io.exports.motion.export_motion` (BVH, animated glTF, ``.ply`` meshes, FBX
through Blender)."""
