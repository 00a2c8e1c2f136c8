"""Pretrained checkpoints and their cards (see :mod:`rbmcap.inference.pretrained`)."""
