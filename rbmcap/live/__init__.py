"""Live capture: rigid-body frames from a capture system in, each frame's SMPL pose out.

The data flow (docs/live.md):

- a **source** (:mod:`rbmcap.live.sources`: :mod:`~rbmcap.live.sources.natnet` OptiTrack
  NatNet, :mod:`~rbmcap.live.sources.qualisys` Qualisys RT, :mod:`~rbmcap.live.sources.replay` a
  capture file, opened from an address by :func:`~rbmcap.live.sources.address.open_source`)
  yields :class:`~rbmcap.live.frames.RigidBodyFrame` s (world Z up, metres, rotation matrices:
  the conventions of :class:`~rbmcap.io.capture.Capture`), read by the session's one thread;
- the **session** (:mod:`rbmcap.live.session`) takes the newest frame that has arrived
  (a slower consumer drops frames and counts them, never queues them), maps each subject's
  plates to the marker set, applies its calibration and runs its causal stream model;
- **sinks** (:mod:`rbmcap.live.sinks`) receive each subject's :class:`~rbmcap.live.frames.
  LivePose`: the browser viewer, OSC in the VMC protocol, UDP/JSON, and recordings to a motion
  ``.npz`` and BVH.

:mod:`rbmcap.live.pipeline` assembles a source, a model, subjects and sinks into a run (what
``rbmcap live`` does).
"""
