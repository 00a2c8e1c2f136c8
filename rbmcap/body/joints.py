"""``JointModel``: the body's 24 SMPL joints as a function of pose, shape and translation.

A few kilobytes (rest joints and their shape directions), so networks and solvers can carry it in
checkpoints and evaluate posed joints without the mesh; agrees with the full forward's joints.
"""

from __future__ import annotations

import torch

from rbmcap.geometry import forward_kinematics
from rbmcap.skeleton import SMPL_PARENTS


class JointModel(torch.nn.Module):
    """Posed SMPL joints from local rotations.

    Args:
        joint_template: (24, 3) rest joints at zero betas, canonical frame, metres.
        joint_shapedirs: (24, 3, B) change of the rest joints per unit beta.
    """

    def __init__(self, joint_template: torch.Tensor, joint_shapedirs: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("joint_template", joint_template.detach().clone())
        self.register_buffer("joint_shapedirs", joint_shapedirs.detach().clone())

    @classmethod
    def from_body(cls, body) -> JointModel:
        """The joint model of a :class:`rbmcap.body.BodyModel` (SMPL view of any kind), its joint
        offsets (:meth:`~rbmcap.body.BodyModel.with_joint_offsets`) included."""
        idx = body._joint_map
        return cls((body._joint_template + body._joint_offsets)[idx], body._joint_shapedirs[idx])

    @property
    def num_betas(self) -> int:
        return int(self.joint_shapedirs.shape[-1])

    def rest_joints(self, betas: torch.Tensor) -> torch.Tensor:
        """(..., 24, 3) rest joints for betas (..., B') (B' ≤ B; missing betas are zero)."""
        nb = betas.shape[-1]
        return self.joint_template + torch.einsum(
            "jcb,...b->...jc", self.joint_shapedirs[..., :nb], betas
        )

    def forward(
        self, rotmats: torch.Tensor, betas: torch.Tensor, trans: torch.Tensor | None = None
    ):
        """Posed joints (..., 24, 3) for local rotations (..., 24, 3, 3), betas (..., B), trans."""
        _, joints = forward_kinematics(rotmats, self.rest_joints(betas), SMPL_PARENTS)
        return joints if trans is None else joints + trans[..., None, :]
