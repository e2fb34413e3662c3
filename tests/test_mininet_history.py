"""Pieces of target=mininet that need no root: kvclient CSV histories ->
history.jsonl (netkv.mininet.history), and the controller's frames
(netkv.mininet.control)."""

from __future__ import annotations

import json

import pytest

from netkv.mininet.history import COLUMNS, convert, value_name

HEADER = ",".join(COLUMNS) + "\n"


def vid(tag: int, client: int, req: int) -> int:
    return tag << 48 | (client + 1) << 32 | req


def _csv(tmp_path, name: str, rows: list[str]):
    path = tmp_path / name
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return path


def test_value_names() -> None:
    assert value_name(0) is None
    assert value_name(vid(3, 1, 77)) == "w3.1.77"


def test_csv_to_history_processes_values_and_unknown_outcomes(tmp_path) -> None:
    # client 0: write (ok), a read overlapping it, a read that times out;
    # client 1: read of the written value, a read of the preloaded value
    c0 = _csv(tmp_path, "c0.csv", [
        f"0,1,w,5,100,200,{vid(1, 0, 1)},2,0,ok",
        "0,2,r,5,150,180,0,1,1,ok",
        "0,3,r,6,300,-1,0,0,-1,timeout",
        f"0,4,w,6,310,-1,{vid(1, 0, 4)},0,-1,unfinished",
    ])
    c1 = _csv(tmp_path, "c1.csv", [
        f"1,1,r,5,210,260,{vid(1, 0, 1)},2,2,ok",
        "1,2,r,7,220,250,0,1,2,not_found",
    ])
    lines = [json.loads(x) for x in convert([c0, c1])]
    assert len(lines) == 12
    inv = [x for x in lines if x["type"] == "invoke"]
    assert [x["time_ns"] for x in inv] == sorted(x["time_ns"] for x in inv)
    # client 0 has two ops open at once (t=150..180 inside 100..200): two processes
    p_w = next(x["process"] for x in inv if x["f"] == "write" and x["key"] == "k5")
    p_r = next(x["process"] for x in inv if x["f"] == "read" and x["key"] == "k5"
               and x["time_ns"] == 150)
    assert p_w != p_r
    ok_reads = {(x["key"], x["time_ns"]): x["value"] for x in lines
                if x["type"] == "ok" and x["f"] == "read"}
    assert ok_reads == {("k5", 180): None, ("k5", 260): "w1.0.1", ("k7", 250): None}
    info = [x for x in lines if x["type"] == "info"]
    assert {(x["f"], x["key"]) for x in info} == {("read", "k6"), ("write", "k6")}
    assert all(x["time_ns"] > 310 for x in info)
    # an unknown outcome's process is never reused: its invoke is that process' last
    for x in info:
        last = [y for y in inv if y["process"] == x["process"]][-1]
        assert (last["f"], last["key"]) == (x["f"], x["key"])


def test_converted_history_is_checked(tmp_path) -> None:
    from netkv.lincheck.history import parse_lines
    from netkv.lincheck.wgl import check_history

    good = _csv(tmp_path, "good.csv", [
        f"0,1,w,1,100,200,{vid(1, 0, 1)},2,0,ok",
        f"0,2,r,1,300,400,{vid(1, 0, 1)},2,0,ok",
    ])
    assert check_history(parse_lines(convert([good]))).ok
    # a read of the preloaded value after the write completed: stale
    stale = _csv(tmp_path, "stale.csv", [
        f"0,1,w,1,100,200,{vid(1, 0, 1)},2,0,ok",
        "0,2,r,1,300,400,0,1,0,ok",
    ])
    assert not check_history(parse_lines(convert([stale]))).ok


def test_bad_csv_is_refused(tmp_path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("client,req_id\n0,1\n")
    with pytest.raises(ValueError, match="not a kvclient history"):
        convert([bad])
    wrong = _csv(tmp_path, "wrong.csv", ["0,1,w,1,100,200,5,2,0,ok"])  # value id of nobody
    with pytest.raises(ValueError, match="value id"):
        convert([wrong])


def test_controller_frames_roundtrip() -> None:
    from netkv.mininet.control import build_frame, parse_frame
    from netkv.protocols import lookup
    from netkv.mininet.rack import CONTROLLER_IP, CONTROLLER_MAC, node_ip, node_mac
    from netkv.wire import codec
    from netkv.wire.codec import Msg, PegasusOp, Proto

    msg = Msg(proto=Proto.PEGASUS, op=PegasusOp.VWRITE, keyhash=1234, key=b"k" * 16,
              server_id=2, bitmap=0b1010, req_id=9)
    port = lookup("pegasus").udp_port
    frame = build_frame(codec.encode(msg), CONTROLLER_IP, CONTROLLER_MAC, node_ip(2),
                        node_mac(2), port, port, 7)
    # IPv4 header checksum verifies to 0
    ip = frame[14:34]
    s = sum(int.from_bytes(ip[i:i + 2], "big") for i in range(0, 20, 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    assert s == 0xFFFF
    src, dport, payload = parse_frame(frame)
    assert src == -1 and dport == port  # the controller is outside the node plan
    back = codec.decode(Proto.PEGASUS, payload)
    assert (back.op, back.keyhash, back.key, back.bitmap, back.server_id) == (
        msg.op, msg.keyhash, msg.key, msg.bitmap, msg.server_id)
    reply = build_frame(payload, node_ip(3), node_mac(3), CONTROLLER_IP, CONTROLLER_MAC,
                        port, port)
    assert parse_frame(reply)[0] == 3
    assert parse_frame(frame[:30]) is None
