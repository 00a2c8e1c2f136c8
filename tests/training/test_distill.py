"""Distillation: a causal GRU starts from a transformer teacher's layers and learns its
representation besides the truth; the teacher is neither trained nor saved."""

from __future__ import annotations

import pytest
import torch
from helpers.observations import random_observations
from helpers.training import small_model, small_module

from rbmcap.errors import ConfigError
from rbmcap.training import distill
from rbmcap.training.distill import Teacher, last_layer_norm, output_layer


def _trained_like(model, seed: int):
    with torch.no_grad():
        for p in model.net.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(seed)))
    return model


@pytest.fixture()
def teacher(standin):
    return _trained_like(small_model(standin, "transformer", "features=reach"), 1).eval()


def _windows(frames: int = 24):
    pos, rot, valid = random_observations(frames)
    return tuple(torch.as_tensor(x)[None] for x in (pos, rot, valid))


def test_the_student_starts_from_the_teachers_input_norm_and_output_layers(standin, teacher):
    student = small_model(standin, "causal_gru", "features=reach")
    copied = Teacher(teacher, student, 1.0).initialise(student)
    assert copied == ["input projection", "last layer norm", "output layer"]
    pairs = [
        (teacher.net.input_proj, student.net.input_proj),
        (last_layer_norm(teacher.net), last_layer_norm(student.net)),
        (output_layer(teacher.net, teacher.out_dim), output_layer(student.net, student.out_dim)),
    ]
    for src, dst in pairs:
        for k, v in src.state_dict().items():
            assert torch.equal(dst.state_dict()[k], v)


def test_the_student_learns_the_teachers_representation(standin, teacher):
    """Steps on the distillation term alone bring the student's last normalised representation
    towards the teacher's on the same windows; the teacher's weights do not move."""
    student = small_model(standin, "causal_gru", "features=reach").train()
    guide = Teacher(teacher, student, 1.0)
    before_teacher = [p.clone() for p in teacher.parameters()]
    pos, rot, valid = _windows()
    opt = torch.optim.Adam(student.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        student(pos, rot, valid)
        loss = guide.loss(pos, rot, valid)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert all(torch.equal(a, b) for a, b in zip(before_teacher, teacher.parameters()))


def test_a_teacher_on_other_features_or_widths_is_refused(standin, teacher):
    with pytest.raises(ConfigError, match="features"):
        Teacher(teacher, small_model(standin, "causal_gru", "features=bones"), 1.0)
    wider = small_model(standin, "causal_gru", "features=reach", "model.hidden_dim=48")
    with pytest.raises(ConfigError, match="representation"):
        Teacher(teacher, wider, 1.0)


def test_a_distilled_module_adds_the_weighted_term_and_saves_no_teacher(
    standin, teacher, monkeypatch
):
    """A training step of a module that names a teacher: its total is the truth's terms plus
    the weighted distillation term; its state holds the student only."""
    monkeypatch.setattr(distill, "load_model", lambda spec: teacher)
    plain = small_module(standin, "causal_gru", "features=reach")
    module = small_module(
        standin, "causal_gru", "features=reach", "distill.teacher=mine", "distill.weight=2.0"
    )
    assert module.state_dict().keys() == plain.state_dict().keys()
    assert module.hparams["distill"]["teacher"] == "mine"
    pos, rot, valid = _windows()
    truth = {
        "pos": pos,
        "rot": rot,
        "valid": valid,
        "poses": torch.zeros(1, 24, 24, 3),
        "trans": torch.zeros(1, 24, 3),
        "joints": torch.zeros(1, 24, 24, 3),
        "betas": torch.zeros(1, 10),
    }
    seen = {}
    original = module._losses

    def losses(out, batch):
        terms, joints = original(out, batch)
        seen["truth"] = terms["total"].item()
        return terms, joints

    def taught(*args):
        seen["distill"] = teach(*args).item()
        return torch.tensor(seen["distill"])

    module._losses, teach, module.teacher.loss = losses, module.teacher.loss, taught
    total = module.training_step(truth, 0)
    assert seen["distill"] > 0
    assert total.item() == pytest.approx(seen["truth"] + 2.0 * seen["distill"], rel=1e-5)
