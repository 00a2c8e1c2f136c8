"""Real captures in and results out.

Readers turn an export into a :class:`~rbmcap.io.capture.Capture` (one per format:
:mod:`~rbmcap.io.vicon`, :mod:`~rbmcap.io.optitrack`, :mod:`~rbmcap.io.c3d`; format detection in
:mod:`~rbmcap.io.formats`); plate solving from marker clusters and name mapping make its plates
those of a marker set; writers export results (AMASS-style ``.npz``, BVH, meshes).
"""

from rbmcap.io.capture import Capture

__all__ = ["Capture"]
