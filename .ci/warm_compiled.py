"""Compile ahead of time, into ``$RBMCAP_CACHE``, the packages CI's timed stages stream with: the
shipped stream model as ``rbmcap live`` runs it (bfloat16 weights) for 1, 4 and 8 subjects, in
float32 for one, and live refinement's kernels for one subject.

``.ci/run`` starts it in the background beside the slow tests that time nothing and waits for it
before the timed ones, so that the timed streams find their packages compiled (on the core those
tests leave idle) instead of compiling them in their own serial stage. A package is keyed by what
it compiles (:func:`rbmcap.inference.compiled.package_path`): one that does not match what a test
builds is simply compiled again there.
"""

from __future__ import annotations

import torch

from rbmcap.inference import Predictor


def main() -> None:
    torch.set_num_threads(1)
    lab = Predictor.from_checkpoint("standin-rbm14-stream", precision="bfloat16")
    for subjects in (1, 4, 8):  # a fork builds the step from a rest frame
        lab.stream(backend="compiled", subjects=subjects).fork()
    plain = Predictor.from_checkpoint("standin-rbm14-stream")
    plain.stream(backend="compiled", refine=0.003).fork()  # refinement's kernels: at once


if __name__ == "__main__":
    main()
