"""What to render, from the command line's inputs: an evaluation output folder (one of its saved
sequences) or plain motion files side by side.

The body that poses them is the evaluation's (read from the saved sequence's body identity: the
stand-in, or the model file it was loaded from), or the one given.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

from rbmcap.body import load_body_model
from rbmcap.errors import DataError, ModelError
from rbmcap.evaluation.saved import load_sequences, worst_sequence
from rbmcap.motion.kinematics import standin_body
from rbmcap.motion.smpl_motion import SMPLMotion
from rbmcap.render.comparison import Comparison, comparison_from_motions, comparison_from_sequence


def load_comparison(
    inputs: list[str | Path],
    *,
    sequence: str | None = None,
    methods: list[str] | None = None,
    body: str | None = None,
) -> Comparison:
    """One evaluation folder (its ``sequence``, default the network's worst; ``methods``, default
    all) or one or more motion ``.npz`` files."""
    paths = [Path(p) for p in inputs]
    if len(paths) == 1 and paths[0].is_dir():
        seq = pick_sequence(paths[0], sequence)
        return comparison_from_sequence(seq, body_for(seq.body, seq.gender, body), methods)
    if sequence is not None or methods is not None:
        raise DataError(
            "--sequence and --methods choose from an `rbmcap eval` output folder, "
            "not from motion files"
        )
    folders = [str(p) for p in paths if p.is_dir()]
    if folders:
        raise DataError(f"{', '.join(folders)}: give one evaluation folder alone, or motion files")
    motions = [SMPLMotion.load(p) for p in paths]
    return comparison_from_motions(motions, body_for("standin", motions[0].gender, body))


def pick_sequence(folder: Path, name: str | None):
    """The saved sequence ``name`` (an exact name or a glob matching one sequence) of an
    evaluation folder; by default the one where the network's MPJPE is largest (or the first,
    when the folder has no network scores)."""
    saved = load_sequences(folder)  # DataError first when it is no evaluation folder
    if name is None:
        try:
            name = worst_sequence(folder)
        except DataError:
            return saved[0]
    found = [s for s in saved if s.name == name] or [s for s in saved if fnmatchcase(s.name, name)]
    if len(found) != 1:
        names = ", ".join(s.name for s in (found or saved)[:6])
        what = f"matches {len(found)} sequences" if found else "matches no sequence; it has"
        raise DataError(f"{folder}: {name!r} {what} ({names}{', ...' if len(saved) > 6 else ''})")
    return found[0]


def body_for(identity: str, gender: str, override: str | None = None):
    """The body model named by ``override`` (a path or 'standin'), or else by a body identity
    (``standin-v1/neutral``, ``smpl:/path/model.npz/male``) at ``gender``."""
    if override is not None:
        return load_body_model(override, gender=gender)
    if identity.startswith("standin"):
        return standin_body(gender)
    source = identity.split(":", 1)[-1].rsplit("/", 1)[0]
    try:
        return load_body_model(source, gender=gender)
    except (ModelError, OSError) as exc:
        raise ModelError(
            f"body model {identity!r} of the evaluation cannot be loaded ({exc}); pass --body PATH"
        ) from exc
