"""``rbmcap view``: load the inputs, start a viser server, build the scene and its panel, and
serve (or save a recording). viser is imported here only, so the rest of rbmcap runs without
the ``view`` extra."""

from __future__ import annotations

import webbrowser
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rbmcap.errors import ConfigError
from rbmcap.inference.capture import checkpoint_body
from rbmcap.view.gui import ViewerPanel
from rbmcap.view.layers import ViewContent
from rbmcap.view.scene import ViewScene
from rbmcap.view.skinning import SkinnedMesh, skin_motion

if TYPE_CHECKING:
    import viser

INSTALL_HINT = "the viewer needs viser: pip install 'rbmcap[view]'"


def import_viser():
    """The viser module; ConfigError naming the extra to install when it is missing."""
    try:
        import viser  # optional extra: rbmcap[view]
    except ImportError as exc:
        raise ConfigError(f"{INSTALL_HINT} ({exc})") from None
    return viser


@dataclass
class Viewer:
    """A running viewer: its server, scene and panel. ``url`` is where a browser opens it."""

    server: viser.ViserServer
    scene: ViewScene
    panel: ViewerPanel
    url: str

    def close(self) -> None:
        self.panel.close()
        self.server.stop()


def skin_layers(content: ViewContent, model: str | None = None) -> dict[str, SkinnedMesh]:
    """Body key → skinned mesh, each on its layer's body (or ``model``); each body loaded once."""
    bodies = {}
    out = {}
    for layer in content.bodies:
        if layer.body_id not in bodies:
            bodies[layer.body_id] = checkpoint_body(layer.body_id, model)
        out[layer.key] = skin_motion(bodies[layer.body_id], layer.motion)
    return out


def start_viewer(
    content: ViewContent,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    model: str | None = None,
    spread: float = 0.0,
) -> Viewer:
    """Serve ``content`` on ``host:port`` (port 0: any free port) and return the running viewer;
    ``spread`` (m) starts the bodies side by side instead of overlaid.

    Raises:
        ConfigError: viser is not installed.
    """
    viser = import_viser()
    meshes = skin_layers(content, model)
    server = viser.ViserServer(host=host, port=port, verbose=False)
    try:
        scene = ViewScene(server, content, meshes)
        panel = ViewerPanel(scene, spread=spread)
    except BaseException:
        server.stop()
        raise
    shown = "localhost" if host in ("0.0.0.0", "::") else host
    return Viewer(server, scene, panel, f"http://{shown}:{server.get_port()}")


def open_in_browser(url: str) -> None:
    """Open ``url`` in the user's browser, quietly doing nothing where there is none."""
    try:
        webbrowser.open(url, new=2)
    except webbrowser.Error:
        pass
