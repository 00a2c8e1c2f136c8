"""Live capture: rigid-body frames from a capture system in, each frame's SMPL pose out.

The data flow (docs/live.md):

- a **source** (:mod:`rbmcap.live.natnet` OptiTrack NatNet, :mod:`rbmcap.live.qualisys`
  Qualisys RT, :mod:`rbmcap.live.replay` a capture file) yields :class:`~rbmcap.live.frames.
  RigidBodyFrame` s (world Z up, metres, rotation matrices: the conventions of
  :class:`~rbmcap.io.capture.Capture`), read by the session's one thread;
- the **session** (:mod:`rbmcap.live.session`) takes the newest frame that has arrived
  (a slower consumer drops frames and counts them, never queues them), maps each subject's
  plates to the marker set, applies its calibration and runs its causal stream model;
- **sinks** (:mod:`rbmcap.live.sinks`) receive each subject's :class:`~rbmcap.live.frames.
  LivePose`: the browser viewer, OSC in the VMC protocol, UDP/JSON, and recordings to a motion
  ``.npz`` and BVH.
"""
