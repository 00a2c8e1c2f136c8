"""The open stand-in body: rbmcap's own SMPL-format body model.

What it is and how it is built: docs/bodies.md#the-stand-in-body.
"""
