"""kvserver's store over its control socket (apps/kvserver.c; the Mininet
side of ControlPlane.copy_store and newest_version, docs/mininet.md):
store_dump pages the written entries (version above the preload's 1),
store_merge applies only newer versions, store_newest is the top version,
a malformed entry is refused in one line."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from netkv.drivers.base import DriverError
from netkv.drivers.netkv_switch import CtlSocket
from netkv.native import NativeBuildMissing, program_path

V16 = bytes(range(16)).hex()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def ctl(tmp_path: Path):  # type: ignore[no-untyped-def]
    try:
        kv = str(program_path("kvserver"))
    except NativeBuildMissing as exc:
        pytest.skip(str(exc))
    path = tmp_path / "kv.sock"
    p = subprocess.Popen([kv, "--protocol", "netlr", "--id", "0", "--servers", "1",
                          "--clients", "1", "--keys", "100", "--key-size", "16",
                          "--value-size", "16", "--preload", "all", "--port", str(_free_port()),
                          "--ctl", str(path)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not path.exists():
            assert p.poll() is None and time.monotonic() < deadline, "kvserver did not start"
            time.sleep(0.01)
        sock = CtlSocket(path)
        yield sock
        sock.close()
    finally:
        p.terminate()
        p.wait(timeout=10)


def dump(ctl: CtlSocket, page: int) -> list[str]:
    out, at = [], "0"
    while at != "end":
        at, *entries = ctl.request(f"store_dump {at} {page}").split()
        out += entries
    return out


def test_merge_dump_and_newest(ctl: CtlSocket) -> None:
    assert dump(ctl, 4) == []                       # the preload (version 1) is not written
    assert ctl.request("store_newest") == "1"
    entries = [f"{kh:08x}:{kh:08x}:{5 + kh}:{V16}" for kh in range(1, 8)]
    assert ctl.request("store_merge " + " ".join(entries)) == "7"
    assert sorted(dump(ctl, 2)) == sorted(entries)    # paged 2 at a time
    assert ctl.request("store_newest") == "12"
    # newer only: an older copy of key 1 is ignored, a newer one applied
    older, newer = f"00000001:00000001:3:{V16}", f"00000001:00000001:9:{'ff' * 16}"
    assert ctl.request(f"store_merge {older} {newer}") == "1"
    assert f"00000001:00000001:9:{'ff' * 16}" in dump(ctl, 100)
    # the check can fail: the same merge again moves nothing
    assert ctl.request(f"store_merge {newer}") == "0"


@pytest.mark.parametrize("bad", ["1:2:3:00", "00000001:zz:5:00", "00000001:00000001:1:00",
                                 "00000001:00000001:5:00:extra", "00000001:00000001:5"])
def test_a_malformed_entry_is_refused_in_one_line(ctl: CtlSocket, bad: str) -> None:
    with pytest.raises(DriverError, match=r"KEYHASH:KEY:VER:VALUE") as e:
        ctl.request(f"store_merge {bad}")
    assert "\n" not in str(e.value)
    assert dump(ctl, 10) == []


def test_copy_store_lines_fit_the_control_socket(ctl: CtlSocket) -> None:
    """copy_store with the default workload's 64-byte keys and 128-byte
    values (~400 characters an entry): every store_merge line fits ctl.h's
    16 KiB and 64 words, and every entry arrives. Before, 48 entries a line
    (~19 KiB) were refused ("request line too long") and Pegasus' switch
    restart on Mininet failed in its merge."""
    from netkv.mininet.rack import MERGE_BATCH, MERGE_LINE, copy_store, merge_lines

    key, value = "6b" * 64, "76" * 128
    entries = [f"{kh:08x}:{key[:-8]}{kh:08x}:{5 + kh}:{value}" for kh in range(1, 301)]
    lines = list(merge_lines(entries))
    assert all(len(ln) <= MERGE_LINE and len(ln.split()) <= MERGE_BATCH + 1 for ln in lines)
    assert [e for ln in lines for e in ln.split()[1:]] == entries
    pages = iter([f"end {' '.join(entries)}"])

    def two(server: int, line: str) -> str:   # server 1 dumps, server 0 (kvserver) merges
        return next(pages) if server == 1 else ctl.request(line)

    assert copy_store(two, 1, 0) == 300
    assert sorted(dump(ctl, 1000)) == sorted(entries)


def test_an_entry_too_long_for_a_line_is_refused_in_one_line() -> None:
    """An entry that alone makes a store_merge line longer than MERGE_LINE
    (an 8,000-byte value, 16,000 hex characters) cannot be split: merge_lines
    refuses it in one line before yielding anything. Before, it was sent as
    a line of its own over 16,000 characters (kvserver: 'request line too
    long')."""
    from netkv.mininet.rack import MERGE_LINE, merge_lines

    small = f"00000001:{'6b' * 8}:5:{'76' * 8}"
    big = f"00000002:{'6b' * 8}:6:{'76' * 8000}"
    assert len("store_merge " + big) > MERGE_LINE
    with pytest.raises(ValueError, match=r"key hash 00000002 is 16,028 characters, over") as e:
        list(merge_lines([small, big]))
    assert "\n" not in str(e.value)
    edge = f"00000003:{'6b' * 8}:7:" + "7" * (MERGE_LINE - 12 - 28)
    assert len("store_merge " + edge) == MERGE_LINE
    assert list(merge_lines([edge])) == [f"store_merge {edge}"]


def test_a_coordinator_exits_cleanly() -> None:
    """kvserver --mode coord frees the coordinator's state with coord_fini:
    it called server_fini, which read NetMC's coordinator state as a
    server's and freed a non-pointer (glibc aborted at exit; ASan: bad-free)."""
    try:
        kv = str(program_path("kvserver"))
    except NativeBuildMissing as exc:
        pytest.skip(str(exc))
    p = subprocess.Popen([kv, "--protocol", "netmc", "--params", "scheme=coordimc",
                          "--mode", "coord", "--coords", "1", "--id", "0", "--servers", "2",
                          "--clients", "1", "--keys", "100", "--key-size", "16",
                          "--port", str(_free_port())], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    assert p.poll() is None, f"kvserver exited early: {p.communicate()[1]}"
    p.terminate()
    _out, err = p.communicate(timeout=10)
    assert p.returncode == 0, err
