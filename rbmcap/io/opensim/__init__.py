"""OpenSim: its text files (``.trc``, ``.mot``), marker maps, the optional API, scaling and inverse
kinematics on a model, and a motion exported for it."""
