"""``--save``: the whole timeline as a viser recording, which plays without Python.

``rbmcap view ... --save scene.viser`` writes two files:

- ``scene.html``: one self-contained page (viser's client with the recording inside). Open it
  in any browser (double-click, or ``chromium scene.html``); no server, no network, no Python.
- ``scene.viser``: the recording alone (viser's format: zstd-compressed msgpack of the scene
  messages with their times), for viser's client served as static files: copy viser's client
  (``viser-build-client --out-dir site/``, or the ``index.html`` of any ``scene.html``'s client
  build) and ``scene.viser`` into one folder, serve it with any static HTTP server and open
  ``http://HOST:PORT/?playbackPath=scene.viser``.

Both play the timeline with the player's own play/pause, speed and time slider, and list the
scene's layers (bodies, skeletons, plates) with visibility toggles. The per-frame error readout
is part of the live viewer only (a recording holds the scene, not the GUI).
"""

from __future__ import annotations

from pathlib import Path

from rbmcap.atomic import atomic_path, write_text_atomic
from rbmcap.errors import ConfigError
from rbmcap.view.scene import ViewScene


def recording_paths(path: str | Path) -> tuple[Path, Path]:
    """(the ``.viser`` recording, its self-contained ``.html`` page) for ``--save path``."""
    path = Path(path)
    if path.suffix not in (".viser", ".html"):
        raise ConfigError(f"--save {path}: expected a .viser (or .html) file name")
    return path.with_suffix(".viser"), path.with_suffix(".html")


def save_recording(scene: ViewScene, path: str | Path) -> tuple[Path, Path]:
    """Record every timeline step of ``scene`` (at the timeline's rate) into the ``.viser``
    recording and the ``.html`` page of :func:`recording_paths`; both written atomically.

    The scene is left at step 0.
    """
    viser_path, html_path = recording_paths(path)
    scene.show_step(0)
    recorders = [scene.server.get_scene_serializer() for _ in range(2)]
    for step in range(1, scene.steps + 1):
        for rec in recorders:
            rec.insert_sleep(1.0 / scene.fps)
        scene.show_step(step % scene.steps)
    viser_path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(viser_path) as tmp:
        Path(tmp).write_bytes(recorders[0].serialize())
    write_text_atomic(html_path, recorders[1].as_html())
    return viser_path, html_path
