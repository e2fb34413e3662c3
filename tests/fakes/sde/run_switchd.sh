#!/usr/bin/env python3
"""A FAKE $SDE/run_switchd.sh (tests/test_testbed_tofino.py): no switch at all.

As the real script does, it starts the switch as a child, not by exec: a
child named bf_switchd (its argv[0]) that listens where bf_switchd's
P4Runtime server does (127.0.0.1:9559) and answers each connection as an
HTTP/2 server does (a SETTINGS frame first), then one line naming itself,
so a test reads real bytes through the SSH forward; on SIGTERM the child
appends its run folder's name to fake-switchd.terms beside that folder (the
folder itself is removed at the end of a run). The script records its
command line, $SDE and $SDE_INSTALL, whether it leads its process group
(setsid) and the files beside the conf into fake-switchd.json there.
"""

import json
import os
import signal
import socket
import sys
from pathlib import Path

PORT = 9559


def serve() -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", PORT))
    s.listen(8)
    while True:
        conn, _ = s.accept()
        conn.settimeout(5)
        try:
            conn.recv(64)     # the client's preface
            conn.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]) + f"fake bf_switchd {PORT}\n".encode())
        except OSError:
            pass
        conn.close()


def stopped(*_: object) -> None:
    folder = Path(sys.argv[sys.argv.index("-c") + 1]).parent
    with open(folder.parent / "fake-switchd.terms", "a") as f:
        f.write(f"{folder.name}\n")
    os._exit(0)


if sys.argv[1:2] == ["--serve"]:
    signal.signal(signal.SIGTERM, stopped)
    serve()
argv = sys.argv[1:]
folder = Path(argv[argv.index("-c") + 1]).parent
(folder / "fake-switchd.json").write_text(json.dumps({
    "argv": argv, "sde": os.environ.get("SDE"), "sde_install": os.environ.get("SDE_INSTALL"),
    "group_leader": os.getpgid(0) == os.getpid(),
    "files": sorted(p.name for p in folder.iterdir())}))
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, ["bf_switchd", __file__, "--serve", *argv])
os.waitpid(pid, 0)
