"""NatNet packets: encoded and decoded again per version, and refused as one-line FormatErrors
when malformed (rbmcap/live/sources/natnet_decoder.py, rbmcap/bench/natnet_encoder.py)."""

from __future__ import annotations

import struct
import timeit

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rbmcap.bench import natnet_encoder as enc
from rbmcap.errors import FormatError
from rbmcap.live.sources import natnet_decoder as nn

VERSIONS = [(3, 0), (3, 1), (4, 0), (4, 1), (4, 2)]
EXTRAS = enc.FrameExtras(
    marker_sets=(("pelvis_plate", 4), ("all", 9)),
    other_markers=3,
    skeletons=((7, 5),),
    assets=((11, 2, 3),),
    labeled_markers=6,
    force_plates=((1, (4, 4, 0)),),
    devices=((2, (3,)), (3, ())),
)


def random_frame(n: int = 14, seed: int = 0, frame: int = 1234) -> nn.FrameOfData:
    rng = np.random.default_rng(seed)
    quat = rng.normal(size=(n, 4)).astype(np.float32)
    return nn.FrameOfData(
        frame=frame,
        timestamp=frame / 120.0,
        ids=rng.permutation(np.arange(1, n + 1)).astype(np.int32),
        pos=rng.uniform(-2, 2, (n, 3)).astype(np.float32),
        quat=quat / np.linalg.norm(quat, axis=1, keepdims=True),
        tracked=rng.random(n) > 0.3,
        error=rng.uniform(0, 1e-3, n).astype(np.float32),
        params=2,
    )


def assert_same_frame(got: nn.FrameOfData, want: nn.FrameOfData) -> None:
    assert (got.frame, got.timestamp, got.params) == (want.frame, want.timestamp, want.params)
    np.testing.assert_array_equal(got.ids, want.ids)
    np.testing.assert_array_equal(got.pos, want.pos)
    np.testing.assert_array_equal(got.quat, want.quat)
    np.testing.assert_array_equal(got.tracked, want.tracked)
    np.testing.assert_array_equal(got.error, want.error)


def with_size(packet: bytes, payload: int | None = None) -> bytes:
    """``packet`` with its header's payload size set to what it holds (or ``payload``)."""
    size = len(packet) - 4 if payload is None else payload
    return packet[:2] + struct.pack("<H", size) + packet[4:]


def body(name: str, body_id: int, markers: int = 3) -> nn.RigidBodyDescription:
    return nn.RigidBodyDescription(
        name=name,
        id=body_id,
        parent_id=-1,
        offset=(0.5, -0.25, 2.0),
        rotation=(0.0, 0.0, 0.0, 1.0),
        marker_offsets=tuple((0.125 * k, 0.0, -0.5) for k in range(markers)),
        marker_labels=tuple(range(10, 10 + markers)),
        marker_names=tuple(f"{name}_m{k}" for k in range(markers)),
    )


def every_kind() -> list[enc.Description]:
    """A model definition of each kind, rigid bodies between the others."""
    return [
        enc.MarkerSetDescription("all", ("a", "b", "c")),
        body("pelvis", 1),
        enc.SkeletonDescription("actor", 40, (body("hip", 1, 2), body("spine", 2, 0))),
        enc.ForcePlateDescription(3, "FP-0001", ("Fx", "Fy", "Fz")),
        body("left foot", 7, 0),
        enc.DeviceDescription(4, "emg", "EMG-9", ("ch1", "ch2")),
        enc.CameraDescription("Prime 13 #1", (1.0, 2.0, 3.0), (0.0, 0.0, 0.0, 1.0)),
        enc.AssetDescription("trained", 12, (body("bone", 3, 1),), ("m1", "m2")),
        body("right_hand <R&D> é", 12, 5),
    ]


def expected_body(d: nn.RigidBodyDescription, version) -> nn.RigidBodyDescription:
    """What a version carries of ``d``: marker names from 4.0, its rotation from 4.2."""
    names = d.marker_names if version >= (4, 0) else ()
    rotation = d.rotation if version >= (4, 2) else (0.0, 0.0, 0.0, 1.0)
    return nn.RigidBodyDescription(
        d.name, d.id, d.parent_id, d.offset, rotation, d.marker_offsets, d.marker_labels, names
    )


# -- round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_frame_round_trips_with_every_other_section_skipped(version):
    want = random_frame()
    for packet in (enc.encode_frame(want, version, EXTRAS), enc.encode_frame(want, version)):
        assert_same_frame(nn.decode_frame(packet, version), want)
        # the fast pass alone reads every well-formed packet (no field-by-field fallback)
        assert_same_frame(nn._fast_frame(packet, version), want)


