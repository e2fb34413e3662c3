"""NetLR's controller (one class for every target) and its plug-in.

The data plane (hostapps/src/pipeline/netlr.c) serializes writes, multicasts
them to the replica group, counts acks and routes reads (docs/netlr.md).
This controller is the paper's switch CPU (digest §4):

- ``start``: the live set is every replica: ``num_replica``, the round-robin
  table ``get_dst_rep_table`` (live index -> replica), ``LiveMask``, ``PIN``
  and multicast group 1 (the artifact's) over the replicas' ports;
- every ``poll_ms`` (10 ms, the artifact's ``$PORT_UP`` poll): a replica
  whose port went down leaves the round-robin table and the multicast group,
  ``num_replica``/``LiveMask`` shrink, ``PIN`` moves if it died; in strict
  mode every dirty slot is then swept (digest §4): clean if every live
  replica acked its newest write, ``CRep`` moved off the dead replica to a
  live one that acked, else to ``PIN``;
- a replica whose port comes back is re-added (digest §4 "recovery", our
  steps): it joins the multicast group (it sees every new write), one
  ``recovery_wait_ms`` later it receives a copy of a live replica's store
  (out of band, newer versions only), and one more ``recovery_wait_ms``
  later it joins ``LiveMask``, gets a second copy (a write committed between
  the two without it, its copy lost) and joins the round-robin table. Keys
  dirty when it joins stay dirty until their next write (reads go to ``CRep``).

``fault_adaptation: false`` leaves the tables alone (Fig. 9's "without").
``replication: cr`` is the chain-replication baseline on the same hosts and
wire format: the switch only forwards, the chain is static. ``replication:
hermes`` (the invalidation baseline) likewise: static membership.
``replication: harmonia`` (Harmonia on CR, the in-switch baseline; NOT
linearizable as the paper ran it, ``CAVEATS``): the same static chain, the
switch's round-robin table installed at start.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from netkv.config.base import MAX_VNODES, Pos, ProtocolBase, Ring
from netkv.drivers.base import DriverError
from netkv.protocols.base import ControlPlane, Controller
from netkv.protocols.netlr_p4 import PROGRAM as P4_PROGRAM
from netkv.protocols.plugin import ProtocolPlugin
from netkv.wire.codec import NETLR_LEN, NETLR_OID_LEN, NETLR_PORT, Proto

GROUP = 1          # the replica group's multicast group (artifact: rid 1)
MAX_REPLICAS = 8   # LiveMask / AckMask are 8 bits (artifact MAX_NUM_REPLICA)
MAX_SLOTS = 1 << 20
#: what the switch refuses at the trust boundary (pipeline/netlr.c stats[i])
REFUSALS = {"host_server_op": ("stats", 10), "forged_fields": ("stats", 12),
            "bad_oid": ("stats", 9)}


class NetLRProtocol(ProtocolBase):
    """NetLR (PVLDB 15(7) 2022; docs/netlr.md)."""

    name: Literal["netlr"]
    max_servers: int = Field(MAX_REPLICAS, ge=1, le=MAX_REPLICAS)
    mode: Literal["strict", "paper"] = "strict"
    #: netlr, or the chain-replication baseline on the same hosts (head
    #: orders writes, tail replies and serves reads; the switch forwards), or
    #: Hermes (any replica coordinates a write: INV, ACKs, VAL; reads served
    #: locally unless the key is Invalid; the switch forwards), or Harmonia on
    #: CR (the switch tracks keys with writes in flight: their reads go to the
    #: tail, other reads to any replica; NOT linearizable, performance-only)
    replication: Literal["netlr", "cr", "hermes", "harmonia"] = "netlr"
    slots: int = Field(131_072, ge=1, le=MAX_SLOTS)   # hash slots (paper: 128K)
    ack_superseded: bool = False    # strict: forward an older write's ack, flagged
    stamp: bool = False             # strict: reads carry the switch's seq
    collision_nack: bool = False    # a colliding write is NACKed instead of dropped
    #: strict: a client WRITE whose req_id its port had stamped already (a
    #: network duplicate) is dropped, not stamped and applied a second time
    dedup: bool = True
    fault_adaptation: bool = True   # remove failed replicas (Fig. 9 "with")
    recovery: bool = True           # re-add a replica whose port came back
    poll_ms: Pos = 10.0             # port-status poll (artifact: 10 ms)
    recovery_wait_ms: Pos = 10.0    # between the recovery steps
    virtual_nodes: int = Field(16, ge=1, le=MAX_VNODES)
    ring: Ring = "consistent"       # unused by the switch: every replica holds every key

    @field_validator("slots")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        if v & (v - 1):
            raise ValueError("not a power of two (allowed: 1, 2, 4, ... up to 2^20)")
        return v

    @property
    def epoch_ms(self) -> float:
        """The sim target's controller period."""
        return self.poll_ms

    def payload_bytes(self, key_size: int, value_size: int) -> int:
        """NetLR's fixed 36 B header (16 B values, 4 B object ids)."""
        del key_size, value_size
        return NETLR_LEN


