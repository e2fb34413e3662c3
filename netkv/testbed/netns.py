"""A rack of network namespaces on this machine, reached only over SSH.

``python -m netkv.testbed.netns up [INVENTORY]`` (root) builds, from an
inventory (default ``conf/inventory/netns-rack.yaml``), one namespace per
host, each running its own sshd on its management address, with a generated
host key (pinned in the inventory's ``known_hosts``) and the generated client
key (the inventory's ``key``) authorised. The management network is a bridge
in the root namespace (the first address of the hosts' /24); the data
network wires the switch host's port i (``ports[i]``) to the i-th server,
client or coordinator host (servers first, then clients, then coordinators,
in inventory order) on its ``nic``.
Data addresses are the testbed target's to set per run (the rack plan).
``down`` removes everything ``up`` made; ``up`` on a built rack rebuilds it.

``up_session`` (the tests' fixture; no command line yet) builds a rack of
its own beside any other: a short token in its namespace and link names,
its own management /24,
keys, known_hosts and remote workdir, and its inventory written to its
folder (``/run/netkv/netns-<token>/``, with its owner's pid and start time). Two test
sessions (or CI and a developer) then never share a name. ``sweep`` (run by
``netkv clean``) finds every such rack: one whose owner is gone is removed.
"""

from __future__ import annotations

import argparse
import fcntl
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from netkv import procstat
from netkv.testbed.inventory import Host, Inventory

PREFIX = "nkt"
RACK_ROOT = Path("/run/netkv")
# a session's management network is 10.250.<n>.0/24, n in 1..254 (0: the
# checked-in inventory's fixed rack)
SESSION_NET = "10.250"
# a session rack's names start nkT<token>: Mininet's run tags (nk + 3
# lowercase letters or digits) prefix the links its clean removes, and none
# prefixes an upper-case T
SESSION_PREFIX = "nkT"


