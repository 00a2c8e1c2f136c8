"""rbmcap's packaged configuration: the Hydra training tree (``train.yaml`` and its groups) and the
library's YAML data (marker sets, realism presets, solver configs, joint maps, motion limits and
splits). Read through :mod:`rbmcap.config`; Hydra finds it as ``pkg://rbmcap.conf``."""
