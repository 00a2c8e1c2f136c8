"""Soft-tissue motion: smooth low-frequency wobble of each plate relative to its segment."""

from __future__ import annotations

import numpy as np

from rbmcap.markers.realism.config import SoftTissueConfig


def lowpass_gain(freqs_hz: np.ndarray, bandwidth_hz: float) -> np.ndarray:
    """Amplitude response of the wobble spectrum: a Gaussian, exp(-f² / (2 bandwidth²)).

    A Gaussian spectrum gives a smooth (infinitely differentiable) process with practically no
    energy above three bandwidths, like soft tissue swinging on a segment.
    """
    return np.exp(-0.5 * (np.asarray(freqs_hz) / bandwidth_hz) ** 2)


def smooth_noise(
    rng: np.random.Generator,
    num_frames: int,
    shape: tuple[int, ...],
    fps: float,
    bandwidth_hz: float,
) -> np.ndarray:
    """Stationary Gaussian noise (T, *shape), unit variance, low-passed at ``bandwidth_hz``.

    White noise is filtered in the frequency domain (circularly) and divided by the filter's RMS
    gain, so the expected variance is exactly 1 whatever the length and bandwidth.
    """
    white = rng.normal(0.0, 1.0, (num_frames, *shape))
    gain = lowpass_gain(np.abs(np.fft.rfftfreq(num_frames, d=1.0 / fps)), bandwidth_hz)
    filtered = np.fft.irfft(
        np.fft.rfft(white, axis=0) * gain.reshape(-1, *[1] * len(shape)), n=num_frames, axis=0
    )
    rms = np.sqrt(
        np.mean(lowpass_gain(np.abs(np.fft.fftfreq(num_frames, d=1.0 / fps)), bandwidth_hz) ** 2)
    )
    return filtered / rms


def sample_wobble(
    config: SoftTissueConfig,
    num_frames: int,
    num_markers: int,
    fps: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Wobble in the plate frame: offset (T, N, 3) metres and rotation vector (T, N, 3) radians."""
    both = smooth_noise(rng, num_frames, (num_markers, 6), fps, config.bandwidth_hz)
    offset = both[..., :3] * (config.position_mm * 1e-3)
    rotvec = both[..., 3:] * np.deg2rad(config.rotation_deg)
    return offset, rotvec
