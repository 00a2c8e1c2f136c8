"""One orthographic camera shared by every panel of a comparison, so panels compare at one scale.

The camera sits at azimuth ``azim_deg`` (matplotlib's convention: the eye's direction in the
floor plane, degrees from +x toward +y) and ``elev_deg`` above the floor, looking at a floor
point that follows the truth's pelvis (:func:`rbmcap.motion.skeleton_animation.camera_centres`).
World points (metres, Z up) project to screen metres: x to the right, y up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rbmcap.motion.skeleton_animation import (
    ELEVATION_DEG,
    HALF_WIDTH,
    camera_azimuth,
    camera_centres,
)


@dataclass(frozen=True)
class Camera:
    """Orthographic camera.

    Attributes:
        azim_deg, elev_deg: where the eye is, seen from the centre (degrees).
        centres: (T, 2) floor point looked at in each frame (metres).
        half_width: metres shown either side of the centre; the view is 2·half_width tall.
    """

    azim_deg: float
    elev_deg: float
    centres: np.ndarray
    half_width: float = HALF_WIDTH

    @property
    def basis(self) -> np.ndarray:
        """(3, 3) rows: screen right, screen up, toward the eye (world frame, unit)."""
        az, el = np.radians(self.azim_deg), np.radians(self.elev_deg)
        toward = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
        right = np.array([-np.sin(az), np.cos(az), 0.0])
        return np.stack([right, np.cross(toward, right), toward])

    def project(self, points: np.ndarray, frame: int) -> np.ndarray:
        """(..., 3) world points → (..., 3): screen x, screen y (metres, the frame's centre at
        x = 0 and the floor's centre at y = 0) and depth (larger is nearer the eye)."""
        c = self.centres[frame]
        return (np.asarray(points, np.float64) - np.array([c[0], c[1], 0.0])) @ self.basis.T

    def limits(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """Screen (x, y) limits of the box ``±half_width`` around the centre, ``0 … 2·half_width``
        high: the same for every panel and frame."""
        h = self.half_width
        corners = np.array([[x, y, z] for x in (-h, h) for y in (-h, h) for z in (0.0, 2 * h)])
        screen = corners @ self.basis[:2].T
        # the floor's far corners reach well above the feet: keep the whole body, crop the rest
        lo, hi = screen.min(0), screen.max(0)
        return (lo[0] * 0.8, hi[0] * 0.8), (lo[1] * 0.8, hi[1] * 0.9)


def camera_following(joints: np.ndarray, half_width: float = HALF_WIDTH) -> Camera:
    """The camera of :func:`rbmcap.motion.skeleton_animation.render_motion` for ``joints``
    (T, 24, 3) m: beside the main direction of travel, following the pelvis when the body
    travels."""
    return Camera(camera_azimuth(joints), ELEVATION_DEG, camera_centres(joints), half_width)