def _sh(*argv: str, check: bool = True, ns: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {res.stderr.strip() or res.returncode}")
    return res


def load(path: Path) -> Inventory:
    import yaml

    return Inventory.model_validate(yaml.safe_load(path.read_text()))


def default_inventory() -> Path:
    return Path(__file__).resolve().parents[2] / "conf" / "inventory" / "netns-rack.yaml"


def rack_dir(inv: Inventory) -> Path:
    return Path(inv.known_hosts).parent


def ns_name(host: Host, prefix: str = PREFIX) -> str:
    return f"{prefix}-{host.name}"


def prefix_of(inv: Inventory) -> str:
    """The rack's name prefix: a session rack's (recorded in its folder) or
    the fixed rack's."""
    try:
        return (rack_dir(inv) / "prefix").read_text().strip() or PREFIX
    except OSError:
        return PREFIX


def ns_of(inv: Inventory, host: Host) -> str:
    """The namespace of ``host`` in the rack built for ``inv``."""
    return ns_name(host, prefix_of(inv))


def owner_alive(folder: Path) -> bool:
    """Whether the session that made rack ``folder`` still runs (its pid and
    start time: a reused pid is another process)."""
    try:
        return procstat.owner_running((folder / "owner").read_text())
    except (OSError, ValueError):
        return not (folder / "owner").exists()   # unreadable: assume live


def _used_nets() -> set[int]:
    """Third octets of SESSION_NET /24s with an address on this machine."""
    out = _sh("ip", "-o", "-4", "addr", "show", check=False).stdout
    used = set()
    for word in out.split():
        if word.startswith(f"{SESSION_NET}."):
            used.add(int(word.split(".")[2]))
    return used


def session_inventory(inv: Inventory, token: str, net: int) -> Inventory:
    """``inv`` re-addressed for session rack ``token`` on 10.250.<net>.0/24:
    its own keys, known_hosts and remote workdir."""
    folder = RACK_ROOT / f"netns-{token}"
    hosts = [h.model_copy(update={
        "ssh": f"{SESSION_NET}.{net}.{h.ssh.rsplit('.', 1)[1]}",
        "key": str(folder / "id_ed25519"),
        "workdir": f"{h.workdir.rstrip('/')}-{token}",
    }) for h in inv.hosts]
    return inv.model_copy(update={"hosts": hosts, "known_hosts": str(folder / "known_hosts")})


def up_session(inv: Inventory) -> Inventory:
    """A rack of its own for this process (see the module's doc); its
    inventory. ``down`` removes it."""
    import yaml

    RACK_ROOT.mkdir(parents=True, exist_ok=True)
    # the /24 is chosen and claimed (its bridge address) under one lock
    with open(RACK_ROOT / "netns.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        used = _used_nets()
        free = [n for n in range(1, 255) if n not in used]
        if not free:
            raise SystemExit("netkv.testbed.netns: no free 10.250.<n>.0/24 for a session rack")
        token = secrets.token_hex(2)
        while (RACK_ROOT / f"netns-{token}").exists():
            token = secrets.token_hex(2)
        sess = session_inventory(inv, token, free[0])
        try:
            up(sess, f"{SESSION_PREFIX}{token}")
        except BaseException:
            down(sess, f"{SESSION_PREFIX}{token}")
            raise
    folder = rack_dir(sess)
    (folder / "prefix").write_text(f"{SESSION_PREFIX}{token}\n")
    (folder / "owner").write_text(procstat.owner_record() + "\n")
    (folder / "inventory.yaml").write_text(yaml.safe_dump(sess.model_dump(mode="json"),
                                                          sort_keys=False))
    return sess


def session_racks() -> list[Path]:
    """Every session rack's folder on this machine."""
    return sorted(RACK_ROOT.glob("netns-*/inventory.yaml")) if RACK_ROOT.exists() else []


def sweep() -> tuple[list[Inventory], list[str]]:
    """Session racks: the live ones' inventories, and the names of those
    removed (their owner gone: a crashed session's)."""
    live: list[Inventory] = []
    removed: list[str] = []
    for path in session_racks():
        inv = load(path)
        if owner_alive(path.parent):
            live.append(inv)
        else:
            prefix = prefix_of(inv)
            down(inv)
            removed.append(f"netns rack {prefix} ({path.parent})")
    return live, removed


def data_hosts(inv: Inventory) -> list[Host]:
    """Switch port order: servers, then clients, then coordinators."""
    return inv.with_role("server") + inv.with_role("client") + inv.with_role("coordinator")


def sshd_config(inv: Inventory, host: Host, folder: Path) -> str:
    return "\n".join([
        f"ListenAddress {host.ssh}",
        f"Port {host.port}",
        f"HostKey {folder / f'hostkey-{host.name}'}",
        f"PidFile {folder / f'sshd-{host.name}.pid'}",
        f"AuthorizedKeysFile {folder / 'authorized_keys'}",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "AllowStreamLocalForwarding yes",
        "StreamLocalBindUnlink yes",
        "MaxSessions 200",
        "MaxStartups 200",
        "Subsystem sftp internal-sftp",
        # The rack's hosts are this machine's root account: bash run by sshd
        # would source root's ~/.bashrc for every command (here `pyenv init`,
        # whose rehash lock, left by a session a test killed, stalled every
        # later command 60 s: "unreachable"). bash skips it below SHLVL 2.
        "SetEnv SHLVL=1",
        "",
    ])


def down(inv: Inventory, prefix: str | None = None) -> None:
    folder = rack_dir(inv)
    prefix = prefix or prefix_of(inv)
    session = prefix != PREFIX
    for host in inv.hosts:
        pidfile = folder / f"sshd-{host.name}.pid"
        try:
            os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
        # every process left in the namespace (a crashed run's) goes with it
        res = _sh("ip", "netns", "pids", ns_name(host, prefix), check=False)
        for pid in res.stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        _sh("ip", "netns", "del", ns_name(host, prefix), check=False)
    # a namespace lives on while a process in it does: its links go now
    for idx in range(len(inv.hosts)):
        _sh("ip", "link", "del", f"{prefix}m{idx}", check=False)
    _sh("ip", "link", "del", f"{prefix}mgmt", check=False)
    if session:   # its workdirs are its own (the fixed rack's keep the pushed builds)
        for workdir in {h.workdir for h in inv.hosts}:
            shutil.rmtree(workdir, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)


def up(inv: Inventory, prefix: str = PREFIX) -> None:
    """Build the rack for ``inv`` with names starting ``prefix`` (at most
    7 characters: link names stay within IFNAMSIZ)."""
    if os.geteuid() != 0:
        raise SystemExit("netkv.testbed.netns: needs root (network namespaces)")
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd) or not shutil.which("ssh-keygen"):
        raise SystemExit("netkv.testbed.netns: needs openssh-server and openssh-client "
                         "(apt-get install openssh-server)")
    down(inv, prefix)
    folder = rack_dir(inv)
    folder.mkdir(parents=True, mode=0o700)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
    keys = {h.key for h in inv.hosts}
    if len(keys) != 1:
        raise SystemExit("netkv.testbed.netns: every host must use the one generated key")
    key = Path(keys.pop())
    _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "netkv-netns-rack", "-f", str(key))
    (folder / "authorized_keys").write_text(Path(f"{key}.pub").read_text())
    net = ipaddress.ip_network(f"{inv.hosts[0].ssh}/24", strict=False)
    bridge = f"{prefix}mgmt"
    _sh("ip", "link", "add", bridge, "type", "bridge")
    _sh("ip", "addr", "add", f"{next(net.hosts())}/24", "dev", bridge)
    _sh("ip", "link", "set", bridge, "up")
    known = []
    for idx, host in enumerate(inv.hosts):
        ns = ns_name(host, prefix)
        _sh("ip", "netns", "add", ns)
        _sh("ip", "link", "set", "lo", "up", ns=ns)
        outside = f"{prefix}m{idx}"
        _sh("ip", "link", "add", outside, "type", "veth", "peer", "name", "mgmt0", "netns", ns)
        _sh("ip", "link", "set", outside, "master", bridge)
        _sh("ip", "link", "set", outside, "up")
        _sh("ip", "addr", "add", f"{host.ssh}/24", "dev", "mgmt0", ns=ns)
        _sh("ip", "link", "set", "mgmt0", "up", ns=ns)
        hostkey = folder / f"hostkey-{host.name}"
        _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", host.name, "-f", str(hostkey))
        pub = Path(f"{hostkey}.pub").read_text().split()
        known.append(f"[{host.ssh}]:{host.port} {pub[0]} {pub[1]}" if host.port != 22
                     else f"{host.ssh} {pub[0]} {pub[1]}")
        conf = folder / f"sshd-{host.name}.conf"
        conf.write_text(sshd_config(inv, host, folder))
        _sh(sshd, "-f", str(conf), ns=ns)
    Path(inv.known_hosts).write_text("\n".join(known) + "\n")
    # the data network: switch port i <-> i-th server/client's nic
    switch = inv.with_role("switch")[0]
    for port, host in zip(switch.ports, data_hosts(inv), strict=False):
        _sh("ip", "link", "add", port, "netns", ns_name(switch, prefix), "type", "veth",
            "peer", "name", host.nic, "netns", ns_name(host, prefix))
        for ns, ifc in ((ns_name(switch, prefix), port), (ns_name(host, prefix), host.nic)):
            _sh("sysctl", "-qw", f"net.ipv6.conf.{ifc}.disable_ipv6=1", ns=ns, check=False)
            _sh("ethtool", "-K", ifc, "tx", "off", ns=ns, check=False)
            _sh("ip", "link", "set", ifc, "up", ns=ns)
    # the switch's loop: a veth pair inside its namespace, quiet as on Mininet
    if switch.loop:
        sw_ns = ns_name(switch, prefix)
        _sh("ip", "link", "add", switch.loop[0], "type", "veth", "peer", "name",
            switch.loop[1], ns=sw_ns)
        for ifc in switch.loop:
            _sh("sysctl", "-qw", f"net.ipv6.conf.{ifc}.disable_ipv6=1", ns=sw_ns, check=False)
            _sh("ethtool", "-K", ifc, "tx", "off", ns=sw_ns, check=False)
            _sh("ip", "link", "set", ifc, "up", ns=sw_ns)
    # every sshd answers before we say the rack is up
    deadline = time.monotonic() + 20
    for host in inv.hosts:
        while not (folder / f"sshd-{host.name}.pid").exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"netkv.testbed.netns: sshd of {host.name} did not start")
            time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m netkv.testbed.netns",
                                 description="Build or remove a rack of network namespaces "
                                             "reached over SSH (target=testbed's test rack).")
    ap.add_argument("action", choices=("up", "down"))
    ap.add_argument("inventory", nargs="?", type=Path, default=default_inventory())
    args = ap.parse_args(argv)
    inv = load(args.inventory)
    if args.action == "up":
        up(inv)
        print(f"{inv.name}: {len(inv.hosts)} hosts up (ssh keys in {rack_dir(inv)})")
    else:
        down(inv)
        print(f"{inv.name}: removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