def pipeline_params(cfg: "RunConfig") -> str:
    p = cfg.protocol
    assert isinstance(p, NetLRProtocol)
    # boot_empty: the switch serves nothing until the controller installed
    # it, at the start and after a restart (the controller always runs)
    return (f"replication={p.replication};mode={p.mode};slots={p.slots};ack_superseded={int(p.ack_superseded)};"
            f"stamp={int(p.stamp)};collision_nack={int(p.collision_nack)};dedup={int(p.dedup)};"
            "boot_empty=1")


@dataclass
class Joining:
    server: int
    since_s: float
    copied: int | None = None     # keys copied (after step 2)


@dataclass
class NetLRStats:
    failures: list[tuple[int, float]] = field(default_factory=list)    # (replica, detected at)
    recoveries: list[tuple[int, float, int]] = field(default_factory=list)  # (replica, live at, keys)
    swept_clean: int = 0
    sweep_raced: int = 0      # slots a write reached while the sweep cleared them
    crep_moved: int = 0
    #: switch restarts handled: (epoch installed, seq resumed at, keys resynced)
    restarts: list[tuple[int, int, int]] = field(default_factory=list)


class NetLRController(Controller):
    def __init__(self, plane: ControlPlane, proto: NetLRProtocol) -> None:
        super().__init__(plane)
        self.proto = proto
        self.n = plane.n_servers
        self.live: list[int] = list(range(self.n))
        self.down: set[int] = set()
        self.joining: dict[int, Joining] = {}
        self.stats = NetLRStats()
        self.started = False
        self.incarnation = 0      # the switch's epoch: restarts seen

    # -- tables --------------------------------------------------------------------

    def _port(self, node: int) -> int:
        try:
            return self.plane.port_of(node)
        except NotImplementedError:
            return node

    def _install(self) -> None:
        sw = self.plane.switch
        # in this order, so that the round-robin never meets an empty entry
        # while the switch forwards: the live entries, their count, then the
        # entries past it removed
        for i, r in enumerate(self.live):
            sw.table_add("get_dst_rep_table", [i], [r])
        sw.reg_write("num_replica", 0, len(self.live))
        for i in range(len(self.live), MAX_REPLICAS):
            try:
                sw.table_delete("get_dst_rep_table", [i])
            except DriverError:
                pass   # no entry there
        sw.reg_write("LiveMask", 0, self.live_mask)
        if self.live:
            sw.reg_write("PIN", 0, self.live[0])
        members = sorted(set(self.live) | set(self.joining))
        sw.mcast_set(GROUP, [self._port(r) for r in members])

    @property
    def live_mask(self) -> int:
        return sum(1 << r for r in self.live)

    # -- life cycle -------------------------------------------------------------------

    def start(self) -> None:
        if self.n > MAX_REPLICAS:
            raise ValueError(f"netlr: {self.n} replicas (allowed: 1..{MAX_REPLICAS})")
        if self.started and self.proto.replication == "netlr":
            self._restarted()
        self.started = True
        self._install()

    def _restarted(self) -> None:
        """The switch came back empty (digest §4 "switch failure", our
        resolution): a new epoch; every live replica gets the newest
        version of every key (a write some replicas applied before the
        outage could have been read there); ``seq`` resumes past every
        stored version, so the new epoch's writes order after all earlier
        ones with the same 32-bit seq the replicas and histories compare.
        Replicas refuse writes of an older epoch (a copy delayed across the
        restart), the switch acks of another epoch. Only then does
        ``_install`` let the switch serve (it boots with no replica live)."""
        self.incarnation = (self.incarnation + 1) & 0xFFFF
        live = [r for r in self.live if self.plane.port_up(r)]
        keys = 0
        if live:
            hub = live[0]
            for r in live[1:]:
                keys += self.plane.copy_store(r, hub)
            for r in live[1:]:
                keys += self.plane.copy_store(hub, r)
        newest = max([self.plane.newest_version(r) for r in live] or [1])
        if newest >= 0xFFFFFFFF:
            raise DriverError(f"netlr: stored version {newest} leaves no 32-bit seq to resume at")
        sw = self.plane.switch
        sw.reg_write("epoch", 0, self.incarnation)
        sw.reg_write("seq", 0, newest)
        self.stats.restarts.append((self.incarnation, newest, keys))

    def epoch(self, t_s: float) -> None:
        if not self.proto.fault_adaptation or self.proto.replication != "netlr":
            return   # CR's chain and Hermes' membership are static (not modelled)
        failed = joined = False
        for r in range(self.n):
            up = self.plane.port_up(r)
            if not up and r not in self.down:
                self._fail(r, t_s)
                failed = True
            elif up and r in self.down and r not in self.joining and self.proto.recovery:
                self.joining[r] = Joining(r, t_s)      # step 1: the multicast group
                joined = True
        if failed or joined:
            self._install()
        if failed and self.proto.mode == "strict":
            self._sweep()
        self._advance_joins(t_s)

    def _fail(self, r: int, t_s: float) -> None:
        self.down.add(r)
        self.joining.pop(r, None)
        if r in self.live:
            self.live.remove(r)
        self.stats.failures.append((r, t_s))

    def _advance_joins(self, t_s: float) -> None:
        wait = self.proto.recovery_wait_ms / 1e3
        for r, j in list(self.joining.items()):
            if not self.live:
                return
            if j.copied is None and t_s - j.since_s >= wait - 1e-12:
                # step 2: every write issued before step 1 has reached the donor
                j.copied = self.plane.copy_store(self.live[0], r)
            elif j.copied is not None and t_s - j.since_s >= 2 * wait - 1e-12:
                # step 3: count its acks (LiveMask) first, so that no write
                # commits without it from here; then copy again: a write
                # committed between step 2 and now, whose copy to it was
                # lost, would otherwise be missing when it serves reads
                sw = self.plane.switch
                sw.reg_write("LiveMask", 0, self.live_mask | 1 << r)
                # a read sends the queued writes (BatchedWrites on a real
                # switch): LiveMask must be in place before the copy starts
                sw.reg_read("LiveMask", 0)
                j.copied += self.plane.copy_store(self.live[0], r)
                del self.joining[r]              # ... then serve reads
                self.down.discard(r)
                self.live = sorted([*self.live, r])
                self._install()
                self.stats.recoveries.append((r, t_s, j.copied))

    def _sweep(self) -> None:
        """Strict mode after a failure (digest §4): no slot waits for a dead
        replica's ack, no dirty read goes to a dead CRep."""
        sw = self.plane.switch
        live = self.live_mask
        dset = sw.reg_read_range("dset", 0, self.proto.slots)
        for i, oid in enumerate(dset):
            if not oid:
                continue
            # MaxSeq before AckMask: a write reaching the slot in between
            # resets AckMask, so the acks read are of `issued` or newer
            issued = sw.reg_read("MaxSeq", i)
            acked = sw.reg_read("AckMask", i)
            if live and acked & live == live:
                sw.reg_write("dset", i, 0)
                if sw.reg_read("MaxSeq", i) != issued:
                    # a write reached the slot between the reads and the
                    # clear (a real switch keeps forwarding): dirty again,
                    # so that its acks count and its reads go to CRep
                    sw.reg_write("dset", i, oid)
                    self.stats.sweep_raced += 1
                else:
                    self.stats.swept_clean += 1
                continue
            crep = sw.reg_read("CRep", i)
            if not live & (1 << crep):
                mine = [r for r in self.live if acked & (1 << r)]
                sw.reg_write("CRep", i, mine[0] if mine else (self.live[0] if self.live else 0))
                # lseq: the newest seq the new CRep is known to hold (what
                # lets an older write's ack through, ack_superseded)
                sw.reg_write("lseq", i, issued if mine else 0)
                self.stats.crep_moved += 1


