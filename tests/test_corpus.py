"""The packet corpus (tests/corpus) through every layer that runs a switch
program: the C pipeline in-process, netkv-switch on real frames over veth
pairs (the switch in its own network namespace), and simple_switch_grpc with
the P4 program where p4c and BMv2 are installed. Each compares what comes
out of every port (the CPU port included) and the registers after."""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
import pytest

from netkv.drivers.base import SwitchDriver
from netkv.drivers.netkv_switch import NetkvSwitchDriver
from netkv.native import NativeBuildMissing, program_path
from netkv.pipeline import FWD_MCAST, FWD_PORT, Pipeline

try:
    from corpus import N_SERVERS, NODES, Case, View, all_cases, view
    from test_p4 import Rack, program_defines
except ImportError:
    from tests.corpus import N_SERVERS, NODES, Case, View, all_cases, view
    from tests.test_p4 import Rack, program_defines

CASES = all_cases()
IDS = [c.name for c in CASES]


def _setup(sw: SwitchDriver, case: Case) -> None:
    for table, key, args in case.tables:
        sw.table_add(table, key, args)
    sw.reg_write_many(case.registers)
    for group, ports in case.groups.items():
        sw.mcast_set(group, ports)


def _registers(sw: SwitchDriver, case: Case) -> dict[tuple[str, int], int]:
    return {cell: sw.reg_read(*cell) for cell in case.after}


# ---- the C pipeline in-process --------------------------------------------------------------


def inprocess(case: Case) -> tuple[list[tuple[dict[int, list[View]], list[View]]],
                                    dict[tuple[str, int], int]]:
    """Per step: (views out of each port, views to the CPU); registers after.
    The addresses each copy gets are the switch shell's contract
    (pipeline.h): readdressed to meta->dst; a switch reply goes back to the
    sender as if from the node it addressed (addresses and UDP ports swapped);
    a multicast copy goes to the node behind its port; to_cpu copies the
    packet as received; FWD_PORT to the CPU port sends it as processed."""
    steps = []
    with Pipeline(case.protocol, n_servers=N_SERVERS, n_clients=NODES - N_SERVERS,
                  params=case.params) as p:
        _setup(p, case)
        for st in case.steps:
            v = view(st.frame)
            d = p.process(v.payload, src=v.src, dst=v.dst, port=st.port)
            out: dict[int, list[View]] = {}
            cpu: list[View] = []
            if d is not None:
                if d.to_cpu:
                    cpu.append(v)
                o = (View(v.dst, d.dst, v.dport, v.sport, d.payload) if d.switch_reply
                     else View(v.src, d.dst, v.sport, v.dport, d.payload))
                if d.fwd == FWD_PORT and d.port == p.cpu_port:
                    cpu.append(o)
                elif d.fwd == FWD_PORT:
                    out.setdefault(d.port, []).append(o)
                elif d.fwd == FWD_MCAST:
                    for port in p.groups.get(d.mcast_group, []):
                        out.setdefault(port, []).append(dataclasses.replace(o, dst=port))
            steps.append((out, cpu))
        return steps, _registers(p, case)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_corpus_through_the_c_pipeline(case: Case) -> None:
    steps, regs = inprocess(case)
    for i, (st, (out, cpu)) in enumerate(zip(case.steps, steps)):
        want = {port: [view(f) for f in fs] for port, fs in st.out.items()}
        assert out == want, f"{case.name} step {i} ({st.why}): ports"
        assert cpu == [view(f) for f in st.cpu], f"{case.name} step {i} ({st.why}): CPU"
    assert regs == case.after, case.name


# ---- netkv-switch on real frames ---------------------------------------------------------------

ETH_P_ALL = 0x0003


def _why_not_switch() -> str | None:
    if os.geteuid() != 0:
        return "needs root for veth pairs and a network namespace"
    if shutil.which("ip") is None:
        return "needs iproute2 (ip)"
    try:
        program_path("netkv-switch")
    except NativeBuildMissing as e:
        return str(e)
    return None


