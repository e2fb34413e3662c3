"""``python -m netkv trace PATH``: follow every request through a capture.

PATH is a run directory (every ``capture/<point>/`` folder), one point's
capture folder, or a single pcap. Every frame is decoded with the project's
own codec (``netkv.wire.codec``; the format is picked by UDP port and magic,
``netkv.wire.layout``). Frames are grouped into flows by (client node,
req_id) - the client is the sender of a request and the receiver of a reply -
and each flow's hops are put in time order: client -> switch, switch ->
server, server -> switch, switch -> client. What happened is read off the
hops: served by the switch or a server, replicated (the request left on more
than one server port), retried (the client sent it again), dropped (a hop
with no next hop), duplicated (a frame seen twice, or two final replies), a
stale read (a version older than one a write had already acknowledged).

Capture points are named by file: ``switch-p<N>.pcap`` is switch port N
(node N's link; frames from node N to another node are "in", the rest
"out": a reply the switch makes from a request keeps the request's source),
``switch-cpu.pcap`` the CPU port, ``host-<name>.pcap`` a host's interface.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from netkv.wire import codec, pcap
from netkv.wire.codec import Kind, Proto
from netkv.wire.layout import FORMATS, decode_prefix
from netkv.trace_args import build_parser  # noqa: F401 - `python -m netkv.trace`

REQUEST_KINDS = (Kind.READ, Kind.WRITE, Kind.MULTIGET)
REPLY_KINDS = (Kind.READ_REPLY, Kind.WRITE_REPLY, Kind.MULTIGET_REPLY)
RESULT_RETRY = int(codec.Result.RETRY)


@dataclass(frozen=True)
class Frame:
    point: str
    where: str          # capture point: "p3", "cpu", "host:c0" ...
    port: int           # switch port (-1: a host capture; cpu: the CPU port number)
    inbound: bool       # towards the switch (switch capture) or towards the host
    ts_ns: int
    src: int | None     # rack node, None outside the plan (the controller)
    dst: int | None
    msg: codec.Msg


@dataclass
class Flow:
    point: str
    client: int
    req_id: int
    frames: list[Frame] = field(default_factory=list)

    def first(self) -> Frame:
        return min(self.frames, key=lambda f: f.ts_ns)


# ---- reading ------------------------------------------------------------------------


_PORT_FORMATS: dict[int, list[Proto]] = defaultdict(list)
for _p, _fmt in FORMATS.items():
    for _port in _fmt.ports:
        _PORT_FORMATS[_port].append(_p)


def decode_payload(udp: pcap.Udp) -> codec.Msg | None:
    """The message of a datagram on a netkv port (magic decides between
    formats sharing a port); None if it is not one or does not decode. A
    payload the snap length cut is read as far as it goes (its header)."""
    for port in (udp.dport, udp.sport):
        for proto in _PORT_FORMATS.get(port, ()):
            if udp.truncated:
                msg = decode_prefix(proto, udp.payload)
                if msg is not None and (FORMATS[proto].magic is None or _magic_ok(proto, udp)):
                    return msg
                continue
            try:
                return codec.decode(proto, udp.payload)
            except codec.WireError:
                continue
    return None


def _magic_ok(proto: Proto, udp: pcap.Udp) -> bool:
    return udp.payload[:2] == (FORMATS[proto].magic or 0).to_bytes(2, "big")


_FILE = re.compile(r"^(?:switch-p(?P<port>\d+)|switch-(?P<cpu>cpu)|host-(?P<host>.+))\.pcap$")


def capture_files(path: Path) -> dict[str, list[Path]]:
    """point key -> pcap files under PATH (a run dir, a point folder or a pcap)."""
    if path.is_file():
        return {path.stem: [path]}
    if (path / "capture").is_dir():
        found = {d.name: sorted(d.glob("*.pcap")) for d in sorted((path / "capture").iterdir())
                 if d.is_dir()}
    else:
        found = {path.name: sorted(path.glob("*.pcap"))}
    if not any(found.values()):  # a run without capture, or one stopped before any point
        raise FileNotFoundError(f"{path}: no pcap in it or its capture/ folder (a run writes "
                                "them with capture=true; docs/debugging.md)")
    return found


def read_frames(point: str, files: list[Path], cpu_port: int = -2,
                servers: int | None = None) -> tuple[list[Frame], int]:
    """Every decodable frame of a point's files, and how many were not
    (other traffic, frames cut by the snap length, bad payloads)."""
    frames: list[Frame] = []
    skipped = 0
    for f in files:
        m = _FILE.match(f.name)
        port, where, host = -1, f.stem, None
        if m and m.group("port") is not None:
            port, where = int(m.group("port")), f"p{m.group('port')}"
        elif m and m.group("cpu"):
            port, where = cpu_port, "cpu"
        elif m and m.group("host"):
            where, host = f"host:{m.group('host')}", _host_node(m.group("host"), servers)
        for rec in pcap.read(f):
            udp = pcap.parse_udp(rec)
            msg = decode_payload(udp) if udp is not None else None
            if msg is None or udp is None:
                skipped += 1
                continue
            src, dst = pcap.ip_node(udp.src_ip), pcap.ip_node(udp.dst_ip)
            if where == "cpu":
                inbound = src is None  # from the controller into the pipeline
            elif port >= 0:  # a frame the switch sends back to its sender (a
                inbound = src == port and dst != port  # cache hit) keeps its source

            else:  # a host's interface: "in" is towards the host
                inbound = host is not None and dst == host
            frames.append(Frame(point, where, port, inbound, rec.ts_ns, src, dst, msg))
    return frames, skipped


def _host_node(name: str, servers: int | None) -> int | None:
    """Mininet hosts: s<i> is node i, c<j> node servers + j (netkv.mininet.rack)."""
    m = re.fullmatch(r"([sc])(\d+)", name)
    if m is None or (m.group(1) == "c" and servers is None):
        return None
    return int(m.group(2)) + ((servers or 0) if m.group(1) == "c" else 0)


# ---- flows ---------------------------------------------------------------------------


def flows_of(frames: Iterable[Frame]) -> tuple[dict[tuple[int, int], Flow], list[Frame]]:
    """Group request/reply frames by (client node, req_id); the rest (control
    traffic, the controller's packets) is returned apart."""
    flows: dict[tuple[int, int], Flow] = {}
    other: list[Frame] = []
    for fr in frames:
        kind = fr.msg.kind
        client = fr.src if kind in REQUEST_KINDS else fr.dst if kind in REPLY_KINDS else None
        if client is None:
            other.append(fr)
            continue
        key = (client, fr.msg.req_id)
        if key not in flows:
            flows[key] = Flow(fr.point, client, fr.msg.req_id)
        flows[key].frames.append(fr)
    for fl in flows.values():
        fl.frames.sort(key=lambda f: (f.ts_ns, not f.inbound))
    return flows, other


def _key_of(m: codec.Msg) -> str:
    return m.key.hex() if m.key else f"#{m.keyhash:08x}"


def hop_signature(fl: Flow, switch_only: bool = True) -> tuple[tuple[str, str, str], ...]:
    """The flow's hops without times: (capture point, in/out, op), in order -
    what a simulated and a real run of one config should agree on."""
    return tuple((f.where, "in" if f.inbound else "out", codec.op_name(f.msg.proto, f.msg.op))
                 for f in fl.frames if not switch_only or f.port >= 0 or f.where == "cpu")


def role_signature(fl: Flow) -> tuple[tuple[str, str, str], ...]:
    """The switch-port hops with ports named by role: the flow's client, the
    request's home server, another server, the CPU port. Two runs of one
    config (simulated and real) draw different keys and req ids, but each
    request should take a hop sequence of the same shape."""
    home = next((f.msg.server_id for f in fl.frames if f.msg.kind in REQUEST_KINDS), None)

    def role(f: Frame) -> str:
        if f.where == "cpu":
            return "cpu"
        return "client" if f.port == fl.client else "home" if f.port == home else "server"

    return tuple((role(f), "in" if f.inbound else "out", codec.op_name(f.msg.proto, f.msg.op))
                 for f in fl.frames if f.port >= 0 or f.where == "cpu")


def analyse(fl: Flow, servers: set[int]) -> dict[str, Any]:
    """One flow's row: what happened and the per-hop times."""
    sw = [f for f in fl.frames if f.port >= 0]  # switch ports: the common view
    req_in = [f for f in sw if f.inbound and f.src == fl.client and f.msg.kind in REQUEST_KINDS]
    to_srv = [f for f in sw if not f.inbound and f.msg.kind in REQUEST_KINDS and f.dst in servers]
    from_srv = [f for f in sw if f.inbound and f.msg.kind in REPLY_KINDS]
    to_cli = [f for f in sw if not f.inbound and f.msg.kind in REPLY_KINDS and f.dst == fl.client]
    final = [f for f in to_cli if f.msg.result != RESULT_RETRY]
    first = req_in[0] if req_in else fl.first()
    m = first.msg
    seen: set[tuple[str, bool, bytes]] = set()
    dup_frames = 0
    for f in sw:
        sig = (f.where, f.inbound, codec.encode(f.msg))
        dup_frames += sig in seen
        seen.add(sig)
    answered = bool(final)
    reply = final[0] if final else None
    # a switch-served reply reached the client without a server answering
    by_switch = answered and not [f for f in from_srv if reply is not None
                                  and f.ts_ns <= reply.ts_ns]
    t_send = first.ts_ns
    row: dict[str, Any] = {
        "point": fl.point, "client": fl.client, "req_id": fl.req_id,
        "proto": Proto(m.proto).name.lower(), "op": codec.op_name(m.proto, m.op),
        "write": m.kind == Kind.WRITE, "key": _key_of(m),
        "home": m.server_id if m.server_id != codec.SERVER_NONE else None,
        "server": (reply.msg.server_id if reply is not None and not by_switch
                   and reply.msg.server_id != codec.SERVER_NONE
                   else (from_srv[0].src if from_srv and not by_switch else None)),
        "served_by": "switch" if by_switch else "server" if answered else None,
        "completed": answered,
        "sends": len(req_in),
        "retried": len(req_in) > 1 or len(to_cli) > len(final),
        "fanout": len({f.dst for f in to_srv}),
        "replicated": len({f.dst for f in to_srv}) > 1,
        "dropped": _dropped(req_in, to_srv, from_srv, to_cli, answered),
        "duplicated": dup_frames > 0 or len(final) > len({f.src for f in final}),
        "ver": reply.msg.ver if reply is not None else None,
        "t_send_ns": t_send,
        "t_reply_ns": reply.ts_ns if reply is not None else None,
        "latency_ns": reply.ts_ns - t_send if reply is not None else None,
        "switch_in_ns": to_srv[0].ts_ns - t_send if to_srv else None,
        "server_ns": (from_srv[0].ts_ns - to_srv[0].ts_ns) if to_srv and from_srv else None,
        "switch_out_ns": (reply.ts_ns - from_srv[0].ts_ns) if reply is not None and from_srv
        and not by_switch else None,
        "hops": " ".join(f"{w}:{d}:{op}" for w, d, op in hop_signature(fl)),
        "stale": False,
    }
    return row


def _dropped(req_in: list[Frame], to_srv: list[Frame], from_srv: list[Frame],
             to_cli: list[Frame], answered: bool) -> str | None:
    """Where the flow's packets stopped, if it never completed."""
    if answered:
        return None
    if req_in and not to_srv and not to_cli:
        return "at the switch (request not forwarded)"
    if to_srv and not from_srv:
        return "at or on the way to the server (no reply)"
    if from_srv and not to_cli:
        return "at the switch (reply not forwarded)"
    if not req_in:
        return "before the switch (no request seen)"
    return "on the way to the client"


def mark_stale(rows: list[dict[str, Any]]) -> None:
    """A read is stale if it returned a version older than one a write of the
    same key had acknowledged before the read was sent (same point)."""
    acked: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for r in rows:
        if r["write"] and r["completed"] and r["ver"]:
            acked[(r["point"], r["key"])].append((r["t_reply_ns"], r["ver"]))
    for lst in acked.values():
        lst.sort()
    for r in rows:
        if r["write"] or not r["completed"] or r["ver"] is None:
            continue
        newest = 0
        for t, v in acked.get((r["point"], r["key"]), ()):
            if t >= r["t_send_ns"]:
                break
            newest = max(newest, v)
        r["stale"] = r["ver"] < newest


# ---- the command -----------------------------------------------------------------------


@dataclass
class Trace:
    rows: list[dict[str, Any]]
    flows: dict[str, dict[tuple[int, int], Flow]]
    other: dict[str, int]
    skipped: dict[str, int]
    frames: dict[str, int]


def run_servers(path: Path) -> int | None:
    cfg = path / "config.yaml"
    if path.is_dir() and cfg.is_file():
        data = yaml.safe_load(cfg.read_text())
        return int(data["topology"]["servers"])
    return None


def trace(path: Path, servers: int | None = None) -> Trace:
    """Decode and follow every frame under PATH."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such run directory, capture folder or pcap")
    n_servers = servers if servers is not None else run_servers(path)
    out = Trace([], {}, {}, {}, {})
    for point, files in capture_files(path).items():
        cpu = _cpu_port(files)
        frames, skipped = read_frames(point, files, cpu, n_servers)
        flows, other = flows_of(frames)
        if n_servers is not None:
            srv = set(range(n_servers))
        else:  # nodes that send replies
            srv = {f.src for f in frames if f.msg.kind in REPLY_KINDS and f.src is not None}
        out.flows[point] = flows
        out.other[point] = len(other)
        out.skipped[point] = skipped
        out.frames[point] = len(frames)
        out.rows += [analyse(fl, srv) for fl in flows.values()
                     if fl.client not in srv]  # servers' own requests (forwarding) apart
    mark_stale(out.rows)
    return out


def _cpu_port(files: list[Path]) -> int:
    ports = [int(m.group("port")) for f in files if (m := _FILE.match(f.name)) and m.group("port")]
    return max(ports) + 1 if ports else -2


def flows_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    schema = {
        "point": pl.String, "client": pl.Int32, "req_id": pl.Int64, "proto": pl.String,
        "op": pl.String, "write": pl.Boolean, "key": pl.String, "home": pl.Int32,
        "server": pl.Int32, "served_by": pl.String, "completed": pl.Boolean, "sends": pl.Int32,
        "retried": pl.Boolean, "fanout": pl.Int32, "replicated": pl.Boolean,
        "dropped": pl.String, "duplicated": pl.Boolean, "ver": pl.UInt64,
        "t_send_ns": pl.Int64, "t_reply_ns": pl.Int64, "latency_ns": pl.Int64,
        "switch_in_ns": pl.Int64, "server_ns": pl.Int64, "switch_out_ns": pl.Int64,
        "hops": pl.String, "stale": pl.Boolean,
    }
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def apply_filters(df: pl.DataFrame, args: argparse.Namespace) -> pl.DataFrame:
    if args.key is not None:
        want = args.key.encode().hex() if not re.fullmatch(r"(#)?[0-9a-f]+", args.key) else args.key
        df = df.filter((pl.col("key") == want) | (pl.col("key") == args.key))
    if args.op is not None:
        df = df.filter(pl.col("op") == args.op.upper())
    if args.client is not None:
        df = df.filter(pl.col("client") == args.client)
    if args.server is not None:
        df = df.filter(pl.col("server") == args.server)
    if args.only == "switch":
        df = df.filter(pl.col("served_by") == "switch")
    elif args.only == "dropped":
        df = df.filter(pl.col("dropped").is_not_null())
    elif args.only is not None:
        df = df.filter(pl.col(args.only))
    if args.point is not None:
        df = df.filter(pl.col("point").str.contains(args.point, literal=True))
    start = df["t_send_ns"].min() if not df.is_empty() else 0
    if args.since is not None:
        df = df.filter(pl.col("t_send_ns") - start >= int(args.since * 1e9))
    if args.until is not None:
        df = df.filter(pl.col("t_send_ns") - start < int(args.until * 1e9))
    return df


def summary(df: pl.DataFrame) -> pl.DataFrame:
    return df.group_by("point", maintain_order=True).agg(
        pl.len().alias("requests"),
        pl.col("completed").sum(),
        (pl.col("served_by") == "switch").sum().alias("by_switch"),
        (pl.col("served_by") == "server").sum().alias("by_server"),
        pl.col("replicated").sum(),
        pl.col("retried").sum(),
        pl.col("dropped").is_not_null().sum().alias("dropped"),
        pl.col("duplicated").sum(),
        pl.col("stale").sum(),
        pl.col("latency_ns").median().alias("p50_ns"),
    )


def print_flow(t: Trace, row: dict[str, Any], out: Any) -> None:
    fl = t.flows[row["point"]][(row["client"], row["req_id"])]
    what = [row["served_by"] and f"served by {row['served_by']}"
            + (f" {row['server']}" if row["served_by"] == "server" else "")]
    for flag in ("replicated", "retried", "duplicated", "stale"):
        if row[flag]:
            what.append(flag + (f" x{row['fanout']}" if flag == "replicated" else ""))
    if row["dropped"]:
        what.append(f"dropped {row['dropped']}")
    print(f"client {row['client']} req {row['req_id']} {row['op']} key {_show_key(row['key'])}: "
          f"{', '.join(w for w in what if w)}", file=out)
    t0 = fl.frames[0].ts_ns
    for f in fl.frames:
        m = f.msg
        if f.port >= 0 or f.where == "cpu":
            arrow = "in " if f.inbound else "out"
        else:
            arrow = "rx " if f.inbound else "tx "
        extra = f" ver={m.ver}" if m.ver else ""
        print(f"  {(f.ts_ns - t0) / 1e3:10.3f} us  {f.where:<10} {arrow} "
              f"{_node(f.src)} > {_node(f.dst)}  {codec.op_name(m.proto, m.op)}{extra}", file=out)


def _show_key(key: str) -> str:
    """A key as text when it is printable, else hex; at most 24 characters."""
    if key.startswith("#"):
        return key
    raw = bytes.fromhex(key)
    text = raw.decode("ascii", "replace") if raw.isascii() and raw.decode().isprintable() else key
    return text if len(text) <= 24 else text[:21] + "..."


def _node(n: int | None) -> str:
    return "ctl" if n is None else str(n)


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    return cmd_trace(args)


def op_error(op: str | None) -> str | None:
    """--op that names no op of any protocol: it matched nothing without a word."""
    ops = sorted({o.name for enum in codec.OPS.values() for o in enum})
    if op is None or op.upper() in ops:
        return None
    return f"--op {op!r} is not an op (allowed: {', '.join(ops)})"


def point_error(point: str | None, points: Iterable[str],
                uncaptured: Iterable[str] = ()) -> str | None:
    """--point that is part of no captured point's key (a typo, another
    run's key, or a point run uncaptured once the run's capture budget was
    reached): it matched nothing without a word."""
    keys = list(points)
    if point is None or any(point in k for k in keys):
        return None
    late = [k for k in uncaptured if point in k]
    if late:
        return (f"--point {point!r}: {late[0]} ran without capture (the run's capture folder "
                f"had reached capture_limits.max_total_mb; its points: {', '.join(keys)})")
    return f"--point {point!r} is in no point of this capture (its points: {', '.join(keys)})"


def cmd_trace(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if error := op_error(args.op):   # before decoding, which can take a while
        print(f"netkv: {error}", file=sys.stderr)
        return 2
    try:
        t = trace(path, args.servers)
    except (FileNotFoundError, pcap.PcapError) as exc:
        print(f"netkv: {exc}", file=sys.stderr)
        return 2
    from netkv.results.capture import not_captured

    run = path if path.is_dir() and (path / "provenance.json").is_file() else None
    if error := point_error(args.point, t.frames, not_captured(run) if run else ()):
        print(f"netkv: {error}", file=sys.stderr)
        return 2
    df = apply_filters(flows_frame(t.rows), args)
    out = Path(args.parquet) if args.parquet else (
        path / "trace.parquet" if path.is_dir() else path.with_suffix(".flows.parquet"))
    df.write_parquet(out)
    with pl.Config(tbl_rows=100, tbl_cols=20, tbl_width_chars=160):
        print(summary(df))
    for point in t.frames:
        print(f"{point}: {t.frames[point]} frames decoded, {t.other[point]} control/other, "
              f"{t.skipped[point]} not decodable (other traffic or cut by snaplen)")
    for row in df.head(args.show).iter_rows(named=True):
        print_flow(t, row, sys.stdout)
    print(f"flows: {out} ({df.height} rows)")
    return 0

