"""The packet corpus (tests/corpus) through every layer that runs a switch
program: the C pipeline in-process, netkv-switch on real frames over veth
pairs (the switch in its own network namespace), and simple_switch_grpc with
the P4 program where p4c and BMv2 are installed. Each compares what comes
out of every port (the CPU port included) and the registers after."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
import shutil
import socket
import subprocess
import time
from pathlib import Path
import pytest

from netkv.drivers.base import SwitchDriver
from netkv.drivers.netkv_switch import NetkvSwitchDriver
from netkv.native import NativeBuildMissing, program_path
from netkv.pipeline import FWD_MCAST, FWD_PORT, FWD_RECIRC, Pipeline
from netkv.protocols import lookup

try:
    from corpus import N_SERVERS, NODES, Case, View, all_cases, view
    from test_p4 import Rack, program_defines
except ImportError:
    from tests.corpus import N_SERVERS, NODES, Case, View, all_cases, view
    from tests.test_p4 import Rack, program_defines

LOOP = Rack.LOOP      # the recirculation port: after the CPU port, as netkv-switch numbers it
CASES = all_cases()
IDS = [c.name for c in CASES]


def uses_loop(case: Case) -> bool:
    """Whether a step enters on, or expects frames out of, the recirculation port."""
    return any(st.port == LOOP or LOOP in st.out for st in case.steps)


def _setup(sw: SwitchDriver, case: Case, port: Callable[[int], int] = int) -> None:
    """The case's tables, registers and PRE groups (their ports as ``port``
    numbers them for the switch: BMv2's loop and CPU ports differ)."""
    for table, key, args in case.tables:
        sw.table_add(table, key, args)
    sw.reg_write_many(case.registers)
    for group, ports in case.groups.items():
        sw.mcast_set(group, [port(p) for p in ports])


def _registers(sw: SwitchDriver, case: Case) -> dict[tuple[str, int], int]:
    return {cell: sw.reg_read(*cell) for cell in case.after}


# ---- the C pipeline in-process --------------------------------------------------------------


def inprocess(case: Case) -> tuple[list[tuple[dict[int, list[View]], list[View]]],
                                    dict[tuple[str, int], int]]:
    """Per step: (views out of each port, views to the CPU); registers after.
    The addresses each copy gets are the switch shell's contract
    (pipeline.h): readdressed to meta->dst; a switch reply to a request goes
    back to the sender as if from the node it addressed (addresses and UDP
    ports swapped), one that answers a kept request (a cache packet) goes to
    meta->dst's port meta->cookie; a multicast copy goes to the node behind
    its port (the recirculation port has none: meta->dst); to_cpu copies the
    packet as received; FWD_PORT to the CPU port sends it as processed;
    FWD_RECIRC goes out of the recirculation port. The request handle is the
    sender's UDP port, as netkv-switch keeps it."""
    steps = []
    with Pipeline(case.protocol, n_servers=N_SERVERS, n_clients=NODES - N_SERVERS,
                  params=case.params) as p:
        _setup(p, case)
        for st in case.steps:
            v = view(st.frame)
            d = p.process(v.payload, src=v.src, dst=v.dst, port=st.port, cookie=v.sport)
            out: dict[int, list[View]] = {}
            cpu: list[View] = []
            if d is not None:
                if d.to_cpu:
                    cpu.append(v)
                if not d.switch_reply:
                    o = View(v.src, d.dst, v.sport, v.dport, d.payload)
                elif d.dst == d.src:
                    o = View(v.dst, d.dst, v.dport, v.sport, d.payload)
                else:
                    o = View(v.src, d.dst, v.sport, d.cookie, d.payload)
                if d.fwd == FWD_PORT and d.port == p.cpu_port:
                    cpu.append(o)
                elif d.fwd == FWD_PORT:
                    out.setdefault(d.port, []).append(o)
                elif d.fwd == FWD_RECIRC:
                    out.setdefault(p.recirc_port, []).append(o)
                elif d.fwd == FWD_MCAST:
                    for port in p.groups.get(d.mcast_group, []):
                        out.setdefault(port, []).append(
                            dataclasses.replace(o, dst=port) if port < NODES else o)
            steps.append((out, cpu))
        return steps, _registers(p, case)


