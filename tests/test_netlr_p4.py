"""p4src/netlr/netlr.p4 against netlr.c, statically (no P4 toolchain here;
names, widths, sizes and preprocessing: tests/test_p4.py):

- the stats cells are netlr.c's enum netlr_stat, in order;
- NetlrWireCheck accepts exactly what the codec decodes (golden vectors,
  every op byte, value bytes on ops without a value);
- the compile-time defines follow the params and refuse what netlr.c
  refuses; the initial registers are what netlr.c's init leaves non-zero;
- the trust rules: a client's seq, flags and epoch are cleared, a reply or
  ack from a client port is dropped.

On BMv2 (marked bmv2: skipped with one line without p4c/simple_switch_grpc),
PTF style: a client's WRITE reaches every replica stamped with seq 2, a READ
goes round-robin, a forged ack from the client's port is dropped and counted.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from netkv.pipeline import Pipeline
from netkv.protocols.netlr_p4 import p4_defines, p4_initial_registers
from netkv.protocols.plugin import parse_params
from netkv.wire import codec
from netkv.wire.codec import Proto

try:
    from test_p4 import (CLIENT, N_SERVERS, PROGRAMS, VECTORS, _strip_c_comments, c_names,
                         frame, needs_bmv2, needs_root, p4_text, rack_factory)
except ImportError:
    from tests.test_p4 import (CLIENT, N_SERVERS, PROGRAMS, VECTORS, _strip_c_comments,
                               c_names, frame, needs_bmv2, needs_root, p4_text, rack_factory)

__all__ = ["rack_factory"]   # the fixture, for the BMv2 test

C_SRC, P4_SRC, _ = PROGRAMS["netlr"]


def _p4() -> str:
    return _strip_c_comments(p4_text(P4_SRC))


def _c_stats() -> dict[str, int]:
    # the enum lives in netlr.h, shared with the Harmonia variant
    c = _strip_c_comments(C_SRC.with_name("netlr.h").read_text())
    body = c[c.index("enum netlr_stat {"):]
    names = re.findall(r"\bNL_(\w+)", body[:body.index("};")])
    assert names[0] == "READS" and names[-1] == "NSTATS"
    return {n: i for i, n in enumerate(names[:-1])}


def _p4_stats(text: str) -> dict[str, int]:
    return {n: int(v) for n, v in re.findall(r"const bit<8> NL_STAT_(\w+) = (\d+);", text)}


def test_stats_cells_are_netlr_c() -> None:
    want = _c_stats()
    assert len(want) == 15
    assert _p4_stats(_p4()) == want
    assert re.search(rf"#define NL_STAT_COUNT {len(want)}\b", _p4())
    # the check can fail: two cells swapped
    swapped = _p4().replace("NL_STAT_ACKS = 4", "NL_STAT_ACKS = 5").replace(
        "NL_STAT_STALE_ACKS = 5", "NL_STAT_STALE_ACKS = 4")
    assert _p4_stats(swapped) != want


# ---- the wire check ------------------------------------------------------------------


def _wire_rule(text: str) -> tuple[int, set[int], int]:
    """(highest op, ops carrying a value, UDP payload length) as NetlrWireCheck has them."""
    body = text[text.index("control NetlrWireCheck"):]
    body = body[:body.index("#endif")]
    consts = {n: int(v) for n, v in re.findall(r"const bit<8> (NETLR_OP_\w+) = (\d+);", text)}
    top = consts[re.search(r"op <= (NETLR_OP_\w+)", body).group(1)]   # type: ignore[union-attr]
    valued = {consts[n] for n in re.findall(r"op == (NETLR_OP_\w+)", body)}
    length = int(re.search(r"NETLR_HDR_BYTES = (\d+);", text).group(1))  # type: ignore[union-attr]
    assert "hdr.udp.length == 8 + NETLR_HDR_BYTES" in body
    return top, valued, length


def _p4_accepts(rule: tuple[int, set[int], int], payload: bytes) -> bool:
    top, valued, length = rule
    if len(payload) != length:
        return False
    return payload[0] <= top and (payload[0] in valued or not any(payload[20:36]))


def _decodes(payload: bytes) -> bool:
    try:
        codec.decode(Proto.NETLR, payload)
        return True
    except codec.WireError:
        return False


def test_wire_check_accepts_what_the_codec_decodes() -> None:
    rule = _wire_rule(_p4())
    vectors = json.loads((VECTORS / "netlr.json").read_text())
    assert any("error" in v for v in vectors) and any("error" not in v for v in vectors)
    payloads = [bytes.fromhex(v["hex"]) for v in vectors]
    write = next(bytes.fromhex(v["hex"]) for v in vectors
                 if v["name"] == "netlr/WRITE (client, unstamped)")
    for op in range(256):
        payloads.append(bytes([op]) + write[1:])                  # with value bytes
        payloads.append(bytes([op]) + write[1:20] + bytes(16))    # without
    payloads += [write + b"\0", write[:-1]]
    for p in payloads:
        assert _p4_accepts(rule, p) == _decodes(p), p.hex()
    # the check can fail: a program that lets value bytes through on a READ
    top, _, length = rule
    loose = (top, set(range(256)), length)
    assert not all(_p4_accepts(loose, p) == _decodes(p) for p in payloads)


# ---- defines and the initial registers --------------------------------------------------


@pytest.mark.parametrize(("knobs", "want"), [
    ("", {"NL_SLOTS": 131072, "NL_STRICT": 1, "NL_ACK_SUPERSEDED": 0, "NL_STAMP": 0,
          "NL_COLLISION_NACK": 0, "NL_CHAIN": 0, "NL_HARMONIA": 0, "NL_DEDUP": 1}),
    ("mode=paper;slots=64;replication=cr",
     {"NL_SLOTS": 64, "NL_STRICT": 0, "NL_ACK_SUPERSEDED": 0, "NL_STAMP": 0,
      "NL_COLLISION_NACK": 0, "NL_CHAIN": 1, "NL_HARMONIA": 0, "NL_DEDUP": 1}),
    ("slots=1;ack_superseded=1;stamp=1;collision_nack=1;dedup=0",
     {"NL_SLOTS": 1, "NL_STRICT": 1, "NL_ACK_SUPERSEDED": 1, "NL_STAMP": 1,
      "NL_COLLISION_NACK": 1, "NL_CHAIN": 0, "NL_HARMONIA": 0, "NL_DEDUP": 0}),
    ("replication=hermes",   # the switch forwards only, as for CR
     {"NL_SLOTS": 131072, "NL_STRICT": 1, "NL_ACK_SUPERSEDED": 0, "NL_STAMP": 0,
      "NL_COLLISION_NACK": 0, "NL_CHAIN": 1, "NL_HARMONIA": 0, "NL_DEDUP": 1}),
    ("replication=harmonia",  # netlr_harmonia.c: the dirty set, reads routed
     {"NL_SLOTS": 131072, "NL_STRICT": 1, "NL_ACK_SUPERSEDED": 0, "NL_STAMP": 0,
      "NL_COLLISION_NACK": 0, "NL_CHAIN": 0, "NL_HARMONIA": 1, "NL_DEDUP": 1}),
])
def test_defines_size_the_registers_as_c_does(knobs: str, want: dict[str, int]) -> None:
    assert p4_defines(parse_params(knobs)) == want
    with Pipeline("netlr", n_servers=4, n_clients=1, params=knobs) as p:
        for reg in ("dset", "lseq", "CRep", "NumCRep", "MaxSeq", "AckMask"):
            p.reg_read(reg, want["NL_SLOTS"] - 1)
            with pytest.raises(Exception, match="range"):
                p.reg_read(reg, want["NL_SLOTS"])


@pytest.mark.parametrize("knobs", ["slots=3", "slots=0", "slots=2097152", "mode=lax",
                                   "replication=pb"])
def test_defines_refuse_what_netlr_c_refuses(knobs: str) -> None:
    with pytest.raises(ValueError, match="netlr"):
        p4_defines(parse_params(knobs))
    with pytest.raises(Exception):
        with Pipeline("netlr", n_servers=4, n_clients=1, params=knobs):
            pass


@pytest.mark.parametrize(("n", "knobs"), [(1, ""), (4, ""), (8, ""), (4, "boot_empty=1")])
def test_initial_registers_are_what_c_init_leaves_non_zero(n: int, knobs: str) -> None:
    regs, _ = c_names(C_SRC)
    want = p4_initial_registers(n, parse_params(knobs))
    with Pipeline("netlr", n_servers=n, n_clients=1, params=f"slots=4;{knobs}") as p:
        got = {(r, 0): p.reg_read(r, 0) for r in sorted(regs) if r != "stats"}
        got.update({(r, i): p.reg_read(r, i) for r in ("dset", "lseq", "CRep", "NumCRep",
                                                         "MaxSeq", "AckMask") for i in range(4)})
    assert {(r, i): v for r, i, v in want} == {k: v for k, v in got.items() if v}
    with pytest.raises(ValueError, match="replicas"):
        p4_initial_registers(9, {})


# ---- the trust rules ---------------------------------------------------------------------


def _trust_rules(text: str) -> tuple[bool, bool]:
    """(a client's non-request is dropped and counted, a client's seq, flags
    and epoch are cleared and counted) in the ingress."""
    dropped = re.search(r"meta\.origin == ORIGIN_CLIENT && !request\)\s*\{[^}]*"
                        r"stat\(NL_STAT_HOST_SERVER_OP\);\s*meta\.fwd = FWD_DROP;", text)
    m = re.search(r"if \(meta\.origin == ORIGIN_CLIENT\) \{(.*?)\n                \}", text, re.S)
    cleared = bool(m) and all(f"hdr.netlr.{f} = 0;" in m.group(1)        # type: ignore[union-attr]
                              for f in ("seq", "flags", "epoch")) \
        and "stat(NL_STAT_FORGED_FIELDS)" in m.group(1)                   # type: ignore[union-attr]
    return bool(dropped), cleared


def test_trust_rules_are_netlr_c_s() -> None:
    c = _strip_c_comments(C_SRC.read_text())
    assert "NL_HOST_SERVER_OP" in c and "m->epoch = 0;" in c
    assert _trust_rules(_p4()) == (True, True)
    assert _trust_rules(_p4().replace("hdr.netlr.epoch = 0;", "")) == (True, False)
    assert _trust_rules(_p4().replace("!request)", "false)")) == (False, True)


# ---- BMv2 ---------------------------------------------------------------------------------


def _nl_frame(m: codec.Msg, src: int, dst: int) -> bytes:
    return frame(src, dst, codec.encode(m), sport=40000 if src == CLIENT else 1234,
                 dport=1234 if dst < N_SERVERS else 40000)


@needs_bmv2
@needs_root
def test_write_multicast_read_round_robin_forged_ack_dropped(rack_factory: Any) -> None:
    """Every replica live (the controller's tables): a client's WRITE (forged
    seq cleared) reaches each replica addressed to it with seq 2; two READs
    go to replicas 0 then 1; an ack sent from the client's port is dropped
    and counted."""
    params = {"slots": "64"}
    rack = rack_factory("netlr", p4_defines(params), params)
    assert rack.drv is not None
    for i in range(N_SERVERS):
        rack.drv.table_add("get_dst_rep_table", [i], [i])
    rack.drv.mcast_set(1, list(range(N_SERVERS)))
    vectors = {v["name"]: v for v in json.loads((VECTORS / "netlr.json").read_text())}
    w = codec.decode(Proto.NETLR,
                     bytes.fromhex(vectors["netlr/WRITE (client, unstamped)"]["hex"]))
    forged = dataclasses.replace(w, ver=77, epoch=0, flags=0)
    got = rack.send(CLIENT, _nl_frame(forged, CLIENT, 0))
    stamped = dataclasses.replace(w, ver=2, epoch=0, flags=0)
    assert got == {r: [_nl_frame(stamped, CLIENT, r)] for r in range(N_SERVERS)}
    assert rack.drv.reg_read("stats", 12) == 1
    r = codec.decode(Proto.NETLR, bytes.fromhex(vectors["netlr/READ"]["hex"]))
    r = dataclasses.replace(r, key=b"\0\0\0\x07")     # a clean key
    for rep in (0, 1):
        assert rack.send(CLIENT, _nl_frame(r, CLIENT, 3)) == {rep: [_nl_frame(r, CLIENT, rep)]}
    ack = dataclasses.replace(stamped, op=codec.NetlrOp.W_REPLY, value=b"")
    assert rack.send(CLIENT, _nl_frame(ack, CLIENT, CLIENT)) == {}
    assert rack.drv.reg_read("stats", 10) == 1
