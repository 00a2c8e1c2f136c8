"""Calibration as a fit over frames on sessions with known truth: acceptance.

Each session (:mod:`helpers.scenes_static`) is a 2 s static (T-pose, A-pose or arms at the sides)
then a real CMU walk, with realistic plates and large physical offsets (every plate up to 30° and
5 cm, three of them turned 180° and moved 15 cm). What must hold:

- inference with the calibration (network ``standin-rbm14``) is nearly as good as on the clean
  virtual plates (MPJPE at most :data:`CLEAN_RATIO` times theirs over the whole take, static
  frames included) and better than without it, whatever the static, and from motion alone;
- with motion frames in the fit and the subject's shape given, each plate's offset is recovered
  to :data:`MAX_POS_MM` and :data:`MAX_ROT_DEG` (against the placement composed with the applied
  offset; the soft-tissue wobble is time-varying noise on top);
- bad input is caught: plates swapped left for right, a plate slipping mid-take, a plate unseen
  through the static each raise one :class:`~rbmcap.errors.RBMCapError` naming the plate or are
  flagged in the calibration's report (:func:`assert_caught`).

Skipped where the CMU clips are absent.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from helpers import scenes_static as S

from rbmcap.calibrate import calibrate, check_takes
from rbmcap.errors import RBMCapError

MISS = (
    "a known miss: with motion in the fit, offsets come out within about 21-26 mm and 8-13 deg "
    "at worst (10-15 mm and 4-6 deg on average), not 3 mm and 2 deg; the plates do not "
    "determine them that closely: on exact plates (no wobble, no noise) started at the truth "
    "without a pose prior they move 14.5 mm and 6 deg on average with the plates still fitted "
    "to 0.27 mm (data_prep/measure_identifiability.py; docs/results.md, docs/history.md)"
)
"""Why the offset tests below are expected to fail (strictly: one that starts passing is
reported)."""
CLEAN_RATIO = 1.15
MAX_POS_MM, MAX_ROT_DEG = 3.0, 2.0
SMOKE = {"static_frames": 60, "walk_frames": 120}  # with a T-pose
FLAG_WORDS = ("swap", "slip", "inconsistent", "missing", "not seen")
CASES = ["tpose", "apose", "sides", "motion"]
"""A static followed by the walk, each calibrated from the frames the fit chooses; ``motion``:
the T-pose session calibrated from its motion frames only."""

_CALIBRATIONS: dict = {}


def _session(case: str, **kwargs) -> S.StaticSession:
    return S.static_then_walk("tpose" if case == "motion" else case, **kwargs)


def run_calibration(case: str, *, betas_given: bool, **scene) -> tuple[object, float]:
    """(calibration, wall seconds) of session ``case``, once per process."""
    key = (case, betas_given, tuple(sorted(scene.items())))
    if key not in _CALIBRATIONS:
        session = _session(case, **scene)
        frames = [session.motion] if case == "motion" else None
        betas = session.betas if betas_given else None
        start = time.perf_counter()
        calib = calibrate(session.capture, session.synth, frames=frames, betas=betas)
        _CALIBRATIONS[key] = (calib, time.perf_counter() - start)
    return _CALIBRATIONS[key]


def frames_used(calib, session: S.StaticSession) -> str:
    """How many of the frames fitted lie in the static and in the motion (one capture)."""
    frames = np.asarray(calib.frames[0])
    static = int((frames < session.static[1]).sum())
    return f"frames fitted: {static} static, {len(frames) - static} motion"


def _split(d: dict[str, float]) -> str:
    return f"{d['whole']:.1f} (static {d['static']:.1f}, motion {d['motion']:.1f})"


def check_inference(session: S.StaticSession, calib, label: str) -> str:
    """Assert the calibrated MPJPE against the clean and the uncalibrated plates' (module
    docstring); returns the line that reports all three."""
    clean = S.mpjpe_split(S.predict(session.clean), session)
    raw = S.mpjpe_split(S.predict(session.uncalibrated), session)
    cal = S.mpjpe_split(S.predict(session.capture, calib), session)
    report = (
        f"{label}: MPJPE mm calibrated {_split(cal)}; clean plates {_split(clean)}; "
        f"uncalibrated {_split(raw)}; ratio to clean {cal['whole'] / clean['whole']:.2f} "
        f"(<= {CLEAN_RATIO})"
    )
    print(report)
    assert cal["whole"] <= CLEAN_RATIO * clean["whole"], report
    assert cal["whole"] < raw["whole"], report
    return report


def flagged(report: str, plate: str, words=FLAG_WORDS) -> bool:
    """Whether one line of ``report`` names ``plate`` with one of the flag ``words``."""
    return any(
        plate in line and any(w in line.lower() for w in words) for line in report.splitlines()
    )


def assert_caught(run, *plates: str) -> str:
    """``run()`` (a calibration) raises one RBMCapError naming one of ``plates``, or returns a
    calibration whose report flags one of them (:func:`flagged`); returns the message or the
    report. The one place to adapt to the report's wording."""
    try:
        calib = run()
    except RBMCapError as err:
        assert any(p in str(err) for p in plates), f"the error names none of {plates}: {err}"
        return str(err)
    report = str(calib.report)
    assert any(flagged(report, p) for p in plates), (
        f"none of {plates} flagged ({', '.join(FLAG_WORDS)}):\n{report}"
    )
    return report


