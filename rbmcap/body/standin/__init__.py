"""The open stand-in body: rbmcap's own SMPL-format body model (design §3)."""
