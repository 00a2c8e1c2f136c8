"""Body models: SMPL / SMPL-H files (licence-gated, user supplied) and the open stand-in."""

from rbmcap.body.files import convert_model, locate_model_file, read_model_arrays
from rbmcap.body.load import load_body_model, standin_path
from rbmcap.body.model import BodyModel, BodyOutput

__all__ = [
    "BodyModel",
    "BodyOutput",
    "convert_model",
    "load_body_model",
    "locate_model_file",
    "read_model_arrays",
    "standin_path",
]
