"""``SMPLParams``: the SMPL parameters of one sequence, the one result type every method returns
(the network's predictor, the optimisation baseline, the hybrid, oracle starts).

Tensors are CPU float32 (or whatever the caller gives): ``poses`` (T, 24, 3) axis-angle local
rotations in radians (joint 0 global, world Z up), ``betas`` (B,) shape shared by the sequence,
``trans`` (T, 3) root translation in metres. Rotation matrices are derived on demand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import roma
import torch

from rbmcap.errors import DataError


@dataclass(frozen=True, eq=False)
class SMPLParams:
    """SMPL parameters of a sequence.

    Attributes:
        poses: (T, 24, 3) axis-angle local rotations (radians; joint 0 global, world Z up).
        betas: (B,) shape coefficients, one set for the whole sequence.
        trans: (T, 3) root translation (metres, world frame).
    """

    poses: torch.Tensor
    betas: torch.Tensor
    trans: torch.Tensor

    def __post_init__(self) -> None:
        p, b, t = self.poses, self.betas, self.trans
        if p.ndim != 3 or p.shape[1:] != (24, 3):
            raise DataError(f"SMPLParams: poses {tuple(p.shape)}, expected (T, 24, 3)")
        if b.ndim != 1:
            raise DataError(f"SMPLParams: betas {tuple(b.shape)}, expected (B,)")
        if t.shape != (p.shape[0], 3):
            raise DataError(f"SMPLParams: trans {tuple(t.shape)}, expected ({p.shape[0]}, 3)")

    @classmethod
    def from_rotmats(
        cls, rotmats: torch.Tensor, betas: torch.Tensor, trans: torch.Tensor
    ) -> SMPLParams:
        """From (T, 24, 3, 3) local rotation matrices."""
        return cls(roma.rotmat_to_rotvec(rotmats), betas, trans)

    @classmethod
    def from_mapping(cls, data: Mapping) -> SMPLParams:
        """From a ``poses``/``betas``/``trans`` mapping of arrays or tensors."""

        def tensor(x):
            return torch.as_tensor(np.asarray(x) if not torch.is_tensor(x) else x).float()

        return cls(tensor(data["poses"]), tensor(data["betas"]), tensor(data["trans"]))

    @property
    def frames(self) -> int:
        """Number of frames T."""
        return int(self.poses.shape[0])

    @property
    def rotmats(self) -> torch.Tensor:
        """(T, 24, 3, 3) local rotation matrices."""
        return roma.rotvec_to_rotmat(self.poses)

    def as_dict(self) -> dict[str, torch.Tensor]:
        """``poses``/``betas``/``trans`` mapping (what metrics and the solver's ``init`` take)."""
        return {"poses": self.poses, "betas": self.betas, "trans": self.trans}

    def numpy(self) -> dict[str, np.ndarray]:
        """The same as float32 numpy arrays."""
        return {k: v.detach().cpu().float().numpy() for k, v in self.as_dict().items()}

    def detach(self) -> SMPLParams:
        """A copy detached from any autograd graph, on the CPU."""
        return SMPLParams(*(v.detach().cpu() for v in (self.poses, self.betas, self.trans)))
