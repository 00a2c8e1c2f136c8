"""``rbmcap view``: an interactive 3D viewer in the browser (viser), for motions, captures and
evaluations side by side.

Install the extra: ``pip install 'rbmcap[view]'`` (viser). Then::

    rbmcap view outputs/eval                 # the network's worst sequence, every method
    rbmcap view outputs/eval --sequence 'cmu*'
    rbmcap view walk.npz run.npz --truth ref.npz
    rbmcap view capture.npz motion.npz       # an imported capture's plates with a motion
    rbmcap view outputs/eval --save scene.viser --no-serve

It opens http://127.0.0.1:8080 (``--host``, ``--port``; ``--no-browser`` only prints the URL):
each body (the truth grey, the network blue, the 6-DoF baseline orange, the hybrid purple, other
motions in turn) as a mesh and a skeleton; the plates as small coordinate frames (x red, y green,
z blue), a missing plate as grey axes where it was last seen; a timeline with play/pause and a
frame slider; each body's MPJPE against the truth at the current frame; a checkbox per layer.

A saved recording opens without Python: see :mod:`rbmcap.view.recording` (open ``scene.html``
in a browser).

Modules: :mod:`~rbmcap.view.layers` (inputs → layers), :mod:`~rbmcap.view.skinning` (a body as
a skinned mesh), :mod:`~rbmcap.view.plates`, :mod:`~rbmcap.view.timeline`,
:mod:`~rbmcap.view.frame_error`, :mod:`~rbmcap.view.scene` (viser nodes),
:mod:`~rbmcap.view.gui` (panel), :mod:`~rbmcap.view.recording`, :mod:`~rbmcap.view.server` (the
viser server).
"""