needs_switch = pytest.mark.skipif(_why_not_switch() is not None, reason=_why_not_switch() or "")


def _ip(*args: str, ns: str | None = None, check: bool = True) -> None:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    subprocess.run(cmd, check=check, capture_output=True)


class SwitchRack(Rack):
    """netkv-switch in namespace ``ns`` on the switch ends of veth pairs; raw
    sockets on the host ends (root namespace), port i <-> node i."""

    def __init__(self, case: Case, tmp: Path) -> None:  # noqa: D107 - no P4 program to compile
        tag = f"{os.getpid() % 100000}"
        self.ns = f"nkc{tag}"
        self.ifs = [(f"nkc{tag}s{i}", f"nkc{tag}h{i}") for i in range(NODES)]
        self.case, self.ctl = case, tmp / "ctl.sock"
        self.log = tmp / "switch.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.drv: NetkvSwitchDriver | None = None
        self.socks: list[socket.socket] = []

    def __enter__(self) -> "SwitchRack":
        try:
            _ip("ip", "netns", "add", self.ns)
            _ip("ip", "link", "set", "lo", "up", ns=self.ns)
            for sw, host in self.ifs:
                _ip("ip", "link", "add", sw, "type", "veth", "peer", "name", host)
                _ip("ip", "link", "set", sw, "netns", self.ns)
                _ip("sysctl", "-qw", f"net.ipv6.conf.{host}.disable_ipv6=1", check=False)
                _ip("sysctl", "-qw", f"net.ipv6.conf.{sw}.disable_ipv6=1", ns=self.ns, check=False)
                _ip("ip", "link", "set", host, "up")
                _ip("ip", "link", "set", sw, "up", ns=self.ns)
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                s.bind((host, 0))
                s.setblocking(False)
                self.socks.append(s)
            cmd = ["ip", "netns", "exec", self.ns, str(program_path("netkv-switch")),
                   "--protocol", self.case.protocol, "--servers", str(N_SERVERS),
                   "--clients", str(NODES - N_SERVERS), "--ctl", str(self.ctl),
                   *[a for sw, _ in self.ifs for a in ("--port", sw)]]
            if self.case.params:
                cmd += ["--params", self.case.params]
            with open(self.log, "wb") as log:
                self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            self.drv = NetkvSwitchDriver.wait(self.ctl)
            _setup(self.drv, self.case)
            time.sleep(0.05)
            self.drain()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)       # driver, switch process, sockets
        for _, host in self.ifs:
            _ip("ip", "link", "del", host, check=False)
        _ip("ip", "netns", "del", self.ns, check=False)


def _through(rack: Rack, case: Case) -> None:
    """Every step into a rack of real ports: exact bytes out of each port and
    to the controller, then the registers."""
    assert rack.drv is not None
    for i, st in enumerate(case.steps):
        got = rack.send(st.port, st.frame)
        assert got == st.out, f"{case.name} step {i} ({st.why}): ports"
        assert [c.frame for c in rack.drv.cpu_poll()] == st.cpu, \
            f"{case.name} step {i} ({st.why}): CPU"
    assert _registers(rack.drv, case) == case.after, case.name


@needs_switch
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_corpus_through_netkv_switch(case: Case, tmp_path: Path) -> None:
    with SwitchRack(case, tmp_path) as rack:
        _through(rack, case)


# ---- simple_switch_grpc with the P4 program ------------------------------------------------------


@pytest.mark.bmv2
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_corpus_through_bmv2(case: Case, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create veth pairs for simple_switch_grpc")
    from netkv.protocols.plugin import parse_params

    params = parse_params(case.params)
    with Rack(tmp_path, case.protocol, program_defines(case.protocol, params), params) as rack:
        assert rack.drv is not None
        _setup(rack.drv, case)
        _through(rack, case)
