"""Issue 52, item 5: a learned correction after the network, with no optimiser at inference.

A second stage sees what the first answer's plates miss and predicts a correction, in the spirit
of iterative error feedback: for each frame, the frozen network's local joint rotations (6D) and,
per plate, the residual between the observed plate and the one the answer predicts (position in
the predicted plate's frame, rotation as a rotation vector, and whether it is seen); out come a
rotation vector per joint (R = R_network · exp(δ)) and a translation. A per-frame MLP, trained on
the frozen ``standin-rbm14``'s answers on the validation split (motions the network never trained
on: its answers on its own training split are closer than on anything new, and a correction
learnt there makes unseen motion worse), selected on a fifth of those sequences held out, scored
on the test split's CMU subject, Bandai styles and procedural protocol.

    OMP_NUM_THREADS=1 python data_prep/learned_correction.py \
        data/real_n2000_s0_b1000_rbm14_realistic outputs/correction --frames 200000 --minutes 20

Writes ``summary.json`` (MPJPE of the network alone and corrected, per set) and the weights.
An experiment: it is kept in the library only if it helps (docs/results.md#offline-refinement).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.body import load_body_model
from rbmcap.dataset import RBMDataset
from rbmcap.evaluation.sequences import Split
from rbmcap.inference import Predictor
from rbmcap.markers.synth import Synthesizer

SETS = {"cmu": "cmu-iclone/*", "bandai": "bandai/*", "procedural": "Procedural/*"}


def features(pred, obs_pos, obs_rot, obs_valid, synth) -> torch.Tensor:
    """(T, 242) inputs: the answer's local rotations in 6D (144) and per plate the residual of
    the observed plate against the predicted one: position in the predicted plate's frame (3,
    metres × 10), rotation vector (3), seen (1)."""
    poses = pred.poses.numpy()
    virt = synth(poses, pred.trans.numpy(), pred.betas.numpy())
    r_hat = torch.as_tensor(virt.rot, dtype=torch.float32)
    d_pos = torch.as_tensor(obs_pos - virt.pos, dtype=torch.float32)
    local = (r_hat.transpose(-1, -2) @ d_pos[..., None])[..., 0] * 10.0
    r_obs = torch.as_tensor(obs_rot, dtype=torch.float32)
    d_rot = roma.rotmat_to_rotvec(r_hat.transpose(-1, -2) @ r_obs)
    seen = torch.as_tensor(obs_valid, dtype=torch.float32)[..., None]
    plates = torch.cat([local * seen, d_rot * seen, seen], dim=-1).flatten(1)
    rot6 = roma.rotvec_to_rotmat(pred.poses)[..., :2].flatten(1)
    return torch.cat([rot6, plates], dim=1)


def targets(pred, poses, trans, betas, body) -> torch.Tensor:
    """(T, 75) corrections: δ_j = log(R_networkᵀ R_true) per joint, then the translation that
    puts the answer's pelvis (its own shape's) where the true one is."""
    r_net = roma.rotvec_to_rotmat(pred.poses)
    r_true = roma.rotvec_to_rotmat(torch.as_tensor(poses, dtype=torch.float32))
    delta = roma.rotmat_to_rotvec(r_net.transpose(-1, -2) @ r_true).flatten(1)
    true_betas = torch.as_tensor(np.asarray(betas, dtype=np.float32)).reshape(-1)
    with torch.no_grad():
        rest = torch.zeros(1, 24, 3)
        pelvis_true = body.pose_joints(rest, true_betas)[0][0, 0]
        pelvis_net = body.pose_joints(rest, pred.betas)[0][0, 0]
    target = torch.as_tensor(trans, dtype=torch.float32) + pelvis_true - pelvis_net
    return torch.cat([delta, target - pred.trans], dim=1)


def corrected(pred, out: torch.Tensor):
    """The answer with the correction ``out`` (T, 75) applied."""
    r = roma.rotvec_to_rotmat(pred.poses) @ roma.rotvec_to_rotmat(out[:, :72].reshape(-1, 24, 3))
    return type(pred)(roma.rotmat_to_rotvec(r), pred.betas, pred.trans + out[:, 72:])


def collect(
    data, split, predictor, synth, limit: int, seed: int, glob=None, keep_targets: bool = False
):
    """(features, targets, per-sequence items (answer, true joints, features[, targets])) over up
    to ``limit`` frames of ``split``."""
    body = synth.body
    ds = RBMDataset(data, split)
    seqs = list(Split(ds, sequences=glob))
    order = np.random.default_rng(seed).permutation(len(seqs)) if glob is None else range(len(seqs))
    xs, ys, items, frames = [], [], [], 0
    for i in order:
        seq = seqs[i]
        pos, rot, valid = (np.array(a) for a in seq.observations)
        pred = predictor.predict(pos, rot, valid)
        x = features(pred, pos, rot, valid, synth)
        truth = seq.truth
        y = targets(pred, np.array(truth["poses"]), np.array(truth["trans"]), truth["betas"], body)
        xs.append(x)
        ys.append(y)
        items.append(
            (pred, np.array(seq.joints), x, y) if keep_targets else (pred, np.array(seq.joints), x)
        )
        frames += len(pos)
        if frames >= limit:
            break
    return torch.cat(xs), torch.cat(ys), items


def mpjpe(body, items, model=None) -> float:
    """Mean per-joint error (mm) over every frame of ``items``, corrected by ``model``."""
    total, frames = 0.0, 0
    for pred, joints, x in items:
        answer = pred if model is None else corrected(pred, model(x))
        with torch.no_grad():
            pj, _ = body.pose_joints(answer.poses, answer.betas, answer.trans)
        total += float(1e3 * (pj - torch.as_tensor(joints)).norm(dim=-1).sum(-1).sum())
        frames += len(joints)
    return total / max(frames * 24, 1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("--frames", type=int, default=200_000)
    p.add_argument("--minutes", type=float, default=20.0)
    args = p.parse_args()
    torch.manual_seed(0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    body = load_body_model("standin")
    predictor = Predictor.from_checkpoint("standin-rbm14")
    synth = Synthesizer(body, "rbm14")
    t0 = time.perf_counter()
    _, _, items = collect(args.data, "val", predictor, synth, args.frames, 0, keep_targets=True)
    held = set(range(0, len(items), 5))  # every fifth sequence selects, the rest train
    fit = [it for k, it in enumerate(items) if k not in held]
    val = [it[:3] for k, it in enumerate(items) if k in held]
    x, y = torch.cat([it[2] for it in fit]), torch.cat([it[3] for it in fit])
    tests = {
        k: collect(args.data, "test", predictor, synth, 10**9, 0, g)[2] for k, g in SETS.items()
    }
    print(f"data: {len(x)} training frames in {time.perf_counter() - t0:.0f} s", flush=True)
    mean, std = x.mean(0), x.std(0) + 1e-3
    net = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, y.shape[1]),
    )
    torch.nn.init.zeros_(net[-1].weight)
    torch.nn.init.zeros_(net[-1].bias)

    def model(z):
        return net((z - mean) / std)

    weights = torch.ones(y.shape[1])
    weights[72:] = 10.0  # a centimetre of translation weighs as a tenth of a radian
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    best, step, t1 = mpjpe(body, val), 0, time.perf_counter()
    best_state = {k: v.clone() for k, v in net.state_dict().items()}  # no correction
    log = [{"step": 0, "val_mpjpe_mm": best}]
    print(f"val before: {best:.2f} mm", flush=True)
    while time.perf_counter() - t1 < 60 * args.minutes:
        for idx in torch.randperm(len(x)).split(1024):
            loss = (((model(x[idx]) - y[idx]) * weights) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
        with torch.no_grad():
            val_mm = mpjpe(body, val, model)
        log.append({"step": step, "loss": float(loss.detach()), "val_mpjpe_mm": val_mm})
        print(f"step {step}: loss {float(loss.detach()):.4f}, val {val_mm:.2f} mm", flush=True)
        if val_mm < best:
            best, best_state = val_mm, {k: v.clone() for k, v in net.state_dict().items()}
    net.load_state_dict(best_state)
    with torch.no_grad():
        summary = {
            name: {"network_mm": mpjpe(body, items), "corrected_mm": mpjpe(body, items, model)}
            for name, items in tests.items()
        }
    summary["val_best_mm"] = best
    summary["log"] = log
    summary["train_frames"] = len(x)
    summary["select_frames"] = sum(len(it[1]) for it in val)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    torch.save({"state": net.state_dict(), "mean": mean, "std": std}, out / "correction.pt")
    print(json.dumps({k: v for k, v in summary.items() if k != "log"}, indent=2))


if __name__ == "__main__":
    main()
