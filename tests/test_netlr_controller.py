"""NetLRController's failure sweep against the C pipeline run in-process
(netkv.pipeline), with a write reaching a dirty slot while the sweep works.

On a real switch (netkv-switch, a P4 target) the data plane keeps running
while the controller reads ``dset``/``AckMask`` and then clears a slot whose
newest write every live replica acked. A client WRITE of the same key that
arrives between the read and the clear makes the slot dirty again for a new
``MaxSeq``; clearing it then would drop that write's acks (its client times
out) and send its reads round-robin while only some replicas applied it (a
read may see it and a later read not). The sweep re-reads ``MaxSeq`` after
the clear and marks the slot dirty again when it moved.
"""

from __future__ import annotations

from netkv.drivers.base import SwitchDriver
from netkv.pipeline import Pipeline
from netkv.protocols.base import ControlPlane
from netkv.protocols.netlr import NetLRController, NetLRProtocol
from netkv.wire.codec import Msg, NetlrOp, Proto, encode

N, CLIENT = 4, 4
OID, SLOT = 0x1E240, 0x65D5


def _msg(op: NetlrOp, req_id: int, seq: int = 0) -> bytes:
    return encode(Msg(proto=Proto.NETLR, op=op, keyhash=SLOT, ver=seq,
                      key=OID.to_bytes(4, "big"), req_id=req_id,
                      value=bytes(16) if op == NetlrOp.WRITE else b""))


class RacingPipeline(Pipeline):
    """Runs ``race()`` (a client's WRITE) just before the controller's
    first clear of ``dset``, as a packet would slip in on a real switch."""

    race_on_clear = True

    def reg_write(self, name: str, index: int, value: int) -> None:
        if name == "dset" and value == 0 and self.race_on_clear:
            self.race_on_clear = False
            write(self, req_id=2)
        super().reg_write(name, index, value)


def write(sw: Pipeline, req_id: int) -> int:
    d = sw.process(_msg(NetlrOp.WRITE, req_id), src=CLIENT, dst=0, port=CLIENT)
    assert d is not None and d.mcast_group == 1
    return sw.reg_read("MaxSeq", SLOT)


def ack(sw: Pipeline, replica: int, seq: int) -> None:
    sw.process(_msg(NetlrOp.W_REPLY, 1, seq), src=replica, dst=CLIENT, port=replica)


class Plane(ControlPlane):
    def __init__(self, sw: SwitchDriver) -> None:
        self.n_servers = N
        self._sw = sw
        self.up = set(range(N))

    @property
    def switch(self) -> SwitchDriver:
        return self._sw

    def cpu_messages(self, max_packets: int = 4096) -> list:
        return []

    def packet_out(self, msg: Msg, dst: int) -> None:
        raise AssertionError("not used")

    def server_ctl(self, server: int, line: str) -> str:
        raise AssertionError("not used")

    @property
    def now_s(self) -> float:
        return 0.0

    def port_up(self, node: int) -> bool:
        return node in self.up


def _sweep_after_crash(sw: Pipeline) -> NetLRController:
    proto = NetLRProtocol(name="netlr")
    plane = Plane(sw)
    ctl = NetLRController(plane, proto)
    ctl.start()
    seq = write(sw, req_id=1)
    for r in (0, 1, 3):           # every replica but 2 applied it
        ack(sw, r, seq)
    assert sw.reg_read("dset", SLOT) == OID
    plane.up.discard(2)           # replica 2 crashed before acking
    ctl.epoch(0.01)
    return ctl


def test_sweep_clears_a_slot_every_live_replica_acked() -> None:
    sw = RacingPipeline("netlr", n_servers=N, n_clients=1, params="slots=131072")
    sw.race_on_clear = False
    ctl = _sweep_after_crash(sw)
    assert sw.reg_read("dset", SLOT) == 0 and ctl.stats.swept_clean == 1


