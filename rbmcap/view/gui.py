"""The viewer's panel: a timeline (frame slider, play/pause, speed), the per-frame error readout
and one visibility checkbox per layer. A background thread advances the slider while playing."""

from __future__ import annotations

import threading
import time

from rbmcap.view.frame_error import error_table, frame_errors_mm
from rbmcap.view.scene import ViewScene


class ViewerPanel:
    """GUI controls bound to ``scene`` (a :class:`ViewScene`) on its server.

    Attributes:
        frame: the timeline slider (timeline step, 0 … steps − 1); moving it poses the scene.
        playing: the play checkbox; ``errors``: body key → (steps,) MPJPE mm against the truth.
        readout: the error readout (Markdown); toggles: the layers' visibility checkboxes;
        spread: the side-by-side distance between bodies (m).
    """

    def __init__(self, scene: ViewScene, speed: float = 1.0, spread: float = 0.0) -> None:
        self.scene = scene
        gui = scene.server.gui
        content = scene.content
        self.errors = frame_errors_mm(scene.joints_per_step(), content.truth)
        self.labels = {b.key: b.label for b in content.bodies}
        gui.add_markdown(f"**{content.title}**")
        with gui.add_folder("Timeline"):
            self.frame = gui.add_slider("frame", 0, scene.steps - 1, 1, 0)
            self.playing = gui.add_checkbox("play", False, hint="play / pause (loops)")
            self.speed = gui.add_slider("speed ×", 0.1, 2.0, 0.1, float(speed))
            self.clock = gui.add_markdown(self._clock_text(0))
            self.spread = gui.add_slider("side by side (m)", 0.0, 2.0, 0.1, float(spread))
            self.spread.on_update(lambda event: scene.spread(float(event.target.value)))
            scene.spread(float(spread))
        with gui.add_folder("Error vs truth (this frame)"):
            self.readout = gui.add_markdown(error_table(self.errors, self.labels, 0))
        self.toggles = []
        with gui.add_folder("Layers"):
            for label, node in scene.toggles():
                box = gui.add_checkbox(label, True)
                box.on_update(lambda event, node=node: setattr(node, "visible", event.target.value))
                self.toggles.append(box)
        self.frame.on_update(lambda event: self.show(int(event.target.value)))
        self._stop = threading.Event()
        self._player = threading.Thread(
            target=self._play_loop, name="rbmcap-view-play", daemon=True
        )
        self._player.start()

    def show(self, step: int) -> None:
        """Pose the scene at ``step`` and update the clock and the error readout."""
        self.scene.show_step(step)
        self.clock.content = self._clock_text(step)
        self.readout.content = error_table(self.errors, self.labels, step)

    def close(self) -> None:
        """Stop the play thread."""
        self._stop.set()
        self._player.join(timeout=2.0)

    def _clock_text(self, step: int) -> str:
        fps = self.scene.fps
        return f"{step / fps:.2f} s of {self.scene.steps / fps:.2f} s · {fps:g} Hz"

    def _play_loop(self) -> None:
        """While ``play`` is ticked, step the slider at the timeline's rate times ``speed``."""
        next_tick = time.monotonic()
        while not self._stop.is_set():
            if not self.playing.value:
                self._stop.wait(0.05)
                next_tick = time.monotonic()
                continue
            self.frame.value = (int(self.frame.value) + 1) % self.scene.steps
            next_tick += 1.0 / (self.scene.fps * max(float(self.speed.value), 1e-3))
            self._stop.wait(max(0.0, next_tick - time.monotonic()))
