"""Training: the Lightning module, data module and the Hydra entry point's wiring.

* :mod:`~rbmcap.training.module` — ``RBMRegressor``, the LightningModule (no defaults of its own:
  its hyper-parameters come from the Hydra tree's ``module`` node).
* :mod:`~rbmcap.training.data` — ``RBMDataModule`` (windows of a dataset; ``prepare_data`` makes
  a missing dataset from a ``DatasetRecipe``, in one process per node).
* :mod:`~rbmcap.training.loggers` — experiment loggers from the ``logger`` group (``_target_``).
* :mod:`~rbmcap.training.run` — ``train(cfg, output_dir)``: configuration → Lightning objects.
* :mod:`~rbmcap.training.app` — the Hydra application behind ``train.py`` / ``rbmcap-train``.
"""
