"""Gait-lab files beside a capture: the joint angles and gait events a C3D carries, a static
trial's landmarks, and clinical angles and events written as CSV."""
