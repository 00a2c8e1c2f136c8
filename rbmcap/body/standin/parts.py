"""The stand-in body as data: the primitives whose smooth union is its skin.

Coordinates are SMPL's canonical frame (metres, Y up, facing +Z, subject's left +X); each part
names the SMPL joint whose bone carries it. Left-side parts are mirrored to the right.
"""

from __future__ import annotations

from rbmcap.body.standin.primitives import Part
from rbmcap.body.standin.skeleton import REST_JOINTS

J = [tuple(float(c) for c in row) for row in REST_JOINTS]
MIRROR_JOINT = {1: 2, 4: 5, 7: 8, 10: 11, 13: 14, 16: 17, 18: 19, 20: 21, 22: 23}

CENTRE_PARTS = (
    Part("pelvis", 0, "ellipsoid", (0.0, -0.235, 0.0), radii=(0.163, 0.13, 0.105)),
    Part("lower_abdomen", 3, "ellipsoid", (0.0, -0.105, 0.01), radii=(0.148, 0.17, 0.097)),
    Part("waist", 6, "ellipsoid", (0.0, 0.02, 0.01), radii=(0.14, 0.17, 0.093)),
    Part("chest", 9, "ellipsoid", (0.0, 0.125, 0.008), radii=(0.158, 0.15, 0.102)),
    Part("upper_back", 9, "ellipsoid", (0.0, 0.18, -0.03), radii=(0.165, 0.085, 0.075)),
    Part("neck", 12, "cone", (0.0, 0.24, -0.015), (0.0, 0.37, 0.012), radii=(0.058, 0.05)),
    Part("cranium", 15, "ellipsoid", (0.0, 0.462, 0.028), radii=(0.077, 0.1, 0.097)),
    Part("face", 15, "ellipsoid", (0.0, 0.425, 0.065), radii=(0.064, 0.085, 0.07)),
    Part("jaw", 15, "ellipsoid", (0.0, 0.39, 0.07), radii=(0.05, 0.04, 0.052)),
    Part("nose", 15, "ellipsoid", (0.0, 0.435, 0.13), radii=(0.013, 0.022, 0.018)),
)

LEFT_PARTS = (
    Part("left_buttock", 0, "ellipsoid", (0.068, -0.285, -0.055), radii=(0.08, 0.085, 0.075)),
    Part("left_pec", 9, "ellipsoid", (0.065, 0.13, 0.055), radii=(0.075, 0.06, 0.05)),
    Part("left_trapezius", 13, "ellipsoid", (0.095, 0.225, -0.02), radii=(0.09, 0.045, 0.058)),
    Part("left_deltoid", 16, "ellipsoid", (0.19, 0.215, -0.015), radii=(0.065, 0.055, 0.058)),
    Part("left_upper_arm", 16, "cone", J[16], J[18], radii=(0.05, 0.038)),
    Part("left_biceps", 16, "ellipsoid", (0.31, 0.215, -0.02), radii=(0.09, 0.042, 0.043)),
    Part("left_forearm", 18, "cone", J[18], J[20], radii=(0.038, 0.026)),
    Part("left_forearm_muscle", 18, "ellipsoid", (0.51, 0.216, -0.03), radii=(0.09, 0.037, 0.04)),
    Part("left_palm", 20, "ellipsoid", (0.728, 0.218, -0.032), radii=(0.052, 0.02, 0.043)),
    Part("left_fingers", 22, "ellipsoid", (0.815, 0.213, -0.035), radii=(0.06, 0.014, 0.04)),
    Part("left_thumb", 20, "cone", (0.71, 0.212, 0.0), (0.765, 0.205, 0.045), radii=(0.016, 0.012)),
    Part("left_ear", 15, "ellipsoid", (0.076, 0.445, 0.02), radii=(0.013, 0.028, 0.018)),
    Part("left_hip", 1, "cone", (0.072, -0.28, 0.01), J[4], radii=(0.085, 0.052)),
    Part("left_quadriceps", 1, "ellipsoid", (0.085, -0.47, 0.025), radii=(0.065, 0.15, 0.062)),
    Part("left_knee", 4, "ellipsoid", J[4], radii=(0.052, 0.06, 0.055)),
    Part("left_shin", 4, "cone", J[4], J[7], radii=(0.047, 0.033)),
    Part("left_calf", 4, "ellipsoid", (0.09, -0.82, -0.03), radii=(0.05, 0.12, 0.052)),
    Part("left_heel", 7, "ellipsoid", (0.085, -1.14, -0.05), radii=(0.034, 0.036, 0.042)),
    Part("left_foot", 7, "ellipsoid", (0.094, -1.145, 0.035), radii=(0.044, 0.032, 0.095)),
    Part("left_toes", 10, "ellipsoid", (0.108, -1.158, 0.125), radii=(0.045, 0.02, 0.045)),
)

PARTS: tuple[Part, ...] = (
    CENTRE_PARTS
    + LEFT_PARTS
    + tuple(p.mirrored(MIRROR_JOINT.get(p.joint, p.joint)) for p in LEFT_PARTS)
)
