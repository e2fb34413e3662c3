"""capture=true on Mininet: every switch port (the switch back-end's own
capture, the CPU port included: netkv-switch's `capture` command) and every host's interface (tcpdump in the host's
namespace), into one folder per load point.

Bounds (``capture_limits``): frames cut to snaplen; each switch file stops at
max_bytes / max_packets and counts what it left out; tcpdump stops after
min(max_packets, max_bytes / (snaplen + 16)) frames, which bounds its file the
same way, and the frames it did not write are reported from its own counters.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from netkv import procstat


PCAP_RECORD_OVERHEAD = 16
_TCPDUMP_COUNTS = re.compile(r"(\d+) packets? (captured|received by filter|dropped by kernel)")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (tcpdump's cost), 0 if gone."""
    return procstat.cpu_ticks(pid) / os.sysconf("SC_CLK_TCK")


def host_file(name: str, tag: str) -> str:
    """host-s0.pcap, host-c1.pcap: the Mininet host name without the run tag."""
    return f"host-{name.removeprefix(tag)}.pcap"


class RackCapture:
    """One load point's capture on a running rack: ``start()``, then ``stop()``
    returns per file {"packets", "missed", "busy_s"}."""

    def __init__(self, rack: Any, backend: Any, driver: Any, folder: Path, snaplen: int,
                 max_bytes: int, max_packets: int) -> None:
        self.rack, self.backend, self.driver, self.folder = rack, backend, driver, folder
        self.snaplen, self.max_bytes, self.max_packets = snaplen, max_bytes, max_packets
        self.dumps: list[tuple[str, subprocess.Popen[str], int]] = []
        self.switch_on = False

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.backend.capture_start(self.driver, self.folder, self.snaplen, self.max_bytes,
                                   self.max_packets)
        self.switch_on = True
        count = max(1, min(self.max_packets,
                           self.max_bytes // (self.snaplen + PCAP_RECORD_OVERHEAD)))
        for host in [*self.rack.servers, *self.rack.clients]:
            name = host_file(host.name, self.rack.spec.tag)
            args = ["tcpdump", "-i", str(host.defaultIntf()), "-w", str(self.folder / name),
                    "-s", str(self.snaplen), "-c", str(count), "-n", "--immediate-mode",
                    "--time-stamp-precision=nano", "udp"]
            p = host.popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            self.rack.state.add_pid(p.pid)
            self.dumps.append((name, p, count))
        for name, p, _ in self.dumps:  # listening before the first packet
            line = p.stderr.readline() if p.stderr is not None else ""
            deadline = time.monotonic() + 10
            while "listening on" not in line:
                if p.poll() is not None or time.monotonic() > deadline:
                    rest = p.stderr.read() if p.stderr is not None and p.poll() is not None else ""
                    self.stop()
                    raise RuntimeError(f"tcpdump for {name} did not start: {line}{rest}".strip())
                line = p.stderr.readline() if p.stderr is not None else ""

    def stop(self) -> dict[str, dict[str, Any]]:
        files: dict[str, dict[str, Any]] = {}
        if self.switch_on:
            files.update(self.backend.capture_stop(self.driver))
            self.switch_on = False
        for name, p, count in self.dumps:
            busy = cpu_seconds(p.pid)
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
            try:
                _, err = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
            got = {kind: int(n) for n, kind in _TCPDUMP_COUNTS.findall(err or "")}
            captured = got.get("captured", 0)
            missed = max(got.get("received by filter", 0) - captured, 0)
            missed += got.get("dropped by kernel", 0)
            if captured >= count:  # stopped at its bound: what followed is unknown
                missed = max(missed, 1)
            files[name] = {"packets": captured, "missed": missed, "busy_s": busy}
        self.dumps = []
        return files