def _inprocess_mismatch(case: Case) -> str | None:
    """The first way the C pipeline differs from the case, or None."""
    steps, regs = inprocess(case)
    for i, (st, (out, cpu)) in enumerate(zip(case.steps, steps)):
        want = {port: [view(f) for f in fs] for port, fs in st.out.items()}
        if out != want:
            return f"{case.name} step {i} ({st.why}): ports {out} != {want}"
        if cpu != [view(f) for f in st.cpu]:
            return f"{case.name} step {i} ({st.why}): CPU {cpu}"
    return None if regs == case.after else f"{case.name}: registers {regs} != {case.after}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_corpus_through_the_c_pipeline(case: Case) -> None:
    assert _inprocess_mismatch(case) is None


def test_corpus_runner_sees_a_missing_loop_copy_and_a_wrong_slot() -> None:
    """The loop port is compared like any port: a served read whose copy
    back into the loop is left out of the case, or whose parked SEQ is
    wrong, fails."""
    case = next(c for c in CASES if "parks; its cache packet answers" in c.name)
    served = case.steps[1]
    no_loop = dataclasses.replace(served, out={k: v for k, v in served.out.items() if k != LOOP})
    wrong = dataclasses.replace(case, steps=[case.steps[0], no_loop, *case.steps[2:]])
    assert "ports" in (_inprocess_mismatch(wrong) or "")
    cell = next(c for c in case.after if c[0] == "req_seq")
    bad_seq = dataclasses.replace(case, after={**case.after, cell: case.after[cell] + 1})
    assert "registers" in (_inprocess_mismatch(bad_seq) or "")


def test_corpus_runner_tells_netlr_s_modes_apart() -> None:
    """The NetLR cases pin their mode: the paper's early commit (W1) does
    not happen in strict mode, Harmonia's routing is not CR's."""
    w1 = next(c for c in CASES if "duplicated ack counts twice" in c.name)
    assert _inprocess_mismatch(w1) is None
    strict = dataclasses.replace(w1, params=w1.params.replace("mode=paper;", ""))
    assert "step 4" in (_inprocess_mismatch(strict) or "")
    harmonia = next(c for c in CASES if c.name.startswith("netlr/harmonia"))
    cr = dataclasses.replace(harmonia, params=harmonia.params.replace("harmonia", "cr"))
    assert "step 0" in (_inprocess_mismatch(cr) or "")


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
        # a loop port (the plug-in's needs_loop, or a case that feeds or
        # watches the recirculation port: NetMC's continuations): --loop
        # OUT,IN on the switch ends of two more pairs, so the test sees what
        # enters the loop and puts packets into it (port LOOP = the
        # recirculation port); without it netkv-switch loops internally
        p4 = lookup(case.protocol).p4
        self.loop_ifs = [(f"nkc{tag}lo", f"nkc{tag}ho"), (f"nkc{tag}li", f"nkc{tag}hi")] \
            if (p4 is not None and p4.needs_loop) or uses_loop(case) else []
        self.loop_socks: list[socket.socket] = []
        self.case, self.ctl = case, tmp / "ctl.sock"
        self.log = tmp / "switch.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.drv: NetkvSwitchDriver | None = None
        self.socks: list[socket.socket] = []

    def __enter__(self) -> "SwitchRack":
        try:
            _ip("ip", "netns", "add", self.ns)
            _ip("ip", "link", "set", "lo", "up", ns=self.ns)
            for n, (sw, host) in enumerate(self.ifs + self.loop_ifs):
                _ip("ip", "link", "add", sw, "type", "veth", "peer", "name", host)
                _ip("ip", "link", "set", sw, "netns", self.ns)
                _ip("sysctl", "-qw", f"net.ipv6.conf.{host}.disable_ipv6=1", check=False)
                _ip("sysctl", "-qw", f"net.ipv6.conf.{sw}.disable_ipv6=1", ns=self.ns, check=False)
                _ip("ip", "link", "set", host, "up")
                _ip("ip", "link", "set", sw, "up", ns=self.ns)
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                s.bind((host, 0))
                s.setblocking(False)
                (self.socks if n < NODES else self.loop_socks).append(s)
            cmd = ["ip", "netns", "exec", self.ns, str(program_path("netkv-switch")),
                   "--protocol", self.case.protocol, "--servers", str(N_SERVERS),
                   "--clients", str(NODES - N_SERVERS), "--ctl", str(self.ctl),
                   *[a for sw, _ in self.ifs for a in ("--port", sw)]]
            if self.case.params:
                cmd += ["--params", self.case.params]
            if self.loop_ifs:
                cmd += ["--loop", ",".join(sw for sw, _ in self.loop_ifs)]
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
        super().__exit__(*exc)       # driver, switch process, sockets (the loop's too)
        for _, host in self.ifs + self.loop_ifs:
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


