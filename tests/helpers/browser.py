"""A real browser for the viewers' tests: Debian's chromium, headless, drawing WebGL on the CPU,
and what the tests measure in its screenshots (the 3D view is left of viser's panel)."""

from __future__ import annotations

import importlib.util
import io
import os
import time
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = Path("/usr/bin/chromium")
SOFTWARE_GL = ["--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--no-sandbox"]
"""Headless chromium draws WebGL on the CPU (SwiftShader): no GPU needed."""

VIEWPORT = {"width": 1280, "height": 800}
VIEW_RIGHT = 940
"""Pixel columns of a 1280-wide page that hold the 3D view (viser's panel is to their right)."""


def needs_browser_tools() -> None:
    """Skips without chromium, viser or playwright; fails instead in CI (``CI`` set, as
    ``.ci/run`` sets it), where a skipped browser test would let a viewer go unchecked."""
    missing = [
        what
        for what, found in (
            (f"Debian's chromium ({CHROMIUM})", CHROMIUM.exists()),
            ("viser", importlib.util.find_spec("viser")),
            ("playwright", importlib.util.find_spec("playwright")),
        )
        if not found
    ]
    if missing:
        give_up = pytest.fail if os.environ.get("CI") else pytest.skip
        give_up(f"{' and '.join(missing)} not installed: the browser test cannot run")


def view_pixels(png: bytes) -> np.ndarray:
    """(H, W, 3) int RGB of the screenshot's 3D view."""
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)[:, :VIEW_RIGHT]


def colour_mask(png: bytes, rgb, tol: int = 40) -> np.ndarray:
    """(H, W) bool: 3D-view pixels within ``tol`` of ``rgb`` in every channel."""
    return np.abs(view_pixels(png) - np.asarray(rgb)).max(axis=-1) < tol


def changed_mask(a: bytes, b: bytes, tol: int = 30) -> np.ndarray:
    """(H, W) bool: 3D-view pixels that differ by more than ``tol`` in some channel."""
    return np.abs(view_pixels(a) - view_pixels(b)).max(axis=-1) > tol


def screenshot_until(page, done, timeout_s: float = 120.0) -> bytes:
    """Screenshots every second until ``done(png)`` (software WebGL takes a while to draw)."""
    end = time.monotonic() + timeout_s
    while True:
        png = page.screenshot()
        if done(png) or time.monotonic() > end:
            return png
        time.sleep(1.0)
