"""The clients' start handshake, on any rack (Mininet, the testbed).

Every kvclient builds its workload (alias table, permutation: seconds for
millions of keys) and prints ``ready``; once all are ready each is sent the
one start instant on stdin (``--start-at stdin``), so the load begins at
once on every client; then each is waited for within ``run_s`` of it.
"""

from __future__ import annotations

import selectors
import subprocess
import time
from collections.abc import Callable, Sequence


def start_together(procs: Sequence[subprocess.Popen[str]], start_text: Callable[[], str],
                   ready_timeout_s: float, log_tail: Callable[[int], str]) -> None:
    """Wait for every client's ``ready``, then write ``start_text()`` (the
    instant, computed once all are ready) to each and close its stdin."""
    sel = selectors.DefaultSelector()
    for j, p in enumerate(procs):
        assert p.stdout is not None
        sel.register(p.stdout, selectors.EVENT_READ, j)
    waiting = set(range(len(procs)))
    deadline = time.monotonic() + ready_timeout_s
    try:
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(
                    f"kvclient(s) {sorted(waiting)} not ready after {ready_timeout_s:.0f} s "
                    "(building the workload); no load was offered")
            for key, _ in sel.select(timeout=min(left, 1.0)):
                j = key.data
                line = key.fileobj.readline()  # type: ignore[union-attr]
                if line.strip() == "ready":
                    waiting.discard(j)
                    sel.unregister(key.fileobj)
                elif not line:  # EOF: it exited before being ready
                    procs[j].wait(timeout=10)
                    raise RuntimeError(f"kvclient {j} exited ({procs[j].returncode}) before "
                                       f"it was ready: {log_tail(j)}")
            for j in list(waiting):
                if procs[j].poll() is not None:
                    raise RuntimeError(f"kvclient {j} exited ({procs[j].returncode}) before "
                                       f"it was ready: {log_tail(j)}")
    finally:
        sel.close()
    text = start_text()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(text)
        p.stdin.close()


def wait_all(procs: Sequence[subprocess.Popen[str]], run_s: float, start_delay_ms: float,
             log_tail: Callable[[int], str]) -> None:
    """Each client exits 0 within ``run_s`` of the start, or one line says which did not."""
    deadline = time.monotonic() + start_delay_ms / 1e3 + run_s
    for j, p in enumerate(procs):
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"kvclient {j} did not finish within {run_s:.0f} s of "
                               "its start") from None
        if p.returncode:
            raise RuntimeError(f"kvclient {j} failed ({p.returncode}): {log_tail(j)}")
