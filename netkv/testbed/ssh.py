"""OpenSSH's client, the testbed's only way onto a host.

Why not PyREM (the package the design card names; 0.2.0 imports on Python
3.11): it runs ``ssh host 'cmd'`` with no user, port, known-hosts file or
batch mode (so no pinned host keys, and a prompt can hang a run), joins the
command without quoting, stops remote processes with ``kill -9`` (no exit
report) and has no stdin for the clients' start handshake. asyncssh would
add a dependency for what the system's ``ssh`` does: multiplexed sessions
(``ControlMaster``), Unix-socket forwarding (``-L local.sock:remote.sock``,
how the controller reaches netkv-switch's and kvservers' control sockets),
and pinned host keys (``StrictHostKeyChecking=yes`` with the inventory's
``known_hosts`` and nothing else).

Long-lived remote programs run under a small sh wrapper (``lifeline``): the
program gets SIGTERM when the ssh session's stdin closes, which happens when
we close it, and when netkv dies (even SIGKILL: the ssh client goes, sshd
closes the session), so nothing is left running remotely.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from netkv.config.compose import ConfigError
from netkv.testbed.inventory import Host

CONNECT_TIMEOUT_S = 5


class RemoteError(ConfigError):
    """A host cannot be used (unreachable, key refused, command failed): one line."""


def lifeline(argv: Sequence[str], pidfile: str) -> str:
    """``argv`` as a remote shell command that lives while the session's stdin
    is open: SIGTERM to the program when it closes, then its exit status. A
    program that leads its own process group (``setsid``, e.g. a script whose
    child is the real switch) gets it for the whole group."""
    prog = shlex.join(argv)
    return ("exec 3<&0; " + prog + " </dev/null & p=$!; echo $p > " + shlex.quote(pidfile)
            + "; { cat <&3 >/dev/null; kill -TERM -$p 2>/dev/null || kill -TERM $p 2>/dev/null;"
            " } & w=$!; "
            "wait $p; rc=$?; kill $w 2>/dev/null; exit $rc")


def missing_script(programs: Sequence[str]) -> str:
    """A shell command printing each of ``programs`` not found: a name on
    PATH (``command -v``), an absolute path an executable file (``command
    -v`` of a path is only a test for existence in dash)."""
    names = " ".join(shlex.quote(p) for p in programs)
    return (f'for p in {names}; do case "$p" in /*) [ -f "$p" ] && [ -x "$p" ];; '
            '*) command -v "$p" >/dev/null;; esac || echo "$p"; done')


class Ssh:
    """One host: commands, processes and forwarded sockets over one
    multiplexed connection."""

    def __init__(self, host: Host, known_hosts: str, control_dir: Path) -> None:
        self.host = host
        self.known_hosts = known_hosts
        self.control_dir = control_dir

    def options(self, multiplex: bool = True) -> list[str]:
        h = self.host
        opts = ["-p", str(h.port), "-i", h.key, "-l", h.user,
                "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", "StrictHostKeyChecking=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                "-o", "LogLevel=ERROR"]
        if multiplex:
            opts += ["-o", "ControlMaster=auto", "-o", f"ControlPath={self.control_dir}/%C",
                     "-o", "ControlPersist=120"]
        else:
            opts += ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
        return opts

    def argv(self, command: str, multiplex: bool = True) -> list[str]:
        if self.host.path:  # the inventory's folders first (programs netkv does not push)
            dirs = ":".join(shlex.quote(d) for d in self.host.path)
            command = f'PATH={dirs}:"$PATH"; export PATH; {command}'
        return ["ssh", *self.options(multiplex), self.host.ssh, command]

    def describe(self, stderr: str, rc: int) -> str:
        """One line for what ssh said."""
        text = " ".join(stderr.split())
        h = f"host {self.host.name!r} ({self.host.user}@{self.host.ssh}:{self.host.port})"
        low = text.lower()
        if "permission denied" in low:
            return f"{h}: key {self.host.key} refused ({text})"
        if "host key verification failed" in low or "no matching host key" in low \
                or "remote host identification has changed" in low:
            return f"{h}: host key not in {self.known_hosts} or changed ({text})"
        if any(s in low for s in ("timed out", "no route", "refused", "unreachable",
                                  "could not resolve", "network is unreachable")):
            return f"{h}: unreachable ({text})"
        if "no such file" in low and "identity" in low or "load key" in low:
            return f"{h}: cannot read key {self.host.key} ({text})"
        return f"{h}: ssh exit {rc} ({text or 'no message'})"

    def check(self) -> None:
        """Raise RemoteError (one line) unless a command runs there."""
        try:
            res = subprocess.run(self.argv("true"), capture_output=True, text=True,
                                 timeout=CONNECT_TIMEOUT_S * 3, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise RemoteError(f"host {self.host.name!r} ({self.host.ssh}): unreachable "
                              f"(no answer in {CONNECT_TIMEOUT_S * 3} s)") from None
        if res.returncode != 0:
            raise RemoteError(self.describe(res.stderr, res.returncode))

    def run(self, command: str, timeout_s: float = 60.0, input_text: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            res = subprocess.run(self.argv(command), capture_output=True, text=True,
                                 timeout=timeout_s, input=input_text,
                                 stdin=None if input_text is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise RemoteError(f"host {self.host.name!r}: `{command[:60]}` took more than "
                              f"{timeout_s:g} s") from None
        if check and res.returncode != 0:
            if res.returncode == 255:
                raise RemoteError(self.describe(res.stderr, res.returncode))
            tail = " ".join((res.stderr or res.stdout).split())[-300:]
            raise RemoteError(f"host {self.host.name!r}: `{command[:60]}` failed "
                              f"(exit {res.returncode}): {tail}")
        return res

    def popen(self, command: str, **kw: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(command), text=True, **kw)

    def copy_to(self, local: Path, remote: str) -> None:
        """Copy one file (cat over the multiplexed session: no scp/sftp needed).
        The temporary name is the remote shell's own (``$$``) and the rename
        atomic: hosts that share a file system (the namespace rack) may push
        the same binary at once."""
        data = local.read_bytes()
        q = shlex.quote(remote)
        res = subprocess.run(self.argv(f't={q}.tmp.$$ && cat > "$t" && chmod 755 "$t" && '
                                       f'mv -f "$t" {q}'),
                             input=data, capture_output=True, timeout=120)
        if res.returncode != 0:
            raise RemoteError(f"host {self.host.name!r}: copying {local.name} failed: "
                              f"{' '.join(res.stderr.decode(errors='replace').split())}")

    def read(self, remote: str) -> bytes:
        res = subprocess.run(self.argv(f"cat {shlex.quote(remote)}"), capture_output=True,
                             timeout=60, stdin=subprocess.DEVNULL)
        if res.returncode != 0:
            raise RemoteError(f"host {self.host.name!r}: cannot read {remote}: "
                              f"{' '.join(res.stderr.decode(errors='replace').split())}")
        return res.stdout

    def forward(self, sockets: Sequence[tuple[Path, str]]) -> subprocess.Popen[str]:
        """Forward local Unix sockets to remote ones (its own connection: a
        forward stays up as long as this process)."""
        return self._forward([f"{local}:{remote}" for local, remote in sockets])

    def forward_tcp(self, ports: Mapping[int, int]) -> subprocess.Popen[str]:
        """Forward TCP ports of this machine's loopback to ports of the host's
        loopback ({local: remote}): nothing listens beyond 127.0.0.1 here,
        and the remote end is reached inside the SSH channel."""
        return self._forward([f"127.0.0.1:{local}:127.0.0.1:{remote}"
                              for local, remote in ports.items()])

    def _forward(self, specs: Sequence[str]) -> subprocess.Popen[str]:
        argv = ["ssh", *self.options(multiplex=False), "-N",
                "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes"]
        for spec in specs:
            argv += ["-L", spec]
        argv.append(self.host.ssh)
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)

    def missing(self, programs: Sequence[str]) -> list[str]:
        """The programs not found on the host's PATH (as netkv's commands
        there see it: the inventory's ``path`` first)."""
        if not programs:
            return []
        return self.run(missing_script(programs)).stdout.split()

    def close(self) -> None:
        """End the multiplexed master connection, if any. Never raises: it
        runs in ``finally`` blocks, where an error would hide the one being
        raised (a master that does not answer in 10 s is left to
        ControlPersist, which ends it)."""
        try:
            subprocess.run(["ssh", *self.options(), "-O", "exit", self.host.ssh],
                           capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
        except (subprocess.TimeoutExpired, OSError):
            pass
