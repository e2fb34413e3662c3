"""target=testbed on a rack of network namespaces reached only over SSH
(netkv.testbed.netns): end to end for every protocol implemented there
(NetMC's CoordiMC with its coordinator a host of the rack), the same tables
as the other targets, nothing left running; and the failure cases, each one
line. Needs root, iproute2, openssh-server (sshd) and openssh-client."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from netkv.config.compose import ConfigError, load
from netkv.protocols import implemented_on
from netkv.testbed import netns
from netkv.testbed.inventory import Inventory

REASON = None
if os.geteuid() != 0:
    REASON = "needs root (network namespaces)"
elif not (shutil.which("sshd") or os.path.exists("/usr/sbin/sshd")) or not shutil.which("ssh"):
    REASON = "needs openssh-server and openssh-client (just system-deps installs them)"

pytestmark = [pytest.mark.testbed, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

# read-only single-key requests, over a protocol's setting (NetLR's writes,
# NetMC's multigets: their own tests run those)
SMALL = ["target=testbed", "inventory=netns-rack", "servers=2", "clients=1", "keys=2000",
         "duration=0.2", "target.min_duration_s=0.5", "target.max_rps=4000", "write_ratio=0",
         "workload.multiget.mean=1"]


def conf_with(tmp: Path, name: str, inv: Inventory) -> Path:
    """A conf/ folder whose inventory ``name`` is ``inv`` (the rest linked)."""
    import yaml

    from netkv.config.core import conf_dir

    for entry in conf_dir().iterdir():
        if entry.name != "inventory":
            (tmp / entry.name).symlink_to(entry)
    (tmp / "inventory").mkdir()
    for entry in (conf_dir() / "inventory").iterdir():
        if entry.name != f"{name}.yaml":
            (tmp / "inventory" / entry.name).symlink_to(entry)
    (tmp / "inventory" / f"{name}.yaml").write_text(yaml.safe_dump(inv.model_dump(mode="json")))
    return tmp


@pytest.fixture(scope="module")
def rack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inventory]:
    """This session's own rack (netns.up_session), named ``netns-rack`` in
    the config: another session's rack never collides with it."""
    inv = netns.up_session(netns.load(netns.default_inventory()))
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("NETKV_CONF_DIR", str(conf_with(tmp_path_factory.mktemp("conf"),
                                                      "netns-rack", inv)))
            yield inv
    finally:
        netns.down(inv)


def leftovers(inv: Inventory) -> list[str]:
    """Processes in the rack's namespaces other than its sshds and their
    sessions, and run folders on the hosts."""
    out = []
    for host in inv.hosts:
        res = subprocess.run(["ip", "netns", "pids", netns.ns_of(inv, host)], capture_output=True,
                             text=True)
        for pid in res.stdout.split():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            # an empty command line: a process exiting (its memory gone) or a
            # zombie, e.g. the sshd child of a connection the client just
            # refused; it holds nothing (CI read one as "s0: " under load)
            if cmd and not cmd.startswith("sshd"):
                out.append(f"{host.name}: {cmd[:80]}")
    workdirs = {h.workdir for h in inv.hosts}
    for w in workdirs:  # one file system here
        out += [str(p) for p in Path(w).glob("run-*")] if Path(w).exists() else []
    return out


def small_rack_inventory() -> Inventory:
    """Two servers, a client and the switch of the namespace rack."""
    inv = netns.load(netns.default_inventory())
    hosts = inv.with_role("server")[:2] + inv.with_role("client")[:1] + inv.with_role("switch")
    return inv.model_copy(update={"hosts": hosts})