# ------------------------------------------------------------------------------ smoke
@pytest.mark.slow  # 19 s: CI runs it in its untimed stage (.ci/run), beside make test's
def test_a_short_tpose_session_calibrates_close_to_clean_plates():
    session = _session("tpose", **SMOKE)
    calib, seconds = run_calibration("tpose", **SMOKE, betas_given=False)
    mapped = calib.apply(session.capture)
    assert mapped.names == session.capture.names and mapped.num_frames == session.capture.num_frames
    err = S.offset_errors(calib, session)
    check_inference(
        session,
        calib,
        f"smoke, betas estimated ({seconds:.1f} s, "
        f"{frames_used(calib, session)}); "
        f"{S.describe_offset_errors(err, session.names)}",
    )


def test_a_good_session_flags_no_plate():
    session = _session("tpose", **SMOKE)
    calib, _ = run_calibration("tpose", **SMOKE, betas_given=False)
    report = str(calib.report)
    bad = [n for n in session.names if flagged(report, n, ("swap", "slip", "inconsistent"))]
    assert not bad, f"flagged {bad} on a good session:\n{report}"


# ------------------------------------------------------------------------------ acceptance
@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_calibrated_inference_is_close_to_clean_plates(case):
    session = _session(case)
    calib, seconds = run_calibration(case, betas_given=False)
    err = S.offset_errors(calib, session)  # measured, not asserted: the shape trades with offsets
    check_inference(
        session,
        calib,
        f"{case}, betas estimated ({seconds:.1f} s, "
        f"{frames_used(calib, session)}); "
        f"{S.describe_offset_errors(err, session.names)}",
    )


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=MISS)
@pytest.mark.parametrize("case", CASES)
def test_offsets_are_recovered_with_the_shape_given(case):
    session = _session(case)
    calib, seconds = run_calibration(case, betas_given=True)
    err = S.offset_errors(calib, session)
    report = (
        f"{case}, betas given ({seconds:.1f} s, {frames_used(calib, session)}): "
        f"{S.describe_offset_errors(err, session.names)}"
    )
    print(report)
    assert err["pos_mm"].max() <= MAX_POS_MM, report
    assert err["rot_deg"].max() <= MAX_ROT_DEG, report


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason=MISS)
def test_a_session_in_two_captures_calibrates_like_one():
    """The static and the walk as two captures of one session give the offsets as well."""
    session = _session("apose")
    static, motion = (session.capture.frames(*r) for r in (session.static, session.motion))
    calib = calibrate([static, motion], session.synth, betas=session.betas)
    err = S.offset_errors(calib, session)
    report = f"two captures, betas given: {S.describe_offset_errors(err, session.names)}"
    print(report)
    assert err["pos_mm"].max() <= MAX_POS_MM and err["rot_deg"].max() <= MAX_ROT_DEG, report


# ------------------------------------------------------------------------------ bad input
def test_plates_swapped_left_for_right_are_caught():
    session = _session("tpose", **SMOKE)
    swapped = S.swap_plates(session.capture, "left_hand", "right_hand")
    print(assert_caught(lambda: calibrate(swapped, session.synth), "left_hand", "right_hand"))


def calibrate_and_check(capture, synth, **kwargs):
    """:func:`calibrate`, then the residuals over the whole take in ``report.takes``, as
    ``rbmcap calibrate`` does (a slip shows over the take, not on the frames fitted)."""
    calib = calibrate(capture, synth, **kwargs)
    calib.report.takes = check_takes(calib, [capture.select(list(synth.markers.names))], synth)
    return calib


@pytest.mark.slow  # the residuals over the whole take: minutes
def test_a_plate_slipping_mid_take_is_caught():
    session = _session("tpose", **SMOKE)
    slipped = S.slip_plate(session.capture, "left_thigh", session.capture.num_frames // 2)
    print(assert_caught(lambda: calibrate_and_check(slipped, session.synth), "left_thigh"))


def test_a_plate_unseen_through_the_static_is_caught():
    session = _session("tpose", **SMOKE)
    static = S.hide_plate(session.capture, "right_foot", session.static).frames(*session.static)
    print(assert_caught(lambda: calibrate(static, session.synth), "right_foot"))
