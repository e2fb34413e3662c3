"""netkv-switch started closed (``--closed``), as a target restarts it after
an outage: every frame from a port is dropped and counted (``closed``), the
pipeline never runs (Pegasus' ``ver_next`` does not move), until the
control socket's ``open``; then it forwards as always (docs/mininet.md
"Switch outages"). Two veth pairs in a namespace of their own, the switch
on one end of each; needs root. And the order in which a target restarts a
switch: closed, the controller's start, the flush, then open."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from netkv.native import NativeBuildMissing, program_path

needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="netkv-switch opens AF_PACKET ports (needs root)")

# Runs inside the namespace: python - SEND_IF RECV_IF COUNT; prints how many
# of the COUNT frames sent on SEND_IF came out on RECV_IF
SENDER = r'''
import socket, sys, time
from netkv.mininet.control import build_frame
from netkv.mininet.rack import node_ip, node_mac
from netkv.protocols import lookup
from netkv.wire.codec import Msg, PegasusOp, Proto, encode
send_if, recv_if, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
port = lookup("pegasus").udp_port
rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
rx.bind((recv_if, 0))
rx.settimeout(0.5)
tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
tx.bind((send_if, 0))
for i in range(count):   # client (node 1) writes to its home, server 0
    msg = Msg(proto=Proto.PEGASUS, op=PegasusOp.WRITE, server_id=0, client_id=0,
              req_id=1000 + i, keyhash=0xC105ED, key=b"closed", value=b"v")
    tx.send(build_frame(encode(msg), node_ip(1), node_mac(1), node_ip(0), node_mac(0),
                        port, port, i))
got, end = 0, time.monotonic() + 1.0
while time.monotonic() < end:
    try:
        f = rx.recv(2048)
    except socket.timeout:
        break
    got += b"closed" in f
print(got)
'''


def _switch() -> str:
    try:
        return str(program_path("netkv-switch"))
    except NativeBuildMissing as exc:
        pytest.skip(str(exc))


def _ns(ns: str, *cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *cmd], check=True, capture_output=True,
                          text=True, timeout=30)


@dataclass
class Exited:
    returncode: int | None = None
    out: str = ""


@contextmanager
def _pegasus_switch(tmp_path: Path, name: str, *args: str) -> Iterator[tuple[Any, Any, Exited]]:
    """netkv-switch running Pegasus (a server, a client) on two veth pairs in
    a namespace of its own, h<i> (the host's end) <-> s<i> (switch port i):
    (the namespace's name, its driver, how it exited once stopped)."""
    from netkv.drivers.netkv_switch import NetkvSwitchDriver

    ns = f"{name}{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    proc, exited = None, Exited()
    try:
        for i in (0, 1):
            _ns(ns, "ip", "link", "add", f"h{i}", "type", "veth", "peer", "name", f"s{i}")
            for end in (f"h{i}", f"s{i}"):
                _ns(ns, "sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6=1")
                _ns(ns, "ip", "link", "set", end, "up")
        ctl = tmp_path / "switch.sock"
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, _switch(), "--protocol", "pegasus", "--servers", "1",
             "--clients", "1", "--port", "s0", "--port", "s1", "--ctl", str(ctl), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sw = NetkvSwitchDriver.wait(ctl, timeout_s=20)
        yield ns, sw, exited
        sw.close()
    finally:
        if proc is not None:
            proc.terminate()
            exited.out, err = proc.communicate(timeout=10)
            exited.returncode = proc.returncode
            print(err)
        subprocess.run(["ip", "netns", "del", ns], check=False)
    assert ns not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                    text=True).stdout


def _through(ns: str, count: int) -> int:
    """COUNT client writes sent on h1: how many came out on h0."""
    return int(_ns(ns, sys.executable, "-c", SENDER, "h1", "h0", str(count)).stdout)


@needs_root
@pytest.mark.parametrize("depth", [5, None])
def test_the_cpu_queue_holds_what_it_is_given(tmp_path: Path, depth: int | None) -> None:
    """``--cpu-queue N`` (the target passes ``topology.cpu_queue``, 4,096 by
    default, as the simulator's): N frames wait for the controller, the
    rest are dropped and counted, and a drained queue takes N again (5:
    not a power of two, the ring's size). It was 1,024 whatever the config
    said."""
    # Pegasus samples every unreplicated request to the controller (sample=1)
    args = ["--params", "sample=1", *(["--cpu-queue", str(depth)] if depth else [])]
    held = depth or 20
    with _pegasus_switch(tmp_path, "nkcpuq", *args) as (ns, sw, _):
        for round_ in (1, 2):
            assert _through(ns, 20) == 20
            c = sw.counters()
            assert c["cpu_copies"] + c["cpu_drops"] == 20 * round_, c
            assert (c["cpu_queued"], c["cpu_drops"]) == (held, (20 - held) * round_), c
            assert len(sw.cpu_poll(64)) == held   # drained
    for bad in ("65537", "4294967297", "0", "-1", "8x"):
        res = subprocess.run([_switch(), "--protocol", "hash", "--port", "lo", "--cpu-queue",
                              bad], capture_output=True, text=True, timeout=20)
        assert res.returncode == 2
        assert res.stderr.strip() == f"netkv-switch: --cpu-queue {bad}: frames in 1..65536"


def test_the_target_passes_topology_cpu_queue() -> None:
    from netkv.backends.netkv_switch import NetkvSwitchBackend
    from netkv.config.compose import load
    from netkv.protocols import lookup
    from netkv.targets.base import TargetUnavailable

    cfg = load(["target=mininet", "topology.cpu_queue=3000", "out=x"])
    args = NetkvSwitchBackend(cfg, lookup("hash"), "").args()
    assert args[args.index("--cpu-queue") + 1] == "3000"
    cfg = load(["target=mininet", "topology.cpu_queue=65537", "out=x"])
    with pytest.raises(TargetUnavailable) as exc:
        NetkvSwitchBackend.preflight(cfg, lookup("hash"))
    assert str(exc.value).startswith("topology.cpu_queue = 65537 on target=mininet "
                                     "(allowed: 1..65536")
    # the simulator's channel is its own: target=sim names this back-end
    # but never starts it
    NetkvSwitchBackend.preflight(load(["topology.cpu_queue=100000", "out=x"]), lookup("hash"))


@needs_root
def test_a_closed_switch_drops_and_counts_until_it_is_opened(tmp_path: Path) -> None:
    with _pegasus_switch(tmp_path, "nkclosed", "--closed") as (ns, sw, exited):
        before = sw.counters()
        assert before["closed"] == 0
        assert _through(ns, 20) == 0                   # closed: nothing out
        closed = sw.counters()
        assert closed["closed"] >= 20, closed          # each one counted
        assert closed["pipeline"] == 0 and closed["frames"] >= 20
        assert sw.reg_read("ver_next", 0) == 2        # no write was stamped
        sw.open()
        assert _through(ns, 20) == 20                 # open: forwarded, stamped
        after = sw.counters()
        assert after["closed"] == closed["closed"] and after["pipeline"] >= 20
        assert sw.reg_read("ver_next", 0) == 22
    assert exited.returncode == 0
    assert '"closed": ' in exited.out    # in the exit report, with the other counters


def test_a_restart_opens_the_switch_only_after_the_controller_is_done() -> None:
    """MininetTarget._switch_restart (the testbed's too), for a controller
    that asks for it (Controller.restart_closed: Pegasus): the program
    started closed, the controller's start() and the plane's flush, then
    the back-end's open. A controller that does not ask (its start() may
    need answers through the switch: StarCache's fetches), or a back-end
    without closed_args, gets it started open and not opened. A start()
    that raises still opens the switch (and the event fails with it)."""
    import threading
    from types import SimpleNamespace

    from netkv.backends.netkv_switch import NetkvSwitchBackend
    from netkv.config.compose import load
    from netkv.protocols.pegasus import PegasusController
    from netkv.protocols.starcache import StarCacheController
    from netkv.targets.mininet import MininetTarget

    calls: list[str] = []

    class Backend:
        closed_args = NetkvSwitchBackend.closed_args

        def connect(self, folder: Path, with_controller: bool) -> str:
            calls.append("connect")
            return "driver"

        def controller_driver(self, driver: str, folder: Path) -> tuple[str, bool]:
            return driver, True

        def open(self, driver: str) -> None:
            calls.append(f"open {driver}")

    def start() -> None:
        calls.append("controller start")

    target = object.__new__(MininetTarget)
    target.cfg = load(["target=mininet", "protocol=pegasus"])
    target.switch_lock, target.switch_restarts = threading.Lock(), 0
    target.state = SimpleNamespace(folder=Path("/nonexistent"))
    target.backend = Backend()
    target.rack = SimpleNamespace(start_switch=lambda closed: calls.append(f"start {closed}"))
    target.plane = SimpleNamespace(attach=lambda d, owned: calls.append("attach"),
                                   flush=lambda: calls.append("flush"))
    assert PegasusController.restart_closed and not StarCacheController.restart_closed
    target.controller = SimpleNamespace(start=start, restart_closed=True)
    assert target.restart_closed()
    target._switch_restart()
    assert calls == ["start True", "connect", "attach", "controller start", "flush",
                     "open driver"]

    def failing() -> None:
        raise RuntimeError("no route")

    calls.clear()
    target.controller = SimpleNamespace(start=failing, restart_closed=True)
    with pytest.raises(RuntimeError, match="no route"):
        target._switch_restart()
    assert calls == ["start True", "connect", "attach", "open driver"]

    calls.clear()
    target.controller = SimpleNamespace(start=start, restart_closed=False)
    assert not target.restart_closed()
    target._switch_restart()
    assert calls == ["start False", "connect", "attach", "controller start", "flush"]

    calls.clear()
    target.controller = SimpleNamespace(start=start, restart_closed=True)
    Backend.closed_args = ()
    assert not target.restart_closed()
    target._switch_restart()
    assert calls == ["start False", "connect", "attach", "controller start", "flush"]
