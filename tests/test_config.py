"""Every bad config is one line on stderr and exit code 2; good ones validate."""

from __future__ import annotations

import subprocess
import sys

import pytest

from netkv.cli import main
from netkv.config.compose import load

BAD = [
    # (overrides, words the one-line message must contain)
    (["protocol=foo"], ["protocol", "'foo'", "hash", "pegasus", "netcache"]),
    (["alpha=-1"], ["alpha", "-1", ">= 0"]),
    (["alpha=abc"], ["alpha", "'abc'", "a number"]),
    (["write_ratio=1.5"], ["write_ratio", "1.5", "<= 1"]),
    (["write_ratio=-0.1"], ["write_ratio", "-0.1", ">= 0"]),
    (["servers=0"], ["servers", "0", ">= 1"]),
    (["protocol=pegasus", "servers=33"], ["servers", "33", "1..32", "pegasus"]),
    (["alpah=1.2"], ["unknown key", "alpah", "alpha"]),
    (["protocol.virtual_nodez=8"], ["unknown key", "protocol.virtual_nodez", "virtual_nodes"]),
    (["+workload.zipf_alpha=1"], ["unknown key", "workload.zipf_alpha"]),
    # a key below one the config does not have: the first missing part, with
    # the keys beside it (the hint listed the keys under the missing one: none)
    (["foo.bar=1"], ["unknown key 'foo' (allowed keys: alpha, capture"]),
    (["topology.serverx.foo=1"], ["unknown key 'topology.serverx' (allowed keys under topology:",
                                  "server"]),
    (["target.loop.depth=3"], ["unknown key 'target.loop' (allowed keys under target:",
                               "faults"]),
    (["alpha.x=1"], ["unknown key 'alpha.x' (alpha is a value", "allowed alpha=<value>"]),
    # Hydra's own keys are listed too (the hint composed the config without them)
    (["hydra.launcher.foo=1"], ["unknown key 'hydra.launcher.foo' (allowed keys under "
                                "hydra.launcher:", "n_jobs"]),
    (["seed=1.5"], ["seed", "1.5", "an integer"]),
    (["clients=many"], ["clients", "'many'", "an integer"]),
    (["record_history=maybe"], ["record_history", "true or false"]),
    (["workload.kind=pareto"], ["workload.kind", "'pareto'", "zipf"]),
    (["target=tofino9"], ["target", "'tofino9'", "sim"]),
    # a switch back-end named as a target: where it is one
    (["target=bmv2"], ["target = 'bmv2' is not a target (choose one of: mininet, sim, testbed; "
                       "bmv2 is a switch back-end: target=mininet|testbed target.switch=bmv2)"]),
    (["target=tofino"], ["tofino is a switch back-end: target=testbed target.switch=tofino)"]),
    (["inventory=netns-rakc"], ["inventory = 'netns-rakc' is not an inventory", "netns-rack"]),
    (["slo=fixed", "slo.p99_us=null"], ["slo.p99_us"]),
    (["duration=0"], ["duration", "> 0"]),
    (["topology.hostile_clients=4"], ["topology.hostile_clients = 4 (allowed: 0..3"]),
    # a required key left out: the line showed the mapping as its value
    (["target.faults.crashes=[{server: 1}]"],
     ["target.faults.crashes.0.at_s is missing (allowed: a value (the key is required))"]),
    # a comma list without -m: Hydra's three readings were cut with its later lines
    (["protocol=hash,pegasus"], ["Ambiguous value for argument 'protocol=hash,pegasus' "
                                 "(allowed: one value, or a sweep of each with run -m)"]),
    # a group is one option: a list of them was merged silently (Pegasus ran)
    (["protocol=[hash,pegasus]"], ["protocol = [hash,pegasus] is not a protocol (choose one of: "
                                   "hash, kvswitch"]),
    (["protocol="], ["protocol = '' is not a protocol (choose one of: hash"]),
    (["topology=5"], ["topology = 5 is not a topology (choose one of: rack)"]),
    # a mapping where a list goes, a group given no option's name: no key named
    # ("Cannot merge DictConfig with ListConfig"), or an empty list of keys
    (["target.faults.crashes={a: 1}"], ["target.faults.crashes = {a: 1} (allowed: a list)"]),
    (["topology={a: 1}"], ["topology = {a: 1} is not a topology (choose one of: rack)"]),
    # a value others are made of, removed: "Interpolation key 'protocol.name' not found"
    (["~protocol"], ["protocol.name is missing, and name is made of it (allowed: protocol=<one "
                     "of: hash, kvswitch"]),
    (["~alpha"], ["alpha is missing, and workload.alpha is made of it (allowed: a value for "
                  "alpha"]),
    # an override without '=' after a merge error (IndexError traceback)
    (["target.faults.crashes={a:1}", "~target.faults.crashes"],
     ["target.faults.crashes = {a:1} (allowed: a list)"]),
    # the clash named where it is, not by the outer node the override set
    (["target.faults={crashes:{a:1}}"], ["target.faults.crashes = {a: 1} (allowed: a list)"]),
    (["target.faults=[1]"], ["target.faults = [1] (allowed: a mapping)"]),
    # an index past a list's end is not a list-vs-mapping clash (said "= ?")
    (["target.faults.crashes.5=1"],
     ["target.faults.crashes.5 = 1: target.faults.crashes has no entry 5 (allowed: an index "
      "below the list's length, or the whole list: target.faults.crashes=[...])"]),
    (["+target.faults.crashes.0.x=1"],
     ["target.faults.crashes.0.x = 1: target.faults.crashes has no entry 0"]),
    # a key below a list: its entries' keys (it said "is a value")
    (["target.faults.crashes=[{server:1,at_s:0.1}]", "target.faults.crashes.0.servr=2"],
     ["unknown key 'target.faults.crashes.0.servr' (target.faults.crashes is a list: allowed "
      "keys of an entry: server, at_s, restart_s; or set the list whole, "
      "target.faults.crashes=[...])"]),
    # Hydra's own group choices count for the hint (it listed joblib's keys)
    (["hydra/launcher=submitit_local", "hydra.launcher.foo=1"],
     ["unknown key 'hydra.launcher.foo' (allowed keys under hydra.launcher: _target_, "
      "cpus_per_task"]),
    (["alpha=[1"], ["invalid override"]),
]


