"""Real captures in and results out.

Here, the captures in: readers turn an export into a :class:`~rbmcap.io.capture.Capture` (one per
format: :mod:`~rbmcap.io.vicon`, :mod:`~rbmcap.io.optitrack`, :mod:`~rbmcap.io.c3d`; format
detection in :mod:`~rbmcap.io.formats`, the capture file in :mod:`~rbmcap.io.importer`); plate
solving from marker clusters (:mod:`~rbmcap.io.plates`) and name mapping
(:mod:`~rbmcap.io.names`) make its plates those of a marker set. The folders, each what it reads
or writes:

- :mod:`rbmcap.io.exports`: a motion out (AMASS-style ``.npz``, BVH, glTF, ``.ply`` meshes, FBX
  through Blender);
- :mod:`rbmcap.io.gait`: gait-lab files beside a capture (a C3D's own angles and events, static
  landmarks, angles and events as CSV);
- :mod:`rbmcap.io.opensim`: OpenSim's files, marker maps, scaling and inverse kinematics.
"""

from rbmcap.io.capture import Capture

__all__ = ["Capture"]
