"""Train an RBM → SMPL regression network.

    python train.py                              # defaults: procedural data on the stand-in
    python train.py experiment=demo              # the CPU demo (a few minutes)
    python train.py experiment=paper_rbm14 trainer=gpu
    python train.py experiment=demo trainer.max_epochs=20 ckpt_path=outputs/.../last.ckpt

The same application is installed as the ``rbmcap-train`` command. Configuration is the packaged
Hydra tree ``rbmcap/conf`` (groups: data, markers, model, loss, optim, scheduler, trainer,
logger, experiment, paths); see :mod:`rbmcap.training.app`.
"""

from rbmcap.training.app import main

if __name__ == "__main__":
    main()
