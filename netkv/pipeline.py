"""A C switch pipeline run in-process (cffi): the code netkv-switch and the
simulator run, one packet at a time, with its registers and tables reachable
by name like any ``SwitchDriver``.

``Pipeline("pegasus", n_servers=4, n_clients=1, params=...)`` finds the
pipeline by name (``nk_pipeline_find``), inits it with the rack plan (node n
behind port n, CPU port = number of nodes, recirculation port after it, as
netkv-switch numbers them), and ``process(payload, src=, dst=, port=)``
decodes the UDP payload with the C codec, calls ``process()`` and returns the
decision with the payload re-encoded by the C codec. The packet corpus
(tests/corpus) compares it with netkv-switch on real frames.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import cffi

from netkv.drivers.base import CpuPacket, DriverError, SwitchDriver
from netkv.native import library_path
from netkv.sim import native as sim_native

CDEF = """
struct nk_pkt_meta {
    uint64_t now_ns; uint16_t ingress_port; uint16_t src; uint16_t dst; uint16_t wire_len;
    uint8_t from_cpu; uint8_t recirculated; uint64_t cookie;
};
struct nk_actions {
    uint8_t fwd; uint8_t to_cpu; uint8_t switch_reply; uint8_t held;
    uint16_t port; uint16_t mcast_group;
};
struct nk_pipeline_cfg {
    uint32_t n_servers; uint32_t n_clients; uint32_t n_nodes; const uint16_t *node_port;
    uint16_t cpu_port; uint16_t recirc_port; uint64_t seed; const char *params;
};
struct nk_pipeline_ops {
    const char *name; uint8_t proto; uint16_t udp_port; uint16_t udp_ports;
    size_t state_size; uint8_t order_free; uint8_t never_to_cpu;
    int (*order_free_pkt)(const void *st, const struct nk_msg *m);
    void (*prefetch)(const void *st, const struct nk_msg *m);
    int (*init)(void *st, const struct nk_pipeline_cfg *cfg);
    void (*fini)(void *st);
    void (*process)(void *st, struct nk_msg *m, struct nk_pkt_meta *meta, struct nk_actions *act);
    int (*reg_read)(void *st, const char *name, uint32_t idx, uint64_t *val);
    int (*reg_write)(void *st, const char *name, uint32_t idx, uint64_t val);
    int (*table_add)(void *st, const char *table, const uint64_t *key, unsigned nkey,
                     const uint64_t *args, unsigned nargs);
    int (*table_del)(void *st, const char *table, const uint64_t *key, unsigned nkey);
};
const struct nk_pipeline_ops *nk_pipeline_find(const char *name);
int nk_wire_decode(int proto, const uint8_t *buf, size_t len, struct nk_msg *out);
int nk_wire_encode(const struct nk_msg *m, uint8_t *buf, size_t cap);
"""

CHECKED_STRUCTS = ("nk_pkt_meta", "nk_actions", "nk_pipeline_cfg", "nk_pipeline_ops")
NODE_NONE = 0xFFFF
FWD_DROP, FWD_PORT, FWD_MCAST, FWD_RECIRC = 0, 1, 2, 3  # enum nk_fwd
_ERRORS = {-1: "no such name", -2: "index out of range", -3: "table full", -4: "invalid value"}


@cache
def _load() -> tuple[Any, Any]:
    base_ffi, base_lib = sim_native.load()  # struct nk_msg, checked against the library
    ffi = cffi.FFI()
    ffi.include(base_ffi)
    ffi.cdef(CDEF)
    lib = ffi.dlopen(str(library_path()))
    for name in CHECKED_STRUCTS:
        c_size = base_lib.nk_sim_abi_sizeof(name.encode())
        if c_size != ffi.sizeof(f"struct {name}"):
            raise sim_native.AbiMismatch(
                f"struct {name}: {ffi.sizeof(f'struct {name}')} bytes in netkv/pipeline.py, "
                f"{c_size} in libnetkv (update the cdef to match pipeline.h)")
    return ffi, lib


@dataclass(frozen=True)
class Decision:
    """What process() decided for one packet."""

    fwd: int                 # FWD_DROP / FWD_PORT / FWD_MCAST / FWD_RECIRC
    port: int
    mcast_group: int
    to_cpu: bool
    switch_reply: bool
    src: int                 # meta.src / meta.dst after process()
    dst: int
    payload: bytes           # the message re-encoded (the input bytes if unchanged)
    cookie: int = 0          # meta.cookie after process(): the handle of the request answered


class Pipeline(SwitchDriver):
    """One C pipeline instance; node n is behind port n."""

    def __init__(self, name: str, *, n_servers: int, n_clients: int, params: str = "",
                 seed: int = 1) -> None:
        ffi, lib = self._ffi, self._lib = _load()
        self.ops = lib.nk_pipeline_find(name.encode())
        if self.ops == ffi.NULL:
            raise DriverError(f"no C pipeline named {name!r}")
        self.name = name
        self.n_nodes = n_servers + n_clients
        self.cpu_port = self.n_nodes
        self.recirc_port = self.n_nodes + 1
        self.groups: dict[int, list[int]] = {}
        self._node_port = ffi.new("uint16_t[]", list(range(self.n_nodes)))
        self._params = ffi.new("char[]", params.encode())
        cfg = ffi.new("struct nk_pipeline_cfg *", {
            "n_servers": n_servers, "n_clients": n_clients, "n_nodes": self.n_nodes,
            "node_port": self._node_port, "cpu_port": self.cpu_port,
            "recirc_port": self.recirc_port, "seed": seed, "params": self._params})
        self._state = ffi.new("char[]", max(int(self.ops.state_size), 1))
        self._live = False      # until init succeeds: close() must not fini
        if self.ops.init(self._state, cfg):
            raise DriverError(f"pipeline {name!r} init failed (params: {params or 'none'})")
        self._live = True
        self._cpu: list[CpuPacket] = []

    # ---- SwitchDriver --------------------------------------------------------------
    def _check(self, rc: int, what: str) -> None:
        if rc:
            raise DriverError(f"{self.name}: {what}: {_ERRORS.get(rc, rc)}")

    def reg_read(self, name: str, index: int) -> int:
        v = self._ffi.new("uint64_t *")
        self._check(self.ops.reg_read(self._state, name.encode(), index, v),
                    f"reg_read {name}[{index}]")
        return int(v[0])

    def reg_read_range(self, name: str, first: int, count: int) -> list[int]:
        return [self.reg_read(name, first + i) for i in range(count)]

    def reg_write(self, name: str, index: int, value: int) -> None:
        self._check(self.ops.reg_write(self._state, name.encode(), index, value),
                    f"reg_write {name}[{index}]")

    def reg_write_many(self, cells: Iterable[tuple[str, int, int]]) -> None:
        for name, index, value in cells:
            self.reg_write(name, index, value)

    def table_add(self, table: str, key: Sequence[int], args: Sequence[int] = ()) -> None:
        ffi = self._ffi
        k = ffi.new("uint64_t[]", list(key) or [0])
        a = ffi.new("uint64_t[]", list(args) or [0])
        self._check(self.ops.table_add(self._state, table.encode(), k, len(key), a, len(args)),
                    f"table_add {table}")

    def table_delete(self, table: str, key: Sequence[int]) -> None:
        k = self._ffi.new("uint64_t[]", list(key) or [0])
        self._check(self.ops.table_del(self._state, table.encode(), k, len(key)),
                    f"table_del {table}")

    def mcast_set(self, group: int, ports: Sequence[int]) -> None:
        self.groups[group] = list(ports)   # the switch's group table, not the pipeline's

    def counters(self) -> dict[str, int]:
        return {}

    def cpu_poll(self, max_packets: int = 64) -> list[CpuPacket]:
        out, self._cpu = self._cpu[:max_packets], self._cpu[max_packets:]
        return out

    def packet_out(self, frame: bytes, port: int | None = None) -> None:
        raise DriverError("an in-process pipeline takes payloads: use process()")

    def close(self) -> None:
        if self._live:
            self.ops.fini(self._state)
            self._live = False

    def __del__(self) -> None:
        self.close()

    # ---- one packet ----------------------------------------------------------------
    def process(self, payload: bytes, *, src: int, dst: int, port: int, from_cpu: bool = False,
                now_ns: int = 0, cookie: int = 0) -> Decision | None:
        """Run one UDP payload through the pipeline; None if the C codec
        refuses it (netkv-switch counts and drops it)."""
        ffi, lib = self._ffi, self._lib
        buf = ffi.new("uint8_t[]", payload or b"\0")
        m = ffi.new("struct nk_msg *")
        if lib.nk_wire_decode(self.ops.proto, buf, len(payload), m):
            return None
        before = bytes(ffi.buffer(m))
        meta = ffi.new("struct nk_pkt_meta *", {
            "now_ns": now_ns, "ingress_port": port, "src": src, "dst": dst,
            "wire_len": len(payload) + 42, "from_cpu": int(from_cpu),
            # a packet in on the recirculation port came round the loop (as
            # netkv-switch and the simulator mark it)
            "recirculated": int(port == self.recirc_port), "cookie": cookie})
        act = ffi.new("struct nk_actions *")
        self.ops.process(self._state, m, meta, act)
        if bytes(ffi.buffer(m)) == before:
            out = payload
        else:
            obuf = ffi.new("uint8_t[]", 4096)
            n = lib.nk_wire_encode(m, obuf, 4096)
            if n < 0:
                raise DriverError(f"{self.name}: the pipeline's message does not encode ({n})")
            out = bytes(ffi.buffer(obuf, n))
        return Decision(int(act.fwd), int(act.port), int(act.mcast_group), bool(act.to_cpu),
                        bool(act.switch_reply), int(meta.src), int(meta.dst), out,
                        int(meta.cookie))
