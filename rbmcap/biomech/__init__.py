"""Biomechanics: clinical joint angles, gait events and their comparison with a lab's own."""