def test_a_write_racing_the_sweep_keeps_its_slot_dirty() -> None:
    sw = RacingPipeline("netlr", n_servers=N, n_clients=1, params="slots=131072")
    ctl = _sweep_after_crash(sw)
    assert not sw.race_on_clear   # the racing write came in
    newest = sw.reg_read("MaxSeq", SLOT)
    # the racing write's slot is still dirty: its acks count and commit it
    assert sw.reg_read("dset", SLOT) == OID and ctl.stats.swept_clean == 0
    assert ctl.stats.sweep_raced == 1
    for r in (0, 1, 3):
        ack(sw, r, newest)
    assert sw.reg_read("dset", SLOT) == 0
    assert sw.reg_read("stats", 6) == 1   # NL_COMMITS: the racing write committed


class RaceAtCRep(Pipeline):
    """A client's WRITE slips in right after the sweep reads ``CRep``."""

    race = False

    def reg_read(self, name: str, index: int) -> int:
        v = super().reg_read(name, index)
        if name == "CRep" and self.race:
            self.race = False
            write(self, req_id=3)
        return v


def test_the_sweep_gives_the_new_crep_the_seq_its_replicas_acked() -> None:
    """CRep (replica 2) dies; the sweep moves CRep to replica 0, which acked
    MaxSeq, and sets lseq to that seq: the one read before AckMask, not a
    newer write that reached the slot while the sweep worked (lseq lets an
    older write's ack through as SUPERSEDED: with the newer seq, a late ack
    of that write would be answered while replica 0 may lack it)."""
    sw = RaceAtCRep("netlr", n_servers=N, n_clients=1, params="slots=131072;ack_superseded=1")
    plane = Plane(sw)
    ctl = NetLRController(plane, NetLRProtocol(name="netlr", ack_superseded=True))
    ctl.start()
    m1 = write(sw, req_id=1)
    ack(sw, 0, m1)
    ack(sw, 2, m1)                    # CRep = 2
    assert sw.reg_read("CRep", SLOT) == 2
    plane.up.discard(2)
    sw.race = True
    ctl.epoch(0.01)
    assert not sw.race and sw.reg_read("MaxSeq", SLOT) == m1 + 1   # the racing write came in
    assert sw.reg_read("CRep", SLOT) == 0
    assert sw.reg_read("lseq", SLOT) == m1


class Logged(Plane):
    """A real switch's control plane: register writes queued
    (BatchedWrites) until a read or flush; store copies logged in order."""

    def __init__(self, sw: Pipeline, log: list) -> None:
        from netkv.drivers.base import BatchedWrites

        super().__init__(BatchedWrites(sw))
        self.log = log

    def copy_store(self, src: int, dst: int) -> int:
        self.log.append(("copy", src, dst))
        return 0


class LogWrites(Pipeline):
    log: list = []

    def reg_write(self, name: str, index: int, value: int) -> None:
        if name == "LiveMask":
            self.log.append(("LiveMask", value))
        super().reg_write(name, index, value)


def test_a_rejoining_replica_counts_for_commits_before_its_second_copy() -> None:
    """Recovery step 3 on a real switch (writes queued until a read): the
    LiveMask that makes commits wait for the rejoining replica reaches the
    switch before the second store copy starts; else a write committed
    during the copy, its copy to that replica lost, would be missing there
    when it serves reads."""
    log: list = []
    sw = LogWrites("netlr", n_servers=N, n_clients=1, params="slots=1024")
    sw.log = log
    plane = Logged(sw, log)
    ctl = NetLRController(plane, NetLRProtocol(name="netlr", slots=1024))
    ctl.start()
    plane.up.discard(2)
    ctl.epoch(0.01)                   # removed
    plane.up.add(2)
    for t in (0.02, 0.03, 0.04):      # step 1 (group), step 2 (copy), step 3
        ctl.epoch(t)
    assert ctl.stats.recoveries and ctl.stats.recoveries[0][0] == 2
    first, second = [i for i, e in enumerate(log) if e[0] == "copy"]
    joined = [i for i, e in enumerate(log) if e == ("LiveMask", 0b1111) and i > first][0]
    assert joined < second, log