@pytest.mark.parametrize(("overrides", "words"), BAD, ids=[" ".join(o) for o, _ in BAD])
def test_bad_config_is_one_line_exit_2(overrides, words, capsys):
    code = main(["run", *overrides])
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_bad_value_inside_a_sweep_is_caught_before_anything_runs(capsys, tmp_path):
    code = main(["run", "-m", "alpha=0.9,-2", f"out={tmp_path}/sweep"])
    assert code == 2
    assert "alpha = -2" in capsys.readouterr().err
    assert not (tmp_path / "sweep").exists()


def test_unimplemented_protocol_on_target_is_a_config_error(capsys):
    from netkv.protocols import implemented_on, names

    missing = [p for p in names() if p not in implemented_on("testbed")]
    if not missing:
        pytest.skip("every protocol runs on the testbed")
    code = main(["run", f"protocol={missing[0]}", "target=testbed", "inventory=netns-rack"])
    err = capsys.readouterr().err
    assert code == 2 and "not implemented on target = 'testbed'" in err


TESTBED = ["target=testbed", "inventory=netns-rack", "servers=4", "clients=2"]


@pytest.mark.parametrize("overrides", [
    ["capture=true"],
    ["topology.kind=racks", "topology.racks=2"],
    ["workload.value_size=[{size: 64, weight: 1}, {size: 128, weight: 1}]"],
], ids=["capture", "racks", "value-size-mix"])
def test_what_the_testbed_cannot_run_is_refused_before_the_run_directory(
        overrides, capsys, tmp_path):
    """Refused before anything is written (no rack needed: the checks are the
    config's), so the same out= takes the corrected config afterwards."""
    out = tmp_path / "run"
    code = main(["run", *TESTBED, *overrides, f"out={out}"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert "testbed" in lines[0] or "capture" in lines[0], lines[0]
    assert not out.exists()


@pytest.mark.parametrize("why", ["target=mininet needs root (network namespaces)",
                                 "target=mininet needs mnexec: apt-get install mininet"])
def test_a_machine_mininet_cannot_use_is_refused_before_the_run_directory(
        why, capsys, tmp_path, monkeypatch):
    """Not root, or no mnexec: one line, exit 2, nothing written (the run
    directory was written before the refusal, so the same out= then held a
    run of nothing)."""
    from netkv.mininet import rack

    def missing() -> None:
        raise rack.MininetMissing(why)

    monkeypatch.setattr(rack, "check_mininet", missing)
    out = tmp_path / "run"
    code = main(["run", "target=mininet", "servers=2", "clients=1", f"out={out}"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and lines == [lines[0]] and why in lines[0], lines
    assert not out.exists()


def test_a_controller_refusal_comes_before_the_run_directory(capsys, tmp_path):
    """A protocol's simulator controller may refuse a config (KVSwitch across
    racks is read-only and prewarmed): one line, exit 2, and nothing written,
    so the same out= takes the corrected config."""
    out = tmp_path / "run"
    rack = ["protocol=kvswitch", "topology.kind=racks", "topology.racks=2", "servers=8",
            "keys=1000", "duration=0.01", f"out={out}"]
    code = main(["run", *rack, "write_ratio=0.1"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "write_ratio = 0.1" in lines[0], lines
    assert not out.exists()


def test_real_process_exit_code_and_single_line():
    proc = subprocess.run(
        [sys.executable, "-m", "netkv", "run", "write_ratio=2"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "write_ratio = 2" in proc.stderr


def test_shortcuts_interpolate_into_groups():
    cfg = load(["alpha=1.2", "write_ratio=0.1", "servers=8", "clients=2", "keys=1000"])
    assert cfg.workload.alpha == 1.2
    assert cfg.workload.write_ratio == 0.1
    assert cfg.workload.keys == 1000
    assert cfg.topology.servers == 8
    assert cfg.topology.clients == 2


def test_cfg_job_prints_resolved_config(capsys):
    assert main(["run", "--cfg", "job", "alpha=1.1", "protocol=pegasus"]) == 0
    out = capsys.readouterr().out
    assert "alpha: 1.1" in out and "name: pegasus" in out and "${" not in out


@pytest.mark.parametrize("overrides, message", [
    (["target=mininet", "workload.value_size=[{size:64,weight:1},{size:128,weight:1}]"],
     "workload.value_size = a mix of 2 sizes on target=mininet: kvclient sends one fixed size "
     "for now (allowed: one size in bytes; a mix runs on target=sim)"),
    (["target=mininet", "workload=trace", "workload.trace={trace}"],
     "workload=trace on target=mininet: kvclient has no trace workload yet (allowed: zipf, "
     "uniform, ycsb; a trace runs on target=sim)"),
    (["protocol=kvswitch", "topology.kind=racks", "topology.racks=2", "write_ratio=0.1"],
     "pushes across racks are not modelled"),
])
def test_cfg_job_refuses_what_run_would(overrides: list[str], message: str, tmp_path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """--cfg job checks the config against its target as run does (the
    placement's limits), not only the schema; it printed these before. Each
    refusal names the value and what is allowed."""
    trace = tmp_path / "keys.txt"
    trace.write_text("1\n2\n")
    overrides = [o.replace("{trace}", str(trace)) for o in overrides]
    assert main(["run", "--cfg", "job", *overrides]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == "", captured


def test_pegasus_default_replicated_keys_is_n_log_n():
    cfg = load(["protocol=pegasus", "servers=16"])
    from netkv.protocols.pegasus import replicated_keys

    assert replicated_keys(cfg) == 64


def test_list_names_every_group(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for word in ("protocols:", "hash", "pegasus", "targets:", "sim", "workloads:", "zipf"):
        assert word in out


def test_list_imports_no_numpy():
    """`netkv list` asks every plug-in where it runs; a plug-in that imports
    numpy (0.2 s) at module level breaks #18's 0.5 s start-up goal, so
    protocol modules import it inside the functions that use it."""
    code = ("import sys, io, contextlib\n"
            "from netkv.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['list']) == 0\n"
            "heavy = sorted(m for m in ('numpy', 'pyarrow', 'pandas', 'hydra', 'cffi') if m in sys.modules)\n"
            "print(','.join(heavy))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"`netkv list` imported {proc.stdout.strip()}"


def test_list_into_a_closed_pipe_is_quiet():
    """`python -m netkv list | head -1` ends without a BrokenPipeError traceback."""
    proc = subprocess.run(f"{sys.executable} -m netkv list | head -1", shell=True,
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "protocols:"
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("command", [["--help"], ["run", "--help"], ["list", "--help"]])
def test_help_on_every_command(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main(command)
    assert exc.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_default_run_directory_is_created_under_runs(tmp_path):
    """`python -m netkv run` with no out= writes runs/<date>/<time>-<name>/."""
    import os

    env = {**os.environ, "PYTHONPATH": str(__import__("pathlib").Path(__file__).parents[1])}
    proc = subprocess.run(
        [sys.executable, "-m", "netkv", "run", "keys=10000", "servers=4", "duration=0.05"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    runs = list((tmp_path / "runs").glob("*/*-hash-sim/points.parquet"))
    assert len(runs) == 1


def test_bmv2_switch_absent_is_one_line_exit_2(capsys):
    import shutil

    if shutil.which("simple_switch_grpc") and shutil.which("p4c-bm2-ss"):
        pytest.skip("BMv2 and p4c are installed here")
    code = main(["run", "target=mininet", "target.switch=bmv2"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "simple_switch_grpc" in err and "install" in err


def test_every_protocol_bounds_its_ring_as_the_simulator_does() -> None:
    """A knob the C ring refuses is refused by the schema first (config fuzzing
    found protocol.virtual_nodes=65536 reaching the simulator for StarCache)."""
    from netkv.config.base import MAX_VNODES
    from netkv.config.compose import ConfigError, load
    from netkv.protocols import names

    checked = 0
    for name in names():
        try:
            cfg = load([f"protocol={name}"])
        except ConfigError:
            continue
        if "virtual_nodes" not in type(cfg.protocol).model_fields:
            continue
        with pytest.raises(ConfigError, match="virtual_nodes"):
            load([f"protocol={name}", f"protocol.virtual_nodes={MAX_VNODES + 1}"])
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize("overrides, message", [
    # a field validator's message gains the key it is about
    (["protocol=netlr", "protocol.slots=1000"],
     "invalid config: protocol.slots = 1000: not a power of two"),
    # a model validator's names its fields itself
    (["protocol=starcache", "protocol.keys=1024", "protocol.slots=256"],
     "invalid config: protocol.keys x protocol.slots = 262144 (allowed: at most 65536"),
    (["protocol=starcache", "protocol.keys=16", "protocol.cache_size=32"],
     "invalid config: protocol.cache_size = 32 (allowed: 0..16"),
    (["protocol=starcache", "protocol.resize=true", "protocol.min_size=300"],
     "invalid config: protocol.min_size = 300, protocol.max_size = 256 with protocol.resize=true "
     "(allowed: min_size <= max_size <= protocol.keys = 4096)"),
])
def test_a_protocol_setting_error_names_its_key(overrides: list[str], message: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *overrides]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"netkv: {message}") and "\n" not in err, err