def test_two_session_racks_at_once_do_not_collide_and_clean_finds_both(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two racks up at once (two test sessions): their namespaces, links,
    management /24s and remote workdirs differ, each answers over SSH; a
    dead run left on each is found by one `netkv clean`, and a rack whose
    session died is removed whole while the live one stays."""
    import sys
    import tempfile
    import time

    from netkv.cli import main
    from netkv.testbed.ssh import Ssh

    base = small_rack_inventory()
    a = netns.up_session(base)
    b = None
    orphans: list[subprocess.Popen[bytes]] = []
    try:
        b = netns.up_session(base)
        sw = base.with_role("switch")[0]
        assert netns.ns_of(a, sw) != netns.ns_of(b, sw)
        assert all(len(f"{netns.prefix_of(r)}mgmt") <= 15 for r in (a, b))   # IFNAMSIZ
        assert a.hosts[0].ssh.rsplit(".", 1)[0] != b.hosts[0].ssh.rsplit(".", 1)[0]
        assert a.hosts[0].workdir != b.hosts[0].workdir
        names = subprocess.run(["ip", "netns", "list"], capture_output=True,
                               text=True).stdout
        for r in (a, b):
            assert all(netns.ns_of(r, h) in names for h in r.hosts)
            with tempfile.TemporaryDirectory(dir="/tmp") as control:
                ssh = Ssh(r.hosts[0], r.known_hosts, Path(control))
                assert ssh.run("echo up").stdout.strip() == "up"
                ssh.close()
        dead = []
        for r in (a, b):   # a dead run's program and folder on each rack
            host = r.with_role("server")[0]
            folder = Path(host.workdir) / "run-nkdeadrun2"
            folder.mkdir(parents=True)
            orphans.append(subprocess.Popen(["ip", "netns", "exec", netns.ns_of(r, host),
                                             sys.executable, "-c", "import time; "
                                             "time.sleep(300)", "--tag", "nkdeadrun2"]))
            time.sleep(0.3)
            (folder / "server0.pid").write_text(f"{orphans[-1].pid}\n")
            dead.append(folder)
        assert main(["clean"]) == 0
        assert all(p.wait(timeout=10) == -9 for p in orphans)
        assert not any(f.exists() for f in dead)
        # b's session died: its rack goes, a's (this process's) stays
        b_names = [netns.ns_of(b, h) for h in b.hosts]
        gone = subprocess.Popen(["true"])
        gone.wait()
        (netns.rack_dir(b) / "owner").write_text(f"{gone.pid}\n")
        capsys.readouterr()
        assert main(["clean"]) == 0
        assert f"netns rack {netns.prefix_of(a)}" not in capsys.readouterr().out
        names = subprocess.run(["ip", "netns", "list"], capture_output=True,
                               text=True).stdout
        assert not any(f"{n} " in names or f"{n}\n" in names for n in b_names)
        assert not netns.rack_dir(b).exists() and not Path(b.hosts[0].workdir).exists()
        assert all(netns.ns_of(a, h) in names for h in a.hosts)
    finally:
        for p in orphans:
            if p.poll() is None:
                p.kill()
        for r in (a, b):
            if r is not None:
                netns.down(r)


def test_inventory_is_validated_in_one_line() -> None:
    with pytest.raises(ConfigError, match="needs an inventory with hosts"):
        load(["target=testbed"])
    with pytest.raises(ConfigError, match="has 16 servers and 4 clients; the run asks for "
                                          "servers=17"):
        load(["target=testbed", "inventory=netns-rack", "servers=17"])
    with pytest.raises(ConfigError, match="stack"):
        load(["target=testbed", "inventory=netns-rack", "inventory.stack=rdma"])
    with pytest.raises(ConfigError, match="'LD_PRELOAD' is not a VMA_\\* variable"):
        load(["target=testbed", "inventory=netns-rack", "+inventory.vma.env.LD_PRELOAD=x"])
    cfg = load(["target=testbed", "inventory=netns-rack", "servers=2", "clients=1"])
    assert cfg.inventory.with_role("switch")[0].ports[:3] == ["p0", "p1", "p2"]


def test_cli_refuses_a_testbed_without_inventory(capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    from netkv.cli import main

    out = tmp_path / "run"
    assert main(["run", "target=testbed", f"out={out}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "inventory" in err
    assert not out.exists()


def test_cli_refuses_a_missing_key_file_before_writing(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    """A key file missing here is this machine's, known before anything
    starts: one line, exit 2, and no run folder (config.yaml and
    provenance.json were written first, for a run that never began)."""
    from netkv.cli import main

    out = tmp_path / "run"
    assert main(["run", *SMALL, f"inventory.hosts.0.key={tmp_path / 'nokey'}",
                 f"out={out}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nokey not found" in err, err
    assert not out.exists()


@pytest.mark.parametrize("protocol", implemented_on("testbed"))
def test_a_run_over_ssh_writes_the_tables_and_leaves_nothing(rack: Inventory, protocol: str,
                                                            tmp_path: Path) -> None:
    from netkv.cli import main

    out = tmp_path / "tb"
    # a 1 s drain, as in the DPDK test below: 50 ms counted a late reply lost
    assert main(["run", *SMALL, f"protocol={protocol}", "topology.drain_ms=1000",
                 f"out={out}"]) == 0
    points = pl.read_parquet(out / "points.parquet")
    sim = tmp_path / "sim"
    assert main(["run", f"protocol={protocol}", "servers=2", "clients=1", "keys=2000",
                 "duration=0.01", "write_ratio=0", "workload.multiget.mean=1",
                 f"out={sim}"]) == 0
    # the same schema as the simulator's, plus what its switch and servers
    # received and dropped
    from netkv.results.noise import RACK_COLUMNS

    sim_columns = pl.read_parquet(sim / "points.parquet").columns
    assert [c for c in points.columns if c not in RACK_COLUMNS] == sim_columns
    assert (points["target"] == "testbed").all()
    measured = points.filter(pl.col("phase") != "reference")
    assert (measured["completion"] > 0.99).all()
    servers = pl.read_parquet(out / "servers.parquet")
    assert servers["server"].n_unique() == 2 and servers["requests"].sum() > 0
    # provenance names every host used, as configured and as it reports itself
    hosts = json.loads((out / "provenance.json").read_text())["hosts"]
    used = {h.name for h in rack.hosts if "switch" in h.roles} | \
        {h.name for h in rack.with_role("server")[:2]} | {rack.with_role("client")[0].name}
    assert set(hosts) == used
    for name, info in hosts.items():
        assert info["kernel"] == os.uname().release, name   # namespaces share the kernel
        assert info["online_cores"] == os.cpu_count() and info["cpu_model"], name
        assert info["stack"] == "kernel" and info["nic"], name
    assert not leftovers(rack)


def test_coordimc_runs_with_its_coordinator_a_host_of_the_rack(rack: Inventory,
                                                                tmp_path: Path) -> None:
    """NetMC's CoordiMC baseline with multigets: the coordinator (kvserver
    --mode coord) on the inventory's coordinator host, node S + M behind the
    switch port after the clients'; every multiget completes through it, the
    client sends it one packet per request, and nothing is left behind."""
    from netkv.cli import main

    out = tmp_path / "tb"
    assert main(["run", *SMALL, "protocol=netmc", "protocol.scheme=coordimc",
                 "workload.multiget.mean=4", "workload.key_size=8", "slo.reference=netmc",
                 "topology.drain_ms=1000", f"out={out}"]) == 0   # as in the DPDK test
    points = pl.read_parquet(out / "points.parquet").filter(pl.col("phase") != "reference")
    assert (points["completion"] > 0.99).all()
    assert (points["client_packets"] == points["issued"]).all()   # all to the coordinator
    assert (points["request_keys"].sum() > 2 * points["issued"].sum())   # multigets
    hosts = json.loads((out / "provenance.json").read_text())["hosts"]
    coord = rack.with_role("coordinator")[0].name
    assert coord in hosts and hosts[coord]["roles"] == ["coordinator"]
    assert not leftovers(rack)


def test_a_rack_without_the_coordinator_a_protocol_needs_is_one_line() -> None:
    coord = next(i for i, h in enumerate(load(SMALL).inventory.hosts) if "coordinator" in h.roles)
    with pytest.raises(ConfigError, match="has 0 coordinator hosts; the protocol needs 1") as e:
        load([*SMALL, "protocol=netmc", "protocol.scheme=coordimc",
              f"inventory.hosts.{coord}.roles=[client]"])
    assert "\n" not in str(e.value)
    load([*SMALL, "protocol=netmc", "protocol.scheme=coordimc"])   # the rack has one


def test_a_switch_without_the_loop_a_protocol_needs_is_one_line() -> None:
    """StarCache's plug-in declares a loop port (P4Program.needs_loop): on a
    switch host without the inventory's loop pair it is refused in one line
    before anything starts; a loop that is not a pair is refused by the
    inventory's own check."""
    from netkv.targets.base import TargetUnavailable
    from netkv.targets.testbed import TestbedTarget

    sw = next(i for i, h in enumerate(load(SMALL).inventory.hosts) if "switch" in h.roles)
    cfg = load([*SMALL, "protocol=starcache", f"inventory.hosts.{sw}.loop=[]"])
    with pytest.raises(TargetUnavailable, match="protocol = 'starcache' needs a loop port") as e:
        TestbedTarget(cfg)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="two interfaces, out and in"):
        load([*SMALL, "protocol=starcache", f"inventory.hosts.{sw}.loop=[lp0]"])
    assert load([*SMALL, "protocol=starcache"]).inventory.hosts[sw].loop == ["lp0", "lp1"]


