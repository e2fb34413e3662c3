"""Trust boundaries on real frames (issue #21, docs/security.md).

A Mininet Pegasus rack (netkv-switch running the Pegasus pipeline, release
build and, when built, the sanitizer build; kvservers). From the client host,
the two WRITE sequences of the issue go through the switch; from server 0's
own namespace the second goes straight to its kvserver over loopback. After
each, later writes must be applied and readable, and the switch must have
counted what it refused.

Before the fix: the switch kept the client's VER (ver_next 2^64-1, then 0),
so the servers acked later writes with OK and discarded them as stale; the
sanitizer build aborted on invariant I4. kvserver computed stored + 1 = 0
after a write with VER = 2^64-1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

try:
    from test_mininet_pegasus import PREASON, _cfg, _target
except ImportError:
    from tests.test_mininet_pegasus import PREASON, _cfg, _target

pytestmark = pytest.mark.mininet
ROOT = Path(__file__).resolve().parent.parent
TOP = (1 << 64) - 1
ASAN_SWITCH = ROOT / "build" / "asan" / "hostapps" / "netkv-switch"

# Runs inside a host's namespace: python - <dst ip> <client id> <json [[op, ver, value, flags]]>
# Prints one JSON list: per request [op, result, ver, value] of its reply, or null.
SENDER = r'''
import json, socket, sys
from netkv.wire.codec import Msg, Proto, PegasusOp, decode, djb2, encode
dst, client, seq = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
key = b"trust-boundary-key"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 0))
s.settimeout(1.0)
out = []
for i, (op, ver, value, flags) in enumerate(seq):
    m = Msg(proto=Proto.PEGASUS, op=op, server_id=0, client_id=client, req_id=7000 + i,
            keyhash=djb2(key), key=key, ver=ver, value=value.encode(), flags=flags)
    got = None
    for _ in range(3):
        s.sendto(encode(m), (dst, 5047))
        try:
            while True:
                r = decode(Proto.PEGASUS, s.recv(4096))
                if r.req_id == m.req_id:
                    got = [r.op, r.result, r.ver, r.value.decode()]
                    break
            break
        except socket.timeout:
            continue
    out.append(got)
print(json.dumps(out))
'''

W, R = 1, 0  # PegasusOp.WRITE, READ
BYPASS = 1


def _run(host, script: Path, dst: str, client: int, seq: list) -> list:
    p = host.popen([sys.executable, str(script), dst, str(client), json.dumps(seq)],
                   env={"PYTHONPATH": str(ROOT)})
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err.decode()[-2000:]
    return json.loads(out.decode().strip().splitlines()[-1])


def _stat(driver, index: int) -> int:
    """A cell of the Pegasus `stats` register; -1 in a build without it."""
    from netkv.drivers.base import DriverError

    try:
        return driver.reg_read("stats", index)
    except DriverError:
        return -1


def _sequences(target, script: Path) -> dict:
    rack = target.rack
    client, server = rack.clients[0], rack.servers[0]
    from netkv.mininet.rack import node_ip

    dst, cid = node_ip(0), 0
    before = target.driver.counters()
    # 1: VER = 2^64-2, then VER = 0 (the switch's ver_next wrapped); 2: VER =
    # 2^64-1, then unstamped writes; 3: a client's BYPASS with VER = 2^64-1
    seq = [[W, TOP - 1, "a", 0], [W, 0, "b", 0], [W, 0, "c", 0], [R, 0, "", 0],
           [W, TOP, "d", 0], [W, 0, "e", 0], [W, 0, "f", 0], [R, 0, "", 0],
           [W, TOP, "g", BYPASS], [W, 0, "h", 0], [R, 0, "", 0]]
    via_switch = _run(client, script, dst, cid, seq)
    # straight to kvserver 0 over loopback (no switch on the path)
    direct = _run(server, script, "127.0.0.1", cid,
                  [[W, TOP, "x", 0], [W, 0, "y", 0], [W, 0, "z", 0], [R, 0, "", 0]])
    rack.check_alive()
    after = target.driver.counters()
    regs = {name: _stat(target.driver, i)
            for i, name in ((14, "forged_ver"), (15, "forged_flags"), (17, "ver_exhausted"))}
    return {"via_switch": via_switch, "direct": direct, "regs": regs,
            "ver_next": target.driver.reg_read("ver_next", 0),
            "pipe_drop": after["pipe_drop"] - before["pipe_drop"]}


def _check(res: dict) -> None:
    via, direct = res["via_switch"], res["direct"]
    assert all(r is not None for r in via + direct), res
    # every write acknowledged OK, and the last one is what reads return
    assert [r[1] for r in via] == [0] * len(via), res
    assert via[3][3] == "c" and via[7][3] == "f" and via[10][3] == "h", res
    assert [r[1] for r in direct] == [0, 0, 0, 0] and direct[3][3] == "z", res
    # the switch never let a client's VER near the top of the range
    assert res["ver_next"] < 1 << 32, res
    assert all(r[2] < 1 << 32 for r in via), res
    assert res["regs"]["forged_ver"] >= 3 and res["regs"]["forged_flags"] >= 1, res


def _one_rack(script: Path) -> dict:
    cfg = _cfg("pegasus", "servers=2", "clients=1", "duration=0.3", "topology.timeout_us=0")
    with _target(cfg) as target:
        assert target.rack is not None and target.driver is not None
        return _sequences(target, script)


@pytest.mark.skipif(PREASON is not None, reason=PREASON or "")
def test_forged_versions_lose_no_write_release(tmp_path) -> None:
    script = tmp_path / "send.py"
    script.write_text(SENDER)
    res = _one_rack(script)
    print(json.dumps(res))
    _check(res)


@pytest.mark.skipif(PREASON is not None or not ASAN_SWITCH.is_file(),
                    reason=PREASON or "no sanitizer build (just test-c builds build/asan)")
def test_forged_versions_lose_no_write_sanitizer(tmp_path, monkeypatch) -> None:
    """The same with the ASan/UBSan netkv-switch (NETKV_DEBUG: invariants I1-I4)."""
    import netkv.native

    real = netkv.native.program_path
    monkeypatch.setattr(netkv.native, "program_path",
                        lambda name: ASAN_SWITCH if name == "netkv-switch" else real(name))
    script = tmp_path / "send.py"
    script.write_text(SENDER)
    res = _one_rack(script)
    print(json.dumps(res))
    _check(res)


# Runs inside a host's namespace: python - <dst ip> <victim client id> <seconds>
# Forged WRITE/READ replies for the victim's likely request ids, as fast as a
# loop sends them (kvclient's ids: tag << 48 | (client + 1) << 32 | seq, and
# the low 32 bits on the wire are the sequence number).
FORGER = r'''
import socket, sys, time
from netkv.wire.codec import Msg, Proto, PegasusOp, encode
dst, victim, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 0))
end, n, seq = time.monotonic() + secs, 0, 1
while time.monotonic() < end:
    for op in (PegasusOp.WRITE_REPLY, PegasusOp.READ_REPLY):
        m = Msg(proto=Proto.PEGASUS, op=int(op), client_id=victim, req_id=seq, ver=(1 << 64) - 1,
                server_id=0, bitmap=1, key=b"k" * 16)
        s.sendto(encode(m), (dst, 5047))
        n += 1
    seq = seq + 1 if seq < 4000 else 1
    if n % 200 == 0:
        time.sleep(0.001)
print(n)
'''


@pytest.mark.skipif(PREASON is not None, reason=PREASON or "")
def test_forged_replies_are_counted_and_ignored(tmp_path) -> None:
    """Forged replies reach client 0 from its own namespace (loopback: no
    switch on the path) and from client 1 through the switch (dropped there:
    a reply from a client port). kvclient counts and ignores the first kind;
    every honest request still completes with a real reply."""
    from netkv.mininet.rack import node_ip

    script = tmp_path / "forge.py"
    script.write_text(FORGER)
    cfg = _cfg("pegasus", "servers=2", "clients=2", "duration=0.5", "topology.timeout_us=0")
    with _target(cfg) as target:
        rack = target.rack
        assert rack is not None
        env = {"PYTHONPATH": str(ROOT)}
        senders = [rack.clients[0].popen([sys.executable, str(script), "127.0.0.1", "0", "20"],
                                         env=env),
                   rack.clients[1].popen([sys.executable, str(script), node_ip(2), "0", "20"],
                                         env=env)]
        try:
            res = target.run_point(2000.0, seed=3)
        finally:
            for p in senders:
                p.kill()
                p.wait(timeout=10)
        rack.check_alive()
    print(json.dumps({"issued": res.issued, "completed": res.completed,
                      "forged_replies": res.forged_replies, "refused": res.refused}))
    assert res.issued > 500 and res.completed == res.issued
    assert res.forged_replies > 100
    assert res.refused["switch.host_server_op"] > 100
