"""The Packet codec: bytes written by hand from client.proto, and the double's codec."""

from __future__ import annotations

import pytest

from agent.tunnel import packets
from agent.tunnel.packets import Packet, PacketError, PacketType
from emulator.konnectivity import packets as double_packets

# Packet{type: DATA(4), data: Data{connectID: 1, data: "hi"}}
DATA_HI = bytes([0x08, 0x04, 0x22, 0x06, 0x08, 0x01, 0x1A, 0x02, 0x68, 0x69])
# Packet{type: DIAL_REQ(0, not written), dialRequest{protocol "tcp", address "a:1", random 300}}
DIAL_REQ = bytes.fromhex("12 0d 0a 03 74 63 70 12 03 61 3a 31 18 ac 02".replace(" ", ""))
# Packet{type: DRAIN(6), drain: {}}: the empty payload message is still written.
DRAIN = bytes([0x08, 0x06, 0x42, 0x00])


def test_encodings_match_the_proto_definition() -> None:
    assert packets.encode(packets.data(1, b"hi")) == DATA_HI
    assert packets.encode(packets.dial_request("a:1", 300)) == DIAL_REQ
    assert packets.encode(packets.DRAIN) == DRAIN
    assert packets.decode(DIAL_REQ) == Packet(
        PacketType.DIAL_REQ, protocol="tcp", address="a:1", random=300
    )


EXAMPLES = [
    packets.dial_request("member1.karmada-tunnel.invalid:443", (1 << 63) - 1),
    packets.dial_response(7, connect_id=3),
    packets.dial_response(7, error="dial refused"),
    packets.data(3, bytes(range(256)) * 4),
    packets.data(300, bytes(200_000)),  # lengths of three varint bytes
    packets.Packet(PacketType.DATA, connect_id=-1, error="broken pipe", data=b"x"),
    packets.data(0, b""),
    packets.close_request(3),
    packets.close_response(3, "Unknown connectID"),
    packets.dial_close(-5),
    packets.DRAIN,
]


@pytest.mark.parametrize("packet", EXAMPLES, ids=repr)
def test_round_trip_and_agreement_with_the_double(packet: Packet) -> None:
    raw = packets.encode(packet)
    assert packets.decode(raw) == packet
    seen = double_packets.decode(raw)
    assert seen.type == packet.type
    again = packets.decode(double_packets.encode(seen))
    assert again == packet


def test_unknown_fields_are_skipped_and_garbage_refused() -> None:
    # An extra varint field 9 in the DATA payload, as a newer peer might send.
    payload = bytes([0x08, 0x01, 0x48, 0x05])
    raw = bytes([0x08, 0x04, 0x22, len(payload)]) + payload
    assert packets.decode(raw) == packets.data(1, b"")
    with pytest.raises(PacketError):
        packets.decode(b"\x08\x09")  # type 9 does not exist
    with pytest.raises(PacketError):
        packets.decode(b"\x08\x04\x22\x10\x08")  # truncated
    with pytest.raises(PacketError):
        packets.decode(b"\x08\x04\x12\x00")  # DATA type with a dialRequest payload


def test_repr_shows_sizes_not_traffic() -> None:
    assert "secret" not in repr(packets.data(1, b"secret-token"))
    assert "<12 bytes>" in repr(packets.data(1, b"secret-token"))
