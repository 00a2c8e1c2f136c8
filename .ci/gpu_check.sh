#!/usr/bin/env bash
# GPU check, run by hand on a lent GPU machine (not by CI): the packaged Hydra tree from another
# directory, trainer=gpu and trainer=ddp (one device) with data made in prepare_data, then the
# predictor and the solver on CUDA. Needs the wheels of design §10's pure-Python deps in .whl/.
set -uo pipefail
REPO=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$REPO WANDB_MODE=disabled RBMCAP_CACHE=/tmp/cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -c "import torch, lightning; print('torch', torch.__version__, 'lightning', lightning.__version__, torch.cuda.is_available())"
cd /tmp
t0=$(date +%s)
python3 "$REPO/train.py" experiment=demo trainer=gpu trainer.max_epochs=2 data.generate.num=24 \
    paths.root_dir=/tmp/r_gpu trainer.enable_progress_bar=false > /tmp/gpu_train.log 2>&1
echo "trainer=gpu exit $? in $(( $(date +%s) - t0 )) s"; grep -E "epoch|best|error|Error" /tmp/gpu_train.log | tail -8
t0=$(date +%s)
python3 "$REPO/train.py" experiment=demo trainer=ddp trainer.devices=1 trainer.max_epochs=1 \
    data.generate.num=24 paths.root_dir=/tmp/r_ddp trainer.enable_progress_bar=false > /tmp/ddp_train.log 2>&1
echo "trainer=ddp exit $? in $(( $(date +%s) - t0 )) s"; grep -E "generating|epoch|best|error|Error" /tmp/ddp_train.log | tail -8
cp /tmp/gpu_train.log /tmp/ddp_train.log "$OUT"/ 2>/dev/null
python3 - <<'PY'
import glob, time, json, torch
from rbmcap.inference import Predictor
from rbmcap.dataset import RBMDataset
ckpt = sorted(glob.glob("/tmp/r_gpu/outputs/train/*/checkpoints/last.ckpt"))[-1]
ds = sorted(glob.glob("/tmp/r_gpu/data/procedural_n*"))[0]
print("ckpt", ckpt)
for dev in ("cpu", "cuda"):
    p = Predictor.from_checkpoint(ckpt, device=dev)
    s = RBMDataset(ds, "test").sequence(0)
    out = p.predict(s["rbm_pos"], s["rbm_rot"], s["rbm_valid"])
    torch.cuda.synchronize() if dev == "cuda" else None
    t = time.perf_counter(); out = p.predict(s["rbm_pos"], s["rbm_rot"], s["rbm_valid"])
    torch.cuda.synchronize() if dev == "cuda" else None
    print(dev, "predict", out.poses.shape, f"{1e3*(time.perf_counter()-t)/out.frames:.3f} ms/frame",
          "first pose", out.poses[0, 1].tolist())
PY
python3 -c "
import json
from rbmcap.bench import run_benchmark
for dev in ('cpu','cuda'):
    r = run_benchmark('baseline', quick=True, device=dev)
    print(dev, 'solver', json.dumps({k: r[k] for k in ('ms_per_frame','mpjpe_mm')}))
"
