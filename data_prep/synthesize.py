"""Synthesise a virtual-RBM dataset from a motion folder: the Hydra twin of ``rbmcap synth``.

    python data_prep/synthesize.py motions=data/amass markers=rbm14 realism=realistic
    python data_prep/synthesize.py motions=data/amass shard=3/16 out=data/amass_rbm14_s3

Installed as the ``rbmcap-synthesize`` command; see :mod:`rbmcap.cli.synth`.
"""

from rbmcap.cli.synth import hydra_main

if __name__ == "__main__":
    hydra_main()
