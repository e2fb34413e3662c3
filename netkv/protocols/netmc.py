"""NetMC (Bang, M.S. thesis 2024): multigets split in the switch, aggregated
on the client, with its two baselines (docs/netmc.md).

One protocol, three schemes sharing the wire format, the server and the
client's aggregation (hostapps/src/host/netmc.c), as the digest's §6 asks:

- ``netmc``  the client sorts the keys by server and writes the hints
  (KEYIDX, SRV); it sends one packet per W keys and the switch
  (hostapps/src/pipeline/netmc.c) clones and recirculates it into one
  sub-request per server;
- ``climc``  the client sends one sub-request per server itself; the switch
  only forwards;
- ``coordimc``  the client sends the whole multiget (and its writes) to a
  coordinator host in the rack, which splits it, fans out, aggregates and
  answers one MGET_REPLY (split at the MTU); the switch only forwards.

The controller installs, through the ControlPlane only, the AddrTable
(``addr_table``: server id -> node, port, multicast group) and one PRE group
per server, ``{its port, the recirculation port}`` (``mc_mcast_group``).
The data plane keeps no state, so there is nothing to do per epoch.

Runs on the simulator and on Mininet (the coordinator a host of the rack).
W = 16 or 32 keys per packet (``w``). The P4 program (p4src/netmc/netmc.p4)
is checked statically here (no p4c/BMv2). Not yet: the testbed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from netkv.config.base import MAX_VNODES, Pos, ProtocolBase, Ring
from netkv.constants import MC_KEYIDX_W, MC_MTU, McStat, mc_mcast_group
from netkv.protocols.base import ControlPlane, Controller
from netkv.protocols.plugin import P4Program, Params, ProtocolPlugin, param_int, param_str
from netkv.wire.codec import NETMC_HDR_LEN, NETMC_N, NETMC_PAYLOAD_HDR_LEN, NETMC_PORT_BASE, Proto


#: what the switch refuses at the trust boundary (docs/security.md): forged
#: replies from a client's port, multigets with the switch's fields (OID,
#: STARTIDX, CLO) set by a client, and malformed multigets (KEYIDX 0, a
#: group past the key list, OID past SRV)
REFUSALS = {"host_server_op": ("stats", int(McStat.HOST_SERVER_OP)),
            "forged_fields": ("stats", int(McStat.FORGED)),
            "malformed": ("stats", int(McStat.MALFORMED))}


class NetmcProtocol(ProtocolBase):
    """NetMC and its baselines (docs/netmc.md)."""

    name: Literal["netmc"]
    supports_multiget: ClassVar[bool] = True
    max_servers: int = Field(NETMC_N, ge=1, le=NETMC_N)  # SRV has N = 32 entries
    scheme: Literal["netmc", "climc", "coordimc"] = "netmc"
    # CoordiMC: the coordinator host's cores (one, as every simulated client host)
    coord_cores: int = Field(1, ge=1, le=64)
    # W: KEYIDX bits, keys per wire multiget (the thesis' 16, or 32; larger
    # multigets are chunked by the client); the wire's KEYIDX is 32 bits
    w: Literal[16, 32] = MC_KEYIDX_W
    mtu: int = Field(MC_MTU, ge=256, le=9000)  # replies are split at it
    epoch_ms: Pos = 1000.0  # the controller only installs tables at start
    virtual_nodes: int = Field(16, ge=1, le=MAX_VNODES)
    ring: Ring = "consistent"

    def coordinators(self) -> tuple[int, int]:
        return (1, self.coord_cores) if self.scheme == "coordimc" else (0, 1)

    def payload_bytes(self, key_size: int, value_size: int) -> int:
        """A PUT: the fixed header and preamble, one key slot, vlen, value."""
        return NETMC_HDR_LEN + NETMC_PAYLOAD_HDR_LEN + key_size + 2 + value_size


def pipeline_params(cfg: "RunConfig") -> str:
    p = cfg.protocol
    assert isinstance(p, NetmcProtocol)
    split = 1 if p.scheme == "netmc" else 0
    params = f"scheme={p.scheme};split={split};w={p.w};mtu={p.mtu}"
    if p.scheme == "coordimc":
        # the coordinator answers clients: its port (node S + M, after the
        # servers and clients, on the port of the same number on every
        # target) is trusted to send replies
        params += f";trusted_ports={cfg.topology.servers + cfg.topology.clients}"
    return params


def p4_defines(params: Params) -> dict[str, int]:
    """p4src/netmc/netmc.p4's compile-time constants from the pipeline's
    params: W, whether it splits, the coordinator's trusted port (one)."""
    w, split = param_int(params, "w", MC_KEYIDX_W), param_int(params, "split", 1)
    if w not in (16, 32) or split not in (0, 1):
        raise ValueError(f"netmc w {w}, split {split}: the P4 program takes w 16 or 32, "
                         "split 0 or 1")
    out = {"MC_W": w, "MC_SPLIT": split}
    trusted = [p for p in param_str(params, "trusted_ports", "").split(",") if p]
    if len(trusted) > 1:
        raise ValueError(f"netmc trusted_ports {','.join(trusted)}: the P4 program trusts "
                         "one port (NETKV_TRUSTED_PORT)")
    if trusted:
        out["NETKV_TRUSTED_PORT"] = int(trusted[0])
    return out


def dead_knobs(cfg: "RunConfig") -> set[str]:
    """The coordinator's cores matter only to CoordiMC."""
    p = cfg.protocol
    assert isinstance(p, NetmcProtocol)
    return set() if p.scheme == "coordimc" else {"protocol.coord_cores"}


class NetmcController(Controller):
    """AddrTable and the {server, recirculation} groups, once."""

    def start(self) -> None:
        plane, sw = self.plane, self.plane.switch
        for server in range(plane.n_servers):
            port = plane.port_of(server)
            group = mc_mcast_group(server)
            sw.table_add("addr_table", [server], [server, port, group])
            sw.mcast_set(group, [port, plane.recirc_port])

    def epoch(self, t_s: float) -> None:
        del t_s  # stateless data plane: nothing to maintain


def rack_controller_factory(cfg: "RunConfig"):  # type: ignore[no-untyped-def]
    """Real racks (target=mininet): the same controller over the rack's plane."""
    del cfg
    return NetmcController


def sim_controller_factory(cfg: "RunConfig"):  # type: ignore[no-untyped-def]
    from netkv.sim.control import SimControlPlane, SimEpochs

    def factory(engine: "SimEngine") -> "SimEpochs":
        controller = NetmcController(SimControlPlane(engine))
        controller.start()
        return SimEpochs(controller)

    return factory


def variant(cfg: "RunConfig") -> str:
    """The baseline this run is (ProtocolPlugin.variant): "" for NetMC."""
    p = cfg.protocol
    return p.scheme if isinstance(p, NetmcProtocol) and p.scheme != "netmc" else ""


PLUGIN = ProtocolPlugin(
    name="netmc",
    summary="NetMC: multigets split in the switch (and its CliMC and CoordiMC baselines)",
    targets=("sim", "mininet", "testbed"),
    config=NetmcProtocol,
    wire=Proto.NETMC,
    udp_port=NETMC_PORT_BASE,
    pipeline_params=pipeline_params,
    sim_controller=sim_controller_factory,
    rack_controller=rack_controller_factory,
    p4=P4Program("netmc/netmc.p4", defines=p4_defines),
    dead_knobs=dead_knobs,
    refusals=REFUSALS,
    variant=variant,
)


if TYPE_CHECKING:
    from netkv.config.schema import RunConfig
    from netkv.sim.control import SimEpochs
    from netkv.sim.engine import SimEngine