@pytest.mark.parametrize("version", VERSIONS)
def test_frame_without_rigid_bodies_decodes_to_empty_arrays(version):
    empty = random_frame(n=0)
    got = nn.decode_frame(enc.encode_frame(empty, version, EXTRAS), version)
    assert got.ids.shape == (0,) and got.pos.shape == (0, 3) and got.quat.shape == (0, 4)


@pytest.mark.parametrize("version", VERSIONS)
def test_model_definitions_keep_rigid_bodies_and_skip_every_other_kind(version):
    descriptions = every_kind()
    models = nn.decode_model_definitions(
        enc.encode_model_definitions(descriptions, version), version
    )
    bodies = [expected_body(d, version) for d in descriptions if type(d) is nn.RigidBodyDescription]
    assert models.rigid_bodies == tuple(bodies)
    assert models.kinds == (0, 1, 2, 3, 1, 4, 5, 6, 1)
    assert models.names_by_id() == {1: "pelvis", 7: "left foot", 12: "right_hand <R&D> é"}


def test_rigid_body_rotation_travels_from_natnet_4_2():
    d = nn.RigidBodyDescription("tilted", 3, rotation=(0.0, 0.5, 0.0, 0.75))
    packet = enc.encode_model_definitions([d], (4, 2))
    assert nn.decode_model_definitions(packet, (4, 2)).rigid_bodies == (d,)


@pytest.mark.parametrize("version", VERSIONS)
def test_server_info_round_trips(version):
    info = nn.ServerInfo(
        "Motive", (3, 1, 0, 2), (*version, 0, 0), 10_000_000, 1511, True, "239.255.42.99"
    )
    assert nn.decode_server_info(enc.encode_server_info(info)) == info
    assert nn.decode_server_info(enc.encode_server_info(info)).version == version


def test_server_info_without_connection_info_decodes_with_defaults():
    packet = enc.encode_server_info(nn.ServerInfo("Motive", (1, 0, 0, 0), (3, 0, 0, 0)))
    short = with_size(packet[: 4 + 264])
    assert nn.decode_server_info(short) == nn.ServerInfo("Motive", (1, 0, 0, 0), (3, 0, 0, 0))


def test_connect_and_requests_carry_their_message_ids():
    connect = nn.encode_connect((4, 1, 0, 0))
    assert nn.message_id(connect) == nn.NAT_CONNECT
    assert len(connect) == 4 + 271  # the SDK client's size: sender, options, NUL
    assert enc.decode_request(nn.encode_request(nn.NAT_KEEPALIVE)) == (nn.NAT_KEEPALIVE, "")
    assert enc.decode_request(nn.encode_request(nn.NAT_REQUEST, "Bitstream")) == (
        nn.NAT_REQUEST,
        "Bitstream",
    )


def test_frame_params_are_read_with_or_without_the_end_tag_and_precision_stamp():
    packet = enc.encode_frame(random_frame(), (4, 1))
    head, params, tag = packet[:-14], packet[-6:-4], packet[-4:]
    for suffix in (packet[-14:-4], params + tag, params):
        assert nn.decode_frame(with_size(head + suffix), (4, 1)).params == 2


# -- malformed packets ------------------------------------------------------------------------


def one_line_error(call) -> str:
    with pytest.raises(FormatError) as info:
        call()
    text = str(info.value)
    assert "\n" not in text and text.startswith("NatNet")
    return text


