"""Running trained networks: whole sequences (chunked) and frame-by-frame streams."""

from rbmcap.inference.predictor import Prediction, Predictor

__all__ = ["Prediction", "Predictor"]
