"""The command line's own arguments: where overrides may go, usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from netkv.cli import main


def test_overrides_after_an_option_are_overrides(capsys):
    """`run protocol=pegasus --cfg job alpha=1.2`: the overrides on both
    sides of an option are taken (the ones after it were refused as
    unrecognized arguments)."""
    assert main(["run", "protocol=pegasus", "--cfg", "job", "alpha=1.2", "servers=8"]) == 0
    cfg = yaml.safe_load(capsys.readouterr().out)
    assert cfg["protocol"]["name"] == "pegasus"
    assert cfg["workload"]["alpha"] == 1.2 and cfg["topology"]["servers"] == 8


def test_reproduce_takes_overrides_after_its_options(tmp_path, monkeypatch):
    """`reproduce pegasus/fig7 --jobs 1 duration=0.05`, as the docs write the
    options and overrides in either order."""
    import netkv.experiments.run

    seen: dict[str, object] = {}

    def record(name, extra, out, pool, console):  # noqa: ANN001, ANN202
        seen.update(name=name, extra=extra, out=out, jobs=pool.jobs)
        return []

    monkeypatch.setattr(netkv.experiments.run, "reproduce", record)
    out = tmp_path / "fig7"
    assert main(["reproduce", "pegasus/fig7", "seed=2", "--jobs", "1", "duration=0.05",
                 "--out", str(out), "keys=1000"]) == 0
    assert seen == {"name": "pegasus/fig7", "extra": ["seed=2", "duration=0.05", "keys=1000"],
                    "out": Path(out), "jobs": 1}


@pytest.mark.parametrize("argv", [
    ["reproduce", "pegasus/fig7", "--jbos", "1"],
    ["reproduce", "pegasus/fig7", "--jobs", "1", "stray"],
    ["trace", "runs/x", "alpha=1"],
], ids=["unknown-option", "not-key-value", "no-overrides"])
def test_what_is_not_an_override_is_still_refused(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(lines) == 1, lines
    assert "unrecognized arguments" in lines[0] and argv[-1] in lines[0], lines[0]


def test_a_missing_experiment_names_only_what_is_required(capsys):
    """The overrides are optional: the usage error listed them as required."""
    with pytest.raises(SystemExit) as exc:
        main(["reproduce"])
    line = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "\n" not in line
    assert "required: experiment (" in line and "KEY=VALUE" not in line, line


TINY_SWEEP = ["run", "-m", "alpha=0.9,1.2", "servers=4", "keys=1000", "duration=0.02",
              "slo.max_points=3", "hydra.launcher.n_jobs=1"]


@pytest.mark.parametrize("given_out", [True, False], ids=["out", "default-folder"])
def test_an_interrupted_sweep_is_one_line_naming_the_sweep_folder(given_out, tmp_path,
                                                                  monkeypatch, capsys):
    """Ctrl-C in a sweep's second job: one line, exit 130, naming the sweep's
    folder as out=. Each job said "run again with out=<its subfolder>" (a
    sweep run with it nests its jobs below that job's folder), then the
    sweep "run the same command again", which without out= starts a new
    folder and measures everything again."""
    import netkv.runner

    real = netkv.runner.execute

    def second_job_interrupted(cfg, out_dir, argv, console, *rest):  # noqa: ANN001, ANN202
        if cfg.workload.alpha == 1.2:
            raise KeyboardInterrupt
        return real(cfg, out_dir, argv, console, *rest)

    monkeypatch.setattr(netkv.runner, "execute", second_job_interrupted)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "sweep"
    assert main([*TINY_SWEEP, *([f"out={out}"] if given_out else [])]) == 130
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    sweep = out if given_out else next(Path("runs").glob("*/*-hash-sim"))  # as claimed
    kept = len(list(sweep.glob("alpha=0.9*/points.d/*/point.parquet")))
    assert kept > 0
    assert lines[0] == (f"netkv: interrupted: {kept} finished point(s) kept in {sweep} "
                        f"(run the sweep again with out={sweep} to resume)"), lines[0]


def test_ctrl_c_while_a_sweep_is_checked_says_nothing_was_measured(monkeypatch, tmp_path,
                                                                   capsys):
    """Ctrl-C in `run -m`'s first second, while every job's overrides are
    checked (before any folder exists), printed the generic `netkv: run:
    interrupted`; a run or sweep says what it kept, here nothing."""
    def interrupted(overrides, multirun):  # noqa: ANN001, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr("netkv.cli.validate_all", interrupted)
    monkeypatch.chdir(tmp_path)
    assert main(TINY_SWEEP) == 130
    assert capsys.readouterr().err == (
        "netkv: interrupted while checking the overrides: nothing was measured\n")
    assert not (tmp_path / "runs").exists()


def test_clean_refuses_an_unknown_inventory_before_cleaning(monkeypatch, capsys):
    """`clean --inventory nope` killed and removed what crashed Mininet runs
    and session racks left, then refused the name: bad input is refused
    before anything is done."""
    import netkv.mininet.cleanup

    done: list[bool] = []
    monkeypatch.setattr(netkv.mininet.cleanup, "clean", lambda force: done.append(force) or [])
    assert main(["clean", "--inventory", "netns-rakc"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "'netns-rakc'" in lines[0] and "netns-rack" in lines[0], lines
    assert done == []


def test_cfg_job_of_a_sweep_prints_every_jobs_config(capsys):
    """`run -m ... --cfg job` was refused as "Ambiguous value for argument
    'alpha=0,1.2'": it prints each job's resolved config, one YAML document
    each, or refuses the sweep as run would, printing nothing."""
    assert main(["run", "-m", "protocol=hash,pegasus", "alpha=0,1.2", "--cfg", "job"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [(d["protocol"]["name"], d["alpha"]) for d in docs] == [
        ("hash", 0.0), ("hash", 1.2), ("pegasus", 0.0), ("pegasus", 1.2)]
    assert main(["run", "-m", "alpha=0,-1", "--cfg", "job"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "alpha = -1" in captured.err


def test_clean_refuses_a_runs_folder_that_is_not_there(tmp_path, monkeypatch, capsys):
    """`clean --runs runz` swept nothing and said "0 leftover(s) removed",
    exit 0, leaving a killed figure's workload tables (GBs) in runs/; the
    default runs/ may be missing (nothing ran here yet)."""
    import netkv.mininet.cleanup

    import netkv.testbed.netns

    done: list[bool] = []
    monkeypatch.setattr(netkv.mininet.cleanup, "clean", lambda force: done.append(force) or [])
    monkeypatch.setattr(netkv.testbed.netns, "sweep", lambda: ([], []))  # this machine's racks
    monkeypatch.chdir(tmp_path)
    assert main(["clean", "--runs", "runz"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--runs 'runz' is not a directory" in lines[0], lines
    assert done == []
    assert main(["clean"]) == 0 and done == [False]   # no runs/ here: fine


def test_trace_refuses_a_negative_show(capsys):
    """`trace --show -1` printed every flow but the last (polars' head(-1))."""
    with pytest.raises(SystemExit) as exc:
        main(["trace", "runs/x", "--show", "-1"])
    line = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "\n" not in line
    assert "argument --show: '-1' (allowed: an integer >= 0)" in line, line


@pytest.mark.parametrize("bad", ["#zz", "#", "#12g4"])
def test_trace_refuses_a_key_hash_that_is_not_hex(bad, capsys):
    """`trace --key '#zz'` was read as the text key '#zz' and matched no
    flow, exit 0."""
    with pytest.raises(SystemExit) as exc:
        main(["trace", "runs/x", "--key", bad])
    line = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "\n" not in line
    assert f"argument --key: {bad!r} (allowed: #<key hash in hex>" in line, line


@pytest.mark.parametrize("option, bad, allowed", [
    ("--client", "x", "an integer >= 0"), ("--server", "-1", "an integer >= 0"),
    ("--servers", "0", "an integer >= 1"), ("--since", "x", "seconds, a finite number >= 0"),
    ("--until", "nan", "seconds, a finite number >= 0"), ("--since", "-1", "seconds"),
])
def test_trace_numeric_options_say_what_is_allowed(option, bad, allowed, capsys):
    """`--client x` was refused as "invalid int value: 'x'", `--servers 0`
    and `--since -1` were taken."""
    with pytest.raises(SystemExit) as exc:
        main(["trace", "runs/x", option, bad])
    line = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "\n" not in line
    assert f"argument {option}: {bad!r} (allowed: {allowed}" in line, line


def test_trace_refuses_a_parquet_path_it_cannot_write(tmp_path, capsys):
    """`trace --parquet DIR` or a path below a file ended, after decoding the
    whole capture, in a polars traceback."""
    afile = tmp_path / "afile"
    afile.write_text("")
    for bad, why in [(tmp_path, "is a folder"), (afile / "x.parquet", "is not a folder")]:
        with pytest.raises(SystemExit) as exc:
            main(["trace", "runs/x", "--parquet", str(bad)])
        line = capsys.readouterr().err.strip()
        assert exc.value.code == 2 and "\n" not in line
        assert f"argument --parquet: '{bad}'" in line and why in line, line
        assert line.endswith("(allowed: a file path in a folder you can write) (see --help)")


def test_trace_key_hash_in_either_case():
    from netkv.trace_args import key

    assert key("#9F2c") == "#9f2c" and key("user1") == "user1"


@pytest.mark.parametrize("extra", [[], ["hydra.launcher.n_jobs=1"]])
def test_a_sweep_with_nothing_to_sweep_is_refused(extra, tmp_path, capsys):
    """`run -m out=X` (no override to name a job's folder): the job would
    write into the sweep's own folder, beside its multirun.yaml, and refuse
    it as a sweep's; one line, exit 2, nothing written."""
    out = tmp_path / "sweep"
    assert main(["run", "-m", *extra, f"out={out}"]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "run -m with nothing to sweep" in line, line
    assert not out.exists()


@pytest.mark.parametrize(("jobs", "shown"), [("0", "0"), ("1.5", "1.5"), ("two", "two"),
                                             ("${oc.env:NETKV_NO_SUCH_VAR,0}", "0")])
@pytest.mark.parametrize("cfg", [[], ["--cfg", "job"]], ids=["run", "cfg-job"])
def test_a_sweep_refuses_launcher_jobs_joblib_cannot_run(jobs, shown, cfg, tmp_path, capsys):
    """`hydra.launcher.n_jobs=0` (docs/configuration.md "Sweeps") reached
    joblib, which raised a traceback after multirun.yaml was written; --cfg
    job refuses it as run does (it printed the sweep, exit 0)."""
    out = tmp_path / "sweep"
    assert main(["run", "-m", *cfg, "alpha=0,1", f"hydra.launcher.n_jobs={jobs}",
                 f"out={out}"]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line, line
    assert (f"hydra.launcher.n_jobs = {shown} (allowed: a nonzero integer, jobs at once; "
            "-1: one per core)") in line, line
    assert not out.exists()


@pytest.mark.parametrize("jobs", ["'2'", "${oc.env:NETKV_NO_SUCH_VAR,2}", "-2", "-1"])
def test_a_sweep_takes_launcher_jobs_joblib_runs(jobs, capsys):
    """What Hydra composes to a nonzero integer is joblib's (a quoted '2' or
    an interpolation were refused, and -2 is joblib's all cores but one)."""
    from netkv.cli import validate_all

    validate_all(["alpha=0,1", f"hydra.launcher.n_jobs={jobs}"], multirun=True)  # no refusal
    assert main(["run", "-m", "--cfg", "job", "alpha=0,1", f"hydra.launcher.n_jobs={jobs}"]) == 0
    assert capsys.readouterr().err == ""


def test_deleting_launcher_jobs_names_the_key_and_what_it_takes(capsys):
    assert main(["run", "-m", "alpha=0,1", "~hydra.launcher.n_jobs"]) == 2
    line = capsys.readouterr().err.strip()
    assert line == ("netkv: invalid config: ~hydra.launcher.n_jobs: JobLibLauncherConf "
                    "(DictConfig) does not support deletion (allowed: a value instead, "
                    "hydra.launcher.n_jobs=<value>)"), line


def test_a_sweep_and_a_run_do_not_share_a_folder(tmp_path, capsys):
    """A sweep given a run's folder as out= wrote its jobs below the run,
    and a run given a sweep's folder wrote its config.yaml beside the jobs:
    either way load() and report then read the folder as one run and the
    sweep's jobs vanished from them. Refused in one line, exit 2."""
    tiny = ["servers=2", "keys=1000", "duration=0.02", "slo.max_points=3"]
    run, sweep = tmp_path / "run", tmp_path / "sweep"
    assert main(["run", *tiny, f"out={run}"]) == 0
    assert main(["run", "-m", "alpha=0.9,1.2", *tiny, "hydra.launcher.n_jobs=1",
                 f"out={sweep}"]) == 0
    capsys.readouterr()
    held = sorted(p.name for p in run.iterdir()), sorted(p.name for p in sweep.iterdir())
    assert main(["run", "-m", "alpha=0.9,1.2", *tiny, f"out={run}"]) == 2
    assert main(["run", *tiny, f"out={sweep}"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"netkv: {run} holds a run (config.yaml), not a sweep; pass another "
                     "out=<dir> or remove it",
                     f"netkv: {sweep} holds a sweep (multirun.yaml), not a run; pass another "
                     "out=<dir> or remove it"], lines
    assert (sorted(p.name for p in run.iterdir()), sorted(p.name for p in sweep.iterdir())) \
        == held


def test_an_interrupted_command_is_one_line(monkeypatch, tmp_path, capsys):
    """Ctrl-C or SIGTERM (docs/robustness.md: one line, for every netkv
    command) during `trace` or `report` ended in a KeyboardInterrupt
    traceback."""
    def interrupted(path):
        raise KeyboardInterrupt

    monkeypatch.setattr("netkv.report.report", interrupted)
    assert main(["report", str(tmp_path)]) == 130
    assert capsys.readouterr().err == "netkv: report: interrupted\n"


def test_every_command_exits_130_from_one_constant():
    """Exit 130 was written three ways (128 + SIGINT in the CLI, a literal in
    lincheck, runner.EXIT_INTERRUPTED); all now read netkv.config.core's."""
    from netkv import cli, runner
    from netkv.config import core
    from netkv.lincheck import __main__ as lincheck

    assert core.EXIT_INTERRUPTED == 130
    assert cli.EXIT_INTERRUPTED is runner.EXIT_INTERRUPTED is lincheck.EXIT_INTERRUPTED


@pytest.mark.parametrize("bad", ["0", "x", "257"])
def test_reproduce_jobs_says_one_range(bad, capsys):
    """--jobs x said 'an integer >= 1', --jobs 257 '1..256'; one check now."""
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "pegasus/fig7", "--jobs", bad])
    line = capsys.readouterr().err
    assert exc.value.code == 2 and line.count("\n") == 1, line
    assert f"argument --jobs: '{bad}' (allowed: 1..256) (see --help)" in line, line


def test_number_options_and_the_one_line_parser_are_shared():
    """The number checks lived in four places (cli.positive_int,
    trace_args.at_least/seconds, lincheck's states/seconds) and the one-line
    parser in two: one module, netkv.argtypes, serves every command."""
    import argparse

    from netkv import argtypes, cli
    from netkv.lincheck import __main__ as lincheck

    assert cli.OneLineParser is lincheck.OneLineParser is argtypes.OneLineParser
    assert argtypes.integer(1, 4)("3") == 3
    assert argtypes.seconds(above_zero=False)("0") == 0.0
    for parse, text in [(argtypes.integer(0), "-1"), (argtypes.seconds(above_zero=True), "0"),
                        (argtypes.seconds(above_zero=False), "inf")]:
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)