def test_truncated_rigid_body_names_its_byte_and_index():
    packet = enc.encode_frame(random_frame(n=14), (3, 0))
    third = 4 + 4 + 4 + 4 + 4 + 2 * nn.BODY.itemsize  # header, frame, 2 empty sections, count
    cut = with_size(packet[: third + 20])
    text = one_line_error(lambda: nn.decode_frame(cut, (3, 0)))
    assert (
        text
        == f"NatNet frame packet: truncated at byte {third} (rigid body 3 of 14: 38 bytes, 20 left)"
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_every_cut_before_the_suffix_params_is_refused(version):
    packet = enc.encode_frame(random_frame(n=3), version, EXTRAS)
    tail = 2 + 4 + (8 if version >= (4, 1) else 0)  # params, end tag, precision timestamp
    for end in range(0, len(packet) - tail):
        cut = packet[:end] if end < 4 else with_size(packet[:end])
        one_line_error(lambda: nn.decode_frame(cut, version))  # noqa: B023


def test_header_declaring_more_than_arrived_is_refused():
    packet = enc.encode_frame(random_frame(), (4, 1))
    text = one_line_error(lambda: nn.decode_frame(packet[:-1], (4, 1)))
    assert "header declares" in text


def test_other_message_is_refused_as_a_frame():
    packet = enc.encode_server_info(nn.ServerInfo("Motive", (3, 0, 0, 0), (4, 1, 0, 0)))
    assert "message id 1" in one_line_error(lambda: nn.decode_frame(packet, (4, 1)))


def test_negative_count_is_refused_with_its_offset():
    packet = bytearray(enc.encode_frame(random_frame(), (3, 0)))
    packet[8:12] = struct.pack("<i", -5)  # the marker set count
    text = one_line_error(lambda: nn.decode_frame(bytes(packet), (3, 0)))
    assert text == "NatNet frame packet: negative marker set count -5 at byte 8"


def test_rigid_body_section_of_the_wrong_size_is_refused():
    packet = bytearray(enc.encode_frame(random_frame(n=2), (4, 1)))
    packet[28:32] = struct.pack("<i", 70)  # the rigid body section's byte size (2 x 38 = 76)
    assert "2 bodies take 76" in one_line_error(lambda: nn.decode_frame(bytes(packet), (4, 1)))


def test_unknown_description_kind_is_skipped_by_size_from_4_1_and_refused_before():
    known = enc.encode_model_definitions([body("pelvis", 1)], (4, 1))
    strange = struct.pack("<iii", 2, 9, 3) + b"xyz"  # count 2; kind 9, 3 bytes
    packet = with_size(known[:4] + strange + known[8:])
    assert nn.decode_model_definitions(packet, (4, 1)).names_by_id() == {1: "pelvis"}
    old = enc.encode_model_definitions([enc.CameraDescription("c")], (4, 0))
    old = old[:8] + struct.pack("<i", 9) + old[12:]
    text = one_line_error(lambda: nn.decode_model_definitions(old, (4, 0)))
    assert text == (
        "NatNet model definitions packet: unknown description kind 9 at byte 8 (description 1 of 1)"
    )


def test_natnet_2_is_refused_as_unsupported():
    packet = enc.encode_frame(random_frame(), (3, 0))
    with pytest.raises(FormatError, match=r"NatNet 2\.9 is not supported"):
        nn.decode_frame(packet, (2, 9))


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=400), version=st.sampled_from(VERSIONS), kind=st.integers(0, 3))
def test_arbitrary_bytes_raise_nothing_but_format_error(body, version, kind):
    """Payloads behind a right header (and whole packets of noise) are decoded or refused."""
    message = [nn.NAT_FRAMEOFDATA, nn.NAT_MODELDEF, nn.NAT_SERVERINFO, None][kind]
    data = body if message is None else struct.pack("<HH", message, len(body)) + body
    for decode in (
        lambda: nn.decode_frame(data, version),
        lambda: nn.decode_model_definitions(data, version),
        lambda: nn.decode_server_info(data),
        lambda: enc.decode_request(data),
    ):
        try:
            decode()
        except FormatError as exc:
            assert "\n" not in str(exc)


@settings(max_examples=150, deadline=None)
@given(
    version=st.sampled_from(VERSIONS),
    edits=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), min_size=1, max_size=6),
)
def test_mutated_frames_decode_as_the_field_by_field_reader_does(version, edits):
    """The fast pass returns a frame only where the checked reader returns the same one."""
    packet = bytearray(enc.encode_frame(random_frame(n=4), version, EXTRAS))
    for at, value in edits:
        packet[at % len(packet)] = value
    packet = bytes(packet)
    try:
        want = nn._checked_frame(packet, version)
    except FormatError:
        with pytest.raises(FormatError):
            nn.decode_frame(packet, version)
        return
    assert_same_frame(nn.decode_frame(packet, version), want)


@settings(max_examples=200, deadline=None)
@given(version=st.sampled_from(VERSIONS), data=st.data())
def test_every_description_packet_prefix_is_refused_or_decoded(version, data):
    packet = enc.encode_model_definitions(every_kind(), version)
    end = data.draw(st.integers(4, len(packet) - 1))
    try:
        nn.decode_model_definitions(with_size(packet[:end]), version)
    except FormatError as exc:
        assert "\n" not in str(exc)


# -- speed ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [(3, 0), (4, 1)])
def test_a_14_body_frame_decodes_in_well_under_a_tenth_of_a_millisecond(version):
    packet = enc.encode_frame(random_frame(n=14), version, EXTRAS)
    best = min(timeit.repeat(lambda: nn.decode_frame(packet, version), number=200, repeat=5))
    assert best / 200 < 100e-6