def test_unreachable_host_is_one_line_and_leaves_nothing(rack: Inventory) -> None:
    from netkv.targets.testbed import TestbedTarget

    cfg = load([*SMALL, "protocol=hash", "inventory.hosts.1.ssh=10.250.0.250"])
    with pytest.raises(ConfigError) as e:
        TestbedTarget(cfg)
    msg = str(e.value)
    assert "\n" not in msg and "'s1'" in msg and "unreachable" in msg
    assert not leftovers(rack)


def test_a_program_missing_on_a_host_is_pushed_again(rack: Inventory, tmp_path: Path) -> None:
    """The push cache is checked file by file: kvserver deleted from a host's
    cache folder since the last run is pushed again, and the run completes."""
    from netkv.cli import main

    assert main(["run", *SMALL, "protocol=hash", f"out={tmp_path / 'a'}"]) == 0
    workdir = Path(rack.hosts[0].workdir)  # one file system: every host's cache
    newest = max((workdir / "bin").iterdir(), key=lambda p: p.stat().st_mtime)
    (newest / "kvserver").unlink()
    assert main(["run", *SMALL, "protocol=hash", f"out={tmp_path / 'b'}"]) == 0
    assert (newest / "kvserver").is_file()
    assert not leftovers(rack)


def test_a_program_missing_from_the_build_is_one_line(rack: Inventory, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A build without kvclient: refused in one line naming it, nothing written
    on the hosts, nothing left running."""
    import shutil

    from netkv import native
    from netkv.cli import main

    partial = tmp_path / "native"
    shutil.copytree(native.native_dir(), partial)
    (partial / "bin" / "kvclient").unlink()
    monkeypatch.setenv("NETKV_NATIVE_DIR", str(partial))
    native.native_dir.cache_clear()
    try:
        with pytest.raises(SystemExit) as e:  # raised by the run itself, as in a shell
            main(["run", *SMALL, "protocol=hash", f"out={tmp_path / 'run'}"])
        code = e.value.code
    finally:
        monkeypatch.delenv("NETKV_NATIVE_DIR")
        native.native_dir.cache_clear()
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "kvclient" in err and "just setup" in err, err
    assert not leftovers(rack)


def test_source_builds_on_the_hosts(rack: Inventory, tmp_path: Path) -> None:
    """build.mode=source: the C sources go to the hosts and are built there
    (once here: the namespace rack's hosts share a file system, so one builds
    and the others find it done under the lock); the run completes and
    provenance names the build."""
    from netkv.cli import main

    out = tmp_path / "src"
    assert main(["run", *SMALL, "protocol=hash", "inventory.build.mode=source",
                 f"out={out}"]) == 0
    hosts = json.loads((out / "provenance.json").read_text())["hosts"]
    builds = {info["build"] for info in hosts.values()}
    assert len(builds) == 1, builds
    mode, bid = next(iter(builds)).split()
    assert mode == "source" and bid.startswith("src-")
    folder = Path(rack.hosts[0].workdir) / "bin" / bid
    assert (folder / ".complete").is_file() and (folder / "kvserver").is_file()
    assert not leftovers(rack)


def test_a_failed_remote_build_is_one_line(rack: Inventory) -> None:
    from netkv.targets.testbed import TestbedTarget

    cfg = load([*SMALL, "protocol=hash", "inventory.build.mode=source",
                'inventory.build.cmake_args=["-DCMAKE_C_COMPILER=/nonexistent/cc"]'])
    with pytest.raises(ConfigError) as e:
        TestbedTarget(cfg)
    msg = str(e.value)
    assert "\n" not in msg and "building" in msg and "step configure failed" in msg, msg
    assert not leftovers(rack)


def test_refused_key_is_one_line(rack: Inventory) -> None:
    from netkv.targets.testbed import TestbedTarget

    other = Path(rack.known_hosts).parent / "hostkey-s0"   # a key sshd does not authorise
    cfg = load([*SMALL, "protocol=hash", f"inventory.hosts.0.key={other}"])
    with pytest.raises(ConfigError) as e:
        TestbedTarget(cfg)
    assert "\n" not in str(e.value) and "refused" in str(e.value) and "'s0'" in str(e.value)
    assert not leftovers(rack)


def test_unknown_host_key_is_refused(rack: Inventory, tmp_path: Path) -> None:
    from netkv.targets.testbed import TestbedTarget

    known = tmp_path / "known_hosts"
    lines = Path(rack.known_hosts).read_text().splitlines()
    s0 = f"{rack.with_role('server')[0].ssh} "
    known.write_text("\n".join(ln for ln in lines if not ln.startswith(s0)) + "\n")
    cfg = load([*SMALL, "protocol=hash", f"inventory.known_hosts={known}"])
    with pytest.raises(ConfigError) as e:
        TestbedTarget(cfg)
    assert "host key" in str(e.value) and "'s0'" in str(e.value)
    assert not leftovers(rack)


def test_missing_key_file_is_refused_before_anything(tmp_path: Path) -> None:
    from netkv.targets.testbed import TestbedTarget

    cfg = load([*SMALL, "protocol=hash", f"inventory.hosts.0.key={tmp_path / 'nokey'}"])
    # named whether or not the rack's own key exists yet (this test used to
    # pass only after a rack fixture had made it)
    with pytest.raises(ConfigError, match="key files? (.*, )?[^ ]*nokey(, .*)? not found"):
        TestbedTarget(cfg)
    both = load([*SMALL, "protocol=hash", f"inventory.hosts.0.key={tmp_path / 'nokey'}",
                 f"inventory.hosts.1.key={tmp_path / 'nokey2'}"])
    with pytest.raises(ConfigError, match="key files .*nokey, .*nokey2"):
        TestbedTarget(both)


def test_a_server_killed_mid_run_fails_the_point_in_one_line(rack: Inventory) -> None:
    from netkv.targets.testbed import TestbedTarget

    cfg = load([*SMALL, "protocol=hash"])
    target = TestbedTarget(cfg)
    try:
        assert target.run_point(500.0, 1).completed > 0
        host, pidfile = target.rack.logs["server1"][0], None
        pidfile = f"{target.rack.remote_run[host]}/server1.pid"
        subprocess.run(["kill", "-9", Path(pidfile).read_text().strip()], check=True)
        with pytest.raises(RuntimeError, match="server1 on host 's1' exited"):
            target.run_point(500.0, 2)
    finally:
        target.close()
    assert not leftovers(rack)


def test_sigkill_of_netkv_leaves_nothing_running_remotely(rack: Inventory, tmp_path: Path) -> None:
    """The lifelines: when the ssh client dies with netkv, sshd closes the
    session and each remote program gets SIGTERM."""
    import signal
    import sys
    import time

    code = ("from netkv.config.compose import load\n"
            "from netkv.targets.testbed import TestbedTarget\n"
            f"t = TestbedTarget(load({[*SMALL, 'protocol=hash']!r}))\n"
            "print('up', flush=True)\n"
            "import time; time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    os.killpg(proc.pid, signal.SIGKILL)   # netkv and its ssh clients, as a kill of the group
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not [x for x in leftovers(rack) if "run-" not in x]:
            break
        time.sleep(0.2)
    assert not [x for x in leftovers(rack) if "run-" not in x]
    # what is left is the dead run's folder, which `netkv clean` removes
    from netkv.cli import main

    assert [x for x in leftovers(rack) if "run-" in x]
    assert main(["clean", "--inventory", "netns-rack"]) == 0
    assert not leftovers(rack)


def test_clean_removes_what_a_crashed_run_left(rack: Inventory, capsys: pytest.CaptureFixture[str]) -> None:
    """A run folder whose run is gone (no local state) is cleaned: its
    tagged program killed, the folder removed; a live run's is kept."""
    import sys
    import time

    from netkv.cli import main
    from netkv.targets.testbed import STATE_ROOT

    host = rack.with_role("server")[0]
    ns = netns.ns_of(rack, host)
    dead = Path(host.workdir) / "run-nkdeadrun1"
    live_tag = "nkliverun1"
    (STATE_ROOT / live_tag).mkdir(parents=True, exist_ok=True)
    (STATE_ROOT / live_tag / "owner").write_text(f"{os.getpid()}\n")   # this process: alive
    live = Path(host.workdir) / f"run-{live_tag}"
    try:
        for folder in (dead, live):
            folder.mkdir(parents=True, exist_ok=True)
        # a program of the dead run: its command line carries the run's tag
        orphan = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c",
                                   "import time; time.sleep(300)", "--tag", "nkdeadrun1"])
        time.sleep(0.3)
        assert orphan.poll() is None
        (dead / "server0.pid").write_text(f"{orphan.pid}\n")
        assert main(["clean", "--inventory", "netns-rack"]) == 0
        assert orphan.wait(timeout=10) == -9          # killed
        assert not dead.exists() and live.exists()
        assert "run-nkdeadrun1" in capsys.readouterr().out
    finally:
        shutil.rmtree(live, ignore_errors=True)
        shutil.rmtree(STATE_ROOT / live_tag, ignore_errors=True)


