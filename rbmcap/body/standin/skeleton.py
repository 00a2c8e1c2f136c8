"""Rest skeleton of the stand-in body: an adult of about 1.72 m in SMPL's T-pose.

Coordinates are SMPL's canonical frame (metres, Y up, facing +Z, subject's left on +X), with the
pelvis near the origin as in SMPL's own template.
"""

from __future__ import annotations

import numpy as np

# fmt: off
REST_JOINTS = np.array([
    [0.000, -0.225, 0.025],   # pelvis
    [0.062, -0.310, 0.015],   # left_hip
    [-0.062, -0.310, 0.015],  # right_hip
    [0.000, -0.115, 0.000],   # spine1
    [0.095, -0.695, 0.012],   # left_knee
    [-0.095, -0.695, 0.012],  # right_knee
    [0.000, 0.025, 0.010],    # spine2
    [0.085, -1.095, -0.030],  # left_ankle
    [-0.085, -1.095, -0.030], # right_ankle
    [0.000, 0.080, 0.015],    # spine3
    [0.105, -1.150, 0.095],   # left_foot
    [-0.105, -1.150, 0.095],  # right_foot
    [0.000, 0.290, -0.015],   # neck
    [0.075, 0.200, 0.000],    # left_collar
    [-0.075, 0.200, 0.000],   # right_collar
    [0.000, 0.360, 0.035],    # head
    [0.175, 0.225, -0.015],   # left_shoulder
    [-0.175, 0.225, -0.015],  # right_shoulder
    [0.435, 0.215, -0.030],   # left_elbow
    [-0.435, 0.215, -0.030],  # right_elbow
    [0.685, 0.220, -0.030],   # left_wrist
    [-0.685, 0.220, -0.030],  # right_wrist
    [0.770, 0.215, -0.035],   # left_hand
    [-0.770, 0.215, -0.035],  # right_hand
], dtype=np.float64)
# fmt: on