#: printed by every run of the Harmonia baseline and kept in its provenance
HARMONIA_CAVEAT = ("replication=harmonia is NOT linearizable (performance-only, as the NetLR paper "
                   "ran it: the dirty set is cleared without comparing seqs, and replicas serve reads "
                   "without checking the last committed seq)")


def caveats(cfg: "RunConfig") -> list[str]:
    """What a run does not guarantee (ProtocolPlugin.caveats)."""
    p = cfg.protocol
    return [HARMONIA_CAVEAT] if isinstance(p, NetLRProtocol) and p.replication == "harmonia" else []


def variant(cfg: "RunConfig") -> str:
    """The baseline this run is (ProtocolPlugin.variant): "" for NetLR."""
    p = cfg.protocol
    return p.replication if isinstance(p, NetLRProtocol) and p.replication != "netlr" else ""


def wire_key(key: bytes) -> bytes:
    """The 4 B object id the client sends for a workload key
    (hostapps/src/host/netlr.c nl_wire_key: CRC32, 0 becoming 1)."""
    return (zlib.crc32(key) or 1).to_bytes(NETLR_OID_LEN, "big")


# --- on the simulator ---------------------------------------------------------------------


def sim_controller_factory(cfg: "RunConfig"):  # type: ignore[no-untyped-def]
    from netkv.sim.control import SimControlPlane, SimEpochs

    proto = cfg.protocol
    assert isinstance(proto, NetLRProtocol)

    def factory(engine: "SimEngine") -> "SimEpochs":
        controller = NetLRController(SimControlPlane(engine), proto)
        controller.start()
        factory.last = controller  # type: ignore[attr-defined]
        return SimEpochs(controller)

    return factory


# --- on real racks (target=mininet) -------------------------------------------------------


def rack_controller_factory(cfg: "RunConfig"):  # type: ignore[no-untyped-def]
    """Real racks: ``factory(plane) -> NetLRController`` over the rack's
    control plane (the target calls ``start()``); ``port_up`` is the rack's
    port status (netkv.mininet.control)."""
    proto = cfg.protocol
    assert isinstance(proto, NetLRProtocol)

    def factory(plane: ControlPlane) -> NetLRController:
        return NetLRController(plane, proto)

    return factory


PLUGIN = ProtocolPlugin(
    name="netlr",
    summary="NetLR in-switch leaderless replication: writes serialized and acked in the switch (PVLDB 2022)",
    targets=("sim", "mininet", "testbed"),
    config=NetLRProtocol,
    wire=Proto.NETLR,
    udp_port=NETLR_PORT,
    preload="all",
    pipeline_params=pipeline_params,
    sim_controller=sim_controller_factory,
    rack_controller=rack_controller_factory,
    refusals=REFUSALS,
    p4=P4_PROGRAM,
    caveats=caveats,
    variant=variant,
)


if TYPE_CHECKING:
    from netkv.config.schema import RunConfig
    from netkv.sim.engine import SimEngine
