"""Running trained networks: whole sequences (chunked) and frame-by-frame streams."""

from rbmcap.inference.predictor import Predictor

__all__ = ["Predictor"]