@needs_switch
def test_netkv_switch_counts_a_parked_read_as_held_not_dropped(tmp_path: Path) -> None:
    """A request the pipeline keeps to answer later (act.held: StarCache's
    parked read) is no drop (pipeline.h, docs/simulator.md): netkv-switch
    counts it in ``held``, not in ``pipe_drop``, which feeds the
    ``switch_dropped`` noise column (the simulator counts none either)."""
    case = next(c for c in CASES if "parks; its cache packet answers" in c.name)
    with SwitchRack(case, tmp_path) as rack:
        assert rack.drv is not None
        before = rack.drv.counters()
        _through(rack, case)
        after = rack.drv.counters()
    moved = {k: after.get(k, 0) - before.get(k, 0)
             for k in ("pipe_drop", "held", "switch_replies")}
    assert moved == {"pipe_drop": 0, "held": 1, "switch_replies": 1}, moved


# ---- simple_switch_grpc with the P4 program ------------------------------------------------------


@pytest.mark.bmv2
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_corpus_through_bmv2(case: Case, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create veth pairs for simple_switch_grpc")
    from netkv.protocols.plugin import parse_params

    p4 = lookup(case.protocol).p4
    if uses_loop(case) and (p4 is None or not p4.needs_loop):
        pytest.skip(f"{case.protocol}'s P4 program recirculates inside BMv2 (no loop pair): "
                    "a continuation cannot be watched or fed at a port")
    params = parse_params(case.params)
    with Rack(tmp_path, case.protocol, program_defines(case.protocol, params), params) as rack:
        assert rack.drv is not None
        _setup(rack.drv, case, rack.program_port)
        _through(rack, case)


class _FakeSock:
    def __init__(self, *a: object) -> None:
        self.bound = ""

    def bind(self, addr: tuple[str, int]) -> None:
        self.bound = addr[0]

    def setblocking(self, flag: bool) -> None:
        pass

    def recv(self, n: int) -> bytes:
        raise BlockingIOError

    def close(self) -> None:
        pass


class _FakeDriver:
    def __init__(self, calls: list[tuple[object, ...]]) -> None:
        self.calls = calls

    def table_add(self, table: str, key: object, args: object = ()) -> None:
        self.calls.append(("table_add", table))

    def reg_write_many(self, cells: object) -> None:
        self.calls.append(("reg_write_many",))

    def mcast_set(self, group: int, ports: list[int]) -> None:
        self.calls.append(("mcast_set", group, list(ports)))

    def close(self) -> None:
        self.calls.append(("close",))


@pytest.mark.parametrize("protocol", ["starcache", "hash"])
def test_bmv2_corpus_rack_builds_the_loop_pair_with_its_queue(
        protocol: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The BMv2 corpus rack with its programs faked (BMv2 and p4c are not
    installed here, so the corpus never ran through BMv2): StarCache's
    program gets its loop pair as netkv/backends/bmv2.py gives it one, the
    switch ends on the program's loop ports (510 out, 511 in), their host
    ends the rack's port LOOP (watched, fed), the out port's queue depth and
    rate set over the Thrift CLI after the program is pushed, a PRE group's
    LOOP member the out port; all removed after. hash gets none of it."""
    from netkv.config.schema import Loop
    from netkv.drivers import bmv2

    calls: list[tuple[object, ...]] = []
    monkeypatch.setattr(subprocess, "run",
                        lambda cmd, **kw: calls.append(("run", *cmd)) or
                        subprocess.CompletedProcess(cmd, 0, b"", b""))
    monkeypatch.setattr(socket, "socket", _FakeSock)
    monkeypatch.setattr(bmv2, "compile_program", lambda program, src, build, defines:
                        bmv2.CompiledProgram(program, tmp_path / "p.json",
                                             tmp_path / "p.p4info.txtpb", dict(defines)))

    class Proc:
        def terminate(self) -> None:
            calls.append(("terminate",))

        def wait(self, timeout: float) -> int:
            return 0

    monkeypatch.setattr(bmv2, "start_switch", lambda ports, **kw: calls.append(
        ("start", dict(ports))) or Proc())
    monkeypatch.setattr(bmv2.Bmv2Driver, "connect", staticmethod(
        lambda compiled, **kw: calls.append(("connect",)) or _FakeDriver(calls)))
    monkeypatch.setattr(bmv2, "cli_run", lambda port, cmds, **kw: calls.append(
        ("cli", port, list(cmds))) or "")
    case = next(c for c in CASES if c.protocol == protocol and c.groups) \
        if protocol == "starcache" else next(c for c in CASES if c.protocol == protocol)
    with Rack(tmp_path, protocol, program_defines(protocol), {}) as rack:
        assert rack.drv is not None
        _setup(rack.drv, case, rack.program_port)   # type: ignore[arg-type]
        socks = {s.bound: s for s in rack.socks + rack.loop_socks}   # type: ignore[attr-defined]
        loop = protocol == "starcache"
        if loop:
            assert rack.tx_sock(LOOP) is socks["nkhli"]
            assert rack.rx_socks()[socks["nkhlo"]] == LOOP   # type: ignore[index]
        else:
            assert rack.loop_socks == [] and LOOP not in rack.rx_socks().values()
    start = next(c[1] for c in calls if c[0] == "start")
    pairs = [c[3::4] for c in calls if c[:3] == ("run", "ip", "link") and c[3] == "add"]
    cli = [c for c in calls if c[0] == "cli"]
    nodes = {i: f"nkp{i}" for i in range(NODES)}
    if not loop:
        assert start == nodes and cli == [("cli", 9090, [])]
        assert not any("nkplo" in c or "nkpli" in c for c in calls)
        return
    assert start == {**nodes, 510: "nkplo", 511: "nkpli"}
    assert ("run", "ip", "link", "add", "nkplo", "type", "veth", "peer", "name", "nkhlo") in calls
    assert ("run", "ip", "link", "add", "nkpli", "type", "veth", "peer", "name", "nkhli") in calls
    assert len(pairs) == NODES + 2
    d = Loop()
    assert cli == [("cli", 9090, [f"set_queue_depth {d.depth} 510",
                                  f"set_queue_rate {round(d.rate_pps)} 510"])]
    assert calls.index(cli[0]) > calls.index(("connect",))    # after the program
    groups = [c for c in calls if c[0] == "mcast_set"]
    assert groups and all(c[2][-1] == 510 and LOOP not in c[2] for c in groups), groups
    assert ("run", "ip", "link", "del", "nkplo") in calls[calls.index(("close",)):]
    assert ("run", "ip", "link", "del", "nkpli") in calls[calls.index(("close",)):]
