"""kvserver's preload is what its protocol's requests find (apps/kvserver.c,
docs/mininet.md): for every protocol, a server preloaded with `--preload
all` answers a read of a never-written key with the preloaded value (value
id 0, the workload's size, version 1 where the wire has one), as the
simulator's store does. The read is built as the Mininet read-back does
(tests/test_hostile_mininet.py): the protocol's read op, the key as its wire
carries it (the plug-in's ``wire_key``: NetCache's and KVSwitch's first
16 B, NetLR's object id). NetCache's and KVSwitch's wires carry no keyhash:
the store hashes the key bytes they carry (nk_wire_store_keyhash), where it
used to look for keyhash 0 and answer NOT_FOUND."""

from __future__ import annotations

import importlib
import json
import socket
import subprocess
import time

import pytest

from netkv.native import NativeBuildMissing, program_path
from netkv.protocols import PROTOCOLS, implemented_on, lookup
from netkv.sim.engine import Workload
from netkv.wire.codec import KINDS, Kind, Msg, Proto, decode, encode, starcache_hkey

KEYS = 16
VALUE = 128


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keys(key_size: int) -> list[tuple[bytes, int]]:
    """(key bytes, keyhash) of every key of the workload kvserver preloads."""
    from netkv.sim import native

    ffi, lib = native.load()
    with Workload(kind="uniform", keys=KEYS, alpha=0.0, seed=1, servers=1,
                  key_size=key_size) as wl:
        info = wl.rank_info()
    out = []
    for key, keyhash in zip(info["key"], info["keyhash"], strict=True):
        kb = ffi.new("uint8_t[64]")
        lib.nk_key_bytes(int(key), key_size, kb)
        out.append((bytes(ffi.buffer(kb, key_size)), int(keyhash)))
    return out


@pytest.mark.parametrize("key_size", [64, 8])
@pytest.mark.parametrize("protocol", implemented_on("mininet"))
def test_a_read_of_a_never_written_key_finds_the_preloaded_value(protocol: str,
                                                                  key_size: int) -> None:
    try:
        kv = str(program_path("kvserver"))
    except NativeBuildMissing as exc:
        pytest.skip(str(exc))
    plugin = lookup(protocol)
    wire_key = getattr(importlib.import_module(PROTOCOLS[plugin.name]), "wire_key", None)
    read = next(op for op, kind in KINDS[plugin.wire].items() if kind == Kind.READ)
    port = _free_port()
    p = subprocess.Popen([kv, "--protocol", protocol, "--id", "0", "--servers", "1",
                          "--clients", "1", "--keys", str(KEYS), "--key-size", str(key_size),
                          "--value-size", str(VALUE), "--preload", "all", "--port", str(port)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got = []
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(0.2)
            for i, (key, keyhash) in enumerate(_keys(key_size)):
                kb = wire_key(key) if wire_key is not None else key
                m = Msg(proto=plugin.wire, op=int(read), server_id=0, client_id=0,
                        req_id=100 + i, keyhash=keyhash, key=kb, key_slot_len=len(kb),
                        hkey=starcache_hkey(kb) if plugin.wire == Proto.STARCACHE else 0)
                r = None
                deadline = time.monotonic() + 10
                while r is None:
                    assert p.poll() is None and time.monotonic() < deadline, "no reply"
                    s.sendto(encode(m), ("127.0.0.1", port))
                    try:
                        r = decode(plugin.wire, s.recv(65536))
                    except socket.timeout:
                        continue
                got.append((r.result, len(r.value), r.value[:8]))
    finally:
        p.terminate()
        out, err = p.communicate(timeout=10)
    assert p.returncode == 0, err.decode()[-2000:]
    stats = json.loads(out.decode().strip().splitlines()[-1])
    # NetLR's wire carries a value of 16 B
    size = min(VALUE, 16) if plugin.wire == Proto.NETLR else VALUE
    assert got == [(0, size, bytes(8))] * KEYS, got
    assert stats["not_found"] == 0 and stats["keys"] == KEYS, stats
