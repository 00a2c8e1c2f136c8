"""Training: the Lightning module, data module and the Hydra entry point's wiring.

* :mod:`~rbmcap.training.module` — ``RegressorLitModule``, the LightningModule training the model
  (:class:`~rbmcap.model.regressor.PoseRegressor`, held as ``model``; no defaults of its own:
  its hyper-parameters come from the Hydra tree's ``module`` node).
* :mod:`~rbmcap.training.data` — ``RBMDataModule`` (windows of a dataset; ``prepare_data`` makes
  a missing dataset from a ``MotionRecipe``, in one process per node).
* :mod:`~rbmcap.training.schedule` — the learning-rate schedule (warm-up, then step decay).
* :mod:`~rbmcap.training.loggers` — experiment loggers from the ``logger`` group (``_target_``).
* :mod:`~rbmcap.training.guards` — a NaN or infinite loss stops the run (DataError naming the
  epoch, step and loss term); no checkpoint holds NaN weights; checkpoints are written atomically.
* :mod:`~rbmcap.training.run` — ``train(cfg, output_dir)``: configuration → Lightning objects
  through ``hydra.utils.instantiate``. ``last.ckpt`` is written after every validation;
  ``ckpt_path=.../last.ckpt`` resumes a killed run, and the resumed run ends bit-identical to an
  uninterrupted one on CPU (the training order and the batches' randomness depend only on the
  seed, the epoch and the batch).
* :mod:`~rbmcap.training.app` — the Hydra application behind ``train.py`` / ``rbmcap-train``.
"""