def _local_leftovers(before: set[str], key: str) -> list[str]:
    """This machine's side of runs started since ``before`` (the testbed's
    local folders then): their folders whose owner is gone, and every ssh
    naming one of them (a multiplexed master, ``ssh: <folder>/ssh/...``; a
    forward, ``-L <folder>/server0.sock:...``) or the rack's key."""
    from netkv import procstat
    from netkv.targets.testbed import STATE_ROOT

    def gone(folder: Path) -> bool:
        try:
            return not procstat.owner_running((folder / "owner").read_text())
        except (OSError, ValueError):
            return True

    new = set(os.listdir(STATE_ROOT)) - before
    out = [str(STATE_ROOT / name) for name in new if gone(STATE_ROOT / name)]
    marks = [key, *(f"{STATE_ROOT / name}/" for name in new)]
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if cmd.startswith("ssh") and any(m in cmd for m in marks):
            out.append(cmd[:100])
    return out


def test_ctrl_c_on_a_pooled_testbed_sweep_leaves_nothing(rack: Inventory, tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) on a
    2-job testbed sweep in joblib workers once a remote program runs: joblib
    kills its workers at once, mid-teardown; the command removes what they
    left, as on Mininet: their local folders, their SSH masters and forwards
    here, their run folders on the hosts (measured on the old code: local
    folders in 22 of 26 runs, remote run folders in 7, ssh processes in 11
    of 16)."""
    import signal
    import sys
    import time

    from netkv.targets.testbed import STATE_ROOT

    STATE_ROOT.mkdir(parents=True, exist_ok=True, mode=0o700)
    before = set(os.listdir(STATE_ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "netkv", "run", "-m", *SMALL,
                             "protocol=hash,pegasus", "hydra.launcher.n_jobs=2",
                             f"out={tmp_path / 'sweep'}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not any(p in x for x in leftovers(rack) for p in ("kvserver", "netkv-switch")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("netkv: interrupted: "), err
        deadline = time.monotonic() + 3
        while (left := leftovers(rack) + _local_leftovers(before, rack.hosts[0].key)) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left, left
    finally:
        if proc.poll() is None:   # the workers too: they are in its session
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        from netkv.testbed.clean import clean_inventory

        clean_inventory(rack, STATE_ROOT)   # what a failing run left (dead runs only)


@pytest.mark.slow
def test_the_documented_default_run_on_the_namespace_rack(rack: Inventory, tmp_path: Path) -> None:
    """docs/testbed.md's command as written (16 servers, 4 clients): it
    completes, writes the tables every target writes, and leaves nothing."""
    from netkv.cli import main

    out = tmp_path / "default"
    assert main(["run", "target=testbed", "inventory=netns-rack", "protocol=pegasus", "alpha=1.2",
                 f"out={out}"]) == 0
    for table in ("points", "servers", "timeline", "histograms"):
        assert (out / f"{table}.parquet").is_file()
    assert pl.read_parquet(out / "servers.parquet")["server"].n_unique() == 16
    assert not leftovers(rack)


# --- host stacks --------------------------------------------------------------------------

def _dpdk_built() -> bool:
    from netkv.native import NativeBuildMissing, program_path

    try:
        return all(program_path(p).is_file() for p in ("kvserver-dpdk", "kvclient-dpdk"))
    except NativeBuildMissing:
        return False


@pytest.mark.skipif(not _dpdk_built(), reason="kvserver-dpdk not built (no libdpdk-dev: "
                                               "just system-deps installs it)")
@pytest.mark.parametrize("protocol", ["hash", "pegasus"])
def test_dpdk_hosts_run_over_af_packet_with_the_same_tables(rack: Inventory, protocol: str,
                                                            tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """inventory.stack=dpdk: every server and client is kvserver-dpdk /
    kvclient-dpdk on net_af_packet over its eth1 (no kernel address there, so
    only DPDK can answer); the run writes the tables the kernel stack writes
    and leaves nothing behind."""
    from netkv.cli import main
    from netkv.testbed.rack import SshRack

    seen: dict[str, list[dict]] = {"servers": [], "clients": []}
    run_clients, stop = SshRack.run_clients, SshRack.stop

    def spy_clients(self: SshRack, *a: object, **kw: object) -> list[dict]:
        res = run_clients(self, *a, **kw)  # type: ignore[arg-type]
        seen["clients"] += res
        return res

    def spy_stop(self: SshRack) -> dict:
        final = stop(self)
        seen["servers"] += final["servers"]
        return final

    monkeypatch.setattr(SshRack, "run_clients", spy_clients)
    monkeypatch.setattr(SshRack, "stop", spy_stop)
    out = tmp_path / "dpdk"
    # kvclient waits up to the drain for its last replies and stops as soon
    # as all are in: the default 50 ms counted a reply as lost under CPU load
    # (neighbouring points' p99 ~100 ms; 36 of 37 completed, the switch had
    # forwarded all 37 replies)
    assert main(["run", *SMALL, f"protocol={protocol}", "inventory.stack=dpdk",
                 "topology.drain_ms=1000", f"out={out}"]) == 0
    points = pl.read_parquet(out / "points.parquet")
    sim = tmp_path / "sim"
    assert main(["run", f"protocol={protocol}", "servers=2", "clients=1", "keys=2000",
                 "duration=0.01", "write_ratio=0", "workload.multiget.mean=1",
                 f"out={sim}"]) == 0
    from netkv.results.noise import RACK_COLUMNS

    # the simulator's columns plus the rack's noise; the stack is a knob column
    assert [c for c in points.columns if c not in RACK_COLUMNS] == \
        pl.read_parquet(sim / "points.parquet").columns
    assert (points["inventory.stack"] == "dpdk").all()
    measured = points.filter(pl.col("phase") != "reference")
    assert len(measured) and (measured["completion"] > 0.99).all()
    servers = pl.read_parquet(out / "servers.parquet")
    assert servers["server"].n_unique() == 2 and servers["requests"].sum() > 0
    # the packets went through DPDK: each program says so and counted frames
    assert seen["servers"] and len(seen["servers"]) % 2 == 0 and seen["clients"]
    for report in seen["servers"] + seen["clients"]:
        assert report["stack"] == "dpdk" and report["io_rx_frames"] > 0, report
        assert report["io_rx_bad"] == 0 and report["io_tx_drop"] == 0, report
    assert sum(r["served"] for r in seen["servers"]) >= measured["completed"].sum()
    assert not leftovers(rack)


def test_vma_preloads_libvma_with_its_knobs() -> None:
    """stack: vma runs the kernel programs with LD_PRELOAD and the VMA_*
    knobs; DPDK gets its device, cores, memory mode and --io from the entry."""
    from netkv.testbed.stacks import command

    inv = Inventory.model_validate({
        "name": "t", "stack": "vma",
        "vma": {"lib": "/opt/vma/libvma.so", "env": {"VMA_SPEC": "latency", "VMA_RX_POLL": "-1"}},
        "dpdk": {"eal": ["-m", "512"], "idle_us": 0, "gw_mac": "02:aa:00:00:00:01"},
        "hosts": [{"name": "s0", "ssh": "a", "key": "k", "roles": ["server"]},
                  {"name": "c0", "ssh": "b", "key": "k", "roles": ["client"], "stack": "dpdk",
                   "pci": "0000:3b:00.0", "cores": [2, 3]},
                  {"name": "s1", "ssh": "c", "key": "k", "roles": ["server"], "stack": "kernel"}]})
    s0, c0, s1 = inv.hosts
    args = ["--protocol", "hash", "--id", "0"]
    assert command(inv, s0, "kvserver", "/w/bin", args, "02:00:00:00:00:01", 8) == [
        "env", "LD_LIBRARY_PATH=/w/bin", "LD_PRELOAD=/opt/vma/libvma.so", "VMA_RX_POLL=-1",
        "VMA_SPEC=latency", "/w/bin/kvserver", *args]
    # the switch host's programs and netkv-switch never get a stack
    assert command(inv, s0, "kvserver", "/w/bin", args, "m", 8, node=False)[2] == "/w/bin/kvserver"
    assert command(inv, s0, "netkv-switch", "/w/bin", [], "m", 8)[2] == "/w/bin/netkv-switch"
    assert command(inv, s1, "kvserver", "/w/bin", args, "m", 8)[2] == "/w/bin/kvserver"
    assert command(inv, c0, "kvclient", "/w/bin", args, "02:00:00:00:00:03", 8) == [
        "env", "LD_LIBRARY_PATH=/w/bin", "/w/bin/kvclient-dpdk", "-a", "0000:3b:00.0",
        "--lcores=0@(2,3)", "--in-memory", "--no-telemetry", "-m", "512", "--", *args,
        "--io", "mac=02:00:00:00:00:03,idle_us=0,gw=02:aa:00:00:00:01"]


def test_vma_without_libvma_on_the_host_is_one_line(rack: Inventory) -> None:
    """libvma is not packaged for Debian (nor installed here): a vma rack
    stops before starting anything, naming the host and the library."""
    from netkv.targets.testbed import TestbedTarget

    cfg = load([*SMALL, "protocol=hash", "inventory.stack=vma",
                "inventory.vma.lib=/nonexistent/libvma.so"])
    with pytest.raises(ConfigError) as e:
        TestbedTarget(cfg)
    msg = str(e.value)
    assert "\n" not in msg and "/nonexistent/libvma.so" in msg and "'s0'" in msg
    assert not leftovers(rack)


def test_a_server_whose_lifeline_ended_is_a_port_down() -> None:
    """NetLR's port monitor on the testbed: a server is up while its
    kvserver's SSH lifeline runs (no rack needed: the lifelines are faked)."""
    import subprocess

    from netkv.testbed.rack import SshRack

    rack = object.__new__(SshRack)
    rack.servers, rack.nodes = ["s0", "s1"], ["s0", "s1", "c0"]   # type: ignore[list-item]
    alive = subprocess.Popen(["sleep", "30"])
    ended = subprocess.Popen(["true"])
    ended.wait()
    rack.lifelines = {"server0": alive, "server1": ended}   # type: ignore[dict-item]
    rack.crashed = set()
    try:
        assert rack.port_up(0) and not rack.port_up(1)
        assert rack.port_up(2) and not rack.port_up(3) and not rack.port_up(-1)
        # restarted (target.faults.crashes): down until it answers, though
        # its new lifeline runs
        rack.crashed = {0}
        assert not rack.port_up(0)
    finally:
        alive.kill()
        alive.wait()
