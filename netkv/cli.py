"""The ``python -m netkv`` command line.

  run     compose conf/ with Hydra overrides, validate, run, write the results
  list       protocols, targets, workloads, topologies, SLOs and experiments
  reproduce  rerun a paper figure, plot it, check it against the paper
  report     one self-contained HTML page of a run, sweep or experiment
  clean      remove what a crashed Mininet run left behind
  trace      follow every request through a run's packet capture (capture=true)
  wireshark  install the Wireshark/tshark dissectors for every wire format
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

# Only what --help needs at import: every command imports its own (Hydra,
# pydantic, polars) so that `--help` and `list` answer in well under 0.5 s.
from netkv.argtypes import OneLineParser, integer
from netkv.config.core import EXIT_CONFIG, EXIT_INTERRUPTED, ConfigError, conf_dir


def _fail(message: str) -> int:
    print(f"netkv: {message}", file=sys.stderr)
    return EXIT_CONFIG


# --- run -------------------------------------------------------------------------


def expand_sweep(overrides: list[str]) -> list[list[str]]:
    """The override lists of every job a ``-m`` sweep will run."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
        batches = BasicSweeper.split_arguments(parsed, None)
    except HydraException as exc:
        raise ConfigError(f"invalid override: {str(exc).splitlines()[0]}") from None
    return [job for batch in batches for job in batch]


def swept_keys(job: list[str]) -> list[str]:
    """The keys of a sweep job's overrides that name its folder (Hydra's
    override_dirname: all but out= and hydra.*)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    keys = [o.key_or_group for o in OverridesParser.create().parse_overrides(job)]
    return [k for k in keys if k != "out" and not k.startswith("hydra.")]


def check_launcher_jobs(job: list[str]) -> object:
    """A sweep's ``hydra.launcher.n_jobs`` (docs/configuration.md "Sweeps"),
    as Hydra composes it: 0 reached joblib, which raised after Hydra had
    written multirun.yaml (a bool or a non-integer Hydra refuses itself).
    None: the launcher has none (submitit's)."""
    from netkv.config.compose import JOBS_ALLOWED, launcher_jobs

    jobs = launcher_jobs(job)
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs == 0):
        raise ConfigError(f"invalid config: hydra.launcher.n_jobs = {jobs} (allowed: "
                          f"{JOBS_ALLOWED})")
    return jobs


def validate_all(overrides: list[str], multirun: bool) -> bool:
    """Refuse what Hydra would run badly, before anything is written; True
    for a sweep through joblib's launcher (its jobs may run in workers)."""
    from netkv.config.compose import load
    from netkv.runner import check_supported

    from netkv.results.rundir import RunDir, check_holds
    from netkv.runner import config_yaml

    jobs = expand_sweep(overrides) if multirun else [overrides]
    # n_jobs=1: joblib runs the jobs in this process, no worker to keep deaf
    pooled = multirun and check_launcher_jobs(jobs[0]) not in (None, 1)
    if multirun and not any(swept_keys(job) for job in jobs):
        # a job's folder is named by its overrides (but out= and hydra.*):
        # with none, the job would write into the sweep's own folder
        raise ConfigError("invalid config: run -m with nothing to sweep (allowed: at least one "
                          "KEY=VALUE besides out= and hydra.*, e.g. alpha=0.9,1.2; or run "
                          "without -m)")
    for job in jobs:
        cfg = load(job)
        check_supported(cfg)
        if cfg.out is None:
            continue
        if multirun:   # its jobs write below out, each checked as a run there
            check_holds(Path(cfg.out), "sweep")
        else:
            RunDir(Path(cfg.out)).check(config_yaml(cfg))
    return pooled


def claim_out(overrides: list[str], multirun: bool) -> list[str]:
    """Without ``out=``, create the default run directory here, exclusively
    (``-2``, ``-3``, ... when another run took the name in the same second),
    and hand it to Hydra: runs started at once never share a directory."""
    from netkv.config.compose import load

    if any(o.lstrip("+~").partition("=")[0] == "out" for o in overrides):
        return overrides
    first = expand_sweep(overrides)[0] if multirun else overrides
    return [*overrides, f"out='{unique_dir(Path(load(first).out or 'runs'))}'"]


def unique_dir(base: Path) -> Path:
    """Create ``base``, or ``base-2``, ``base-3``, ... if taken: mkdir is
    atomic, so two processes never get the same one."""
    for n in range(1, 10_000):
        path = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            path.mkdir(parents=True)
        except FileExistsError:
            continue
        return path
    raise ConfigError(f"invalid config: out: no free run directory next to {base}")


def out_of(overrides: list[str]) -> str:
    """The ``out=`` among overrides (claim_out put one there)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    return next(str(o.value()) for o in reversed(parsed) if o.key_or_group == "out")


def launch(overrides: list[str], multirun: bool, pooled: bool) -> int:
    """Hand the validated overrides, out= claimed, to Hydra (joblib launcher
    for sweeps: ``pooled``)."""
    from contextlib import nullcontext

    import hydra

    from netkv.interrupts import joblib_workers
    from netkv.runner import run_job

    main = hydra.main(config_path=str(conf_dir()), config_name="config", version_base=None)(
        run_job
    )
    saved = sys.argv
    sys.argv = [saved[0], *overrides, *(["--multirun"] if multirun else [])]
    try:
        # Ctrl-C: the jobs hear it (runner.run_job), starting workers don't;
        # what joblib's killed workers left of their racks goes after
        with joblib_workers() if pooled else nullcontext():
            main()
    finally:
        sys.argv = saved
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import yaml

    from netkv.config.compose import compose_raw, to_container, validate
    from netkv.results.rundir import RunDirConflict

    overrides: list[str] = list(args.overrides)
    try:
        if args.cfg:
            if args.cfg != "job":
                return _fail(f"--cfg {args.cfg!r} is not supported (allowed: job)")
            from netkv.runner import check_combination

            # a sweep: every job's config, one YAML document each (its
            # comma lists were refused as "Ambiguous value")
            jobs = expand_sweep(overrides) if args.multirun else [overrides]
            if args.multirun:
                check_launcher_jobs(jobs[0])
            texts = []
            for job in jobs:
                cfg = validate(to_container(compose_raw(job)))
                check_combination(cfg)  # what run would refuse of the config itself
                head = f"# {' '.join(job)}\n" if args.multirun else ""
                texts.append(head + yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
            print("---\n".join(texts), end="")
            return 0
        pooled = validate_all(overrides, args.multirun)
        overrides = claim_out(overrides, args.multirun)  # the run directory, before Hydra
    except (ConfigError, RunDirConflict) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        # a sweep's overrides take a second or more to check: no folder yet
        print("netkv: interrupted while checking the overrides: nothing was measured",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        return launch(overrides, args.multirun, pooled)
    except (ConfigError, RunDirConflict) as exc:
        return _fail(str(exc))
    except (KeyboardInterrupt, SystemExit) as exc:
        # a sweep's jobs exit 130 quietly (here or in joblib's workers), for
        # the sweep to say it once; one run's job says it itself
        if isinstance(exc, SystemExit) and (exc.code != EXIT_INTERRUPTED or not args.multirun):
            raise
        # named, not "the same command": without out= that starts a new folder
        out = Path(out_of(overrides))
        # a job's folder may nest (an override value with a "/" in it)
        kept = len(list(out.glob(f"{'**/' if args.multirun else ''}points.d/*/point.parquet")))
        again = "the sweep again" if args.multirun else "again"
        print(f"netkv: interrupted: {kept} finished point(s) kept in {out} (run {again} "
              f"with out={out} to resume)", file=sys.stderr)
        return EXIT_INTERRUPTED


# --- list ------------------------------------------------------------------------


def _describe(path: Path) -> str:
    """A config file's description: its ``description:`` key or first comment."""
    import yaml

    text = path.read_text(encoding="utf-8")
    # libyaml's safe loader where PyYAML has it: the pure-Python one took
    # ~0.4 s of list's ~0.9 s over the 69 files (bench-cli's goal: 0.5 s)
    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    if isinstance(data, dict) and isinstance(data.get("description"), str):
        return data["description"]
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return ""


def experiments_dir() -> Path:
    return conf_dir().parent / "experiments"


def cmd_list(args: argparse.Namespace) -> int:
    from netkv.config.setting import described, setting_of
    from netkv.protocols import PROTOCOLS
    from netkv.protocols import lookup as protocol_plugin

    sections = [args.what] if args.what else ["protocol", "target", "workload", "topology",
                                              "slo", "experiment"]
    for section in sections:
        print(f"{section}s:" if section != "topology" else "topologies:")
        if section == "experiment":
            files = sorted(experiments_dir().glob("*/*.yaml"))
            if not files:
                print("  (none yet)")
            for path in files:
                name = f"{path.parent.name}/{path.stem}"
                print(f"  {name:<22} {_describe(path)}")
            continue
        for path in sorted((conf_dir() / section).glob("*.yaml")):
            line = _describe(path)
            if section == "protocol":
                info = protocol_plugin(path.stem) if path.stem in PROTOCOLS else None
                where = ", ".join(info.targets) if info and info.targets else "not yet runnable"
                line = f"{line} [runs on: {where}]"
                setting = setting_of(path.stem)
                if setting:  # what a bare protocol=<name> changes (docs/configuration.md)
                    line += f" [setting: {described(setting, ' ')}]"
            print(f"  {path.stem:<22} {line}")
    return 0


# --- reproduce ---------------------------------------------------------------------


def cmd_reproduce(args: argparse.Namespace) -> int:
    from netkv.config.schema import check_out_dir
    from netkv.results.rundir import OTHER_OUT, RunDirConflict

    from netkv.experiments.checks import exit_code
    from netkv.experiments.pool import LaunchError, Pool
    from netkv.experiments.reproduce import default_out
    from netkv.experiments.run import reproduce
    from netkv.runner import log_console

    # chosen here, so that an interruption can name the directory to resume
    out = Path(args.out) if args.out else default_out(args.experiment)
    try:
        if args.out is not None:
            try:
                check_out_dir(args.out)
            except ValueError as exc:
                raise ConfigError(f"invalid argument: --{exc}") from None
        pool = Pool(args.jobs, args.launcher, launcher_params(args.launcher_param))
        results = reproduce(args.experiment, list(args.overrides), out, pool, log_console())
    except RunDirConflict as exc:
        # a cell's folder refused (other overrides, another build): what the
        # user passes here is --out, not a run's out=
        return _fail(str(exc).replace(OTHER_OUT, "pass another --out or remove it"))
    except ConfigError as exc:
        return _fail(str(exc))
    except LaunchError as exc:
        print(f"netkv: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (_terminated): as a run reports it
        kept = (f"every finished point is kept in {out} (run the same command with "
                f"--out {out} to resume)" if out.is_dir() else "nothing was measured")
        print(f"netkv: interrupted: {kept}", file=sys.stderr)
        return EXIT_INTERRUPTED
    return exit_code(results)


def launcher_params(items: list[str]) -> dict[str, object]:
    """``--launcher-param KEY=VALUE`` (repeatable): numbers become numbers."""
    out: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--launcher-param {item!r}: expected KEY=VALUE "
                              "(e.g. slurm_partition=debug, timeout_min=30)")
        try:
            out[key] = int(value)
        except ValueError:
            out[key] = value
    return out


# --- report --------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    from netkv.report import report

    try:
        page = report(Path(args.path))
    except FileNotFoundError as exc:
        return _fail(str(exc))
    print(f"wrote {page}")
    return 0


# --- clean ---------------------------------------------------------------------------


def cmd_clean(args: argparse.Namespace) -> int:
    from netkv.mininet.cleanup import clean

    # a mistyped --runs swept nothing and said "0 leftover(s)"; the default
    # may well not exist yet
    runs = Path(args.runs or "runs")
    if args.runs is not None and not runs.is_dir():
        return _fail(f"clean: --runs {args.runs!r} is not a directory (allowed: the folder "
                     "that holds run and figure folders; default runs)")
    inv = None
    if args.inventory:   # a misspelled name is refused before anything is removed
        from netkv.config.compose import load

        try:
            inv = load([f"inventory={args.inventory}"]).inventory
        except ConfigError as exc:
            return _fail(str(exc))
    removed = clean(force=args.force)
    from netkv.testbed import netns
    from netkv.testbed.clean import clean_inventory
    from netkv.targets.testbed import STATE_ROOT

    # session racks (netns.up_session): a crashed session's removed whole,
    # a live one's runs cleaned as its inventory's
    live, gone = netns.sweep()
    removed += gone
    for rack_inv in live:
        removed += clean_inventory(rack_inv, STATE_ROOT, force=args.force)
    if inv is not None:
        removed += clean_inventory(inv, STATE_ROOT, force=args.force)
    from netkv.sim.workload_cache import sweep_dead

    # figures killed by SIGKILL leave their shared workload tables (GBs)
    removed += [str(f) for f in sweep_dead(runs, recursive=True)]
    for item in removed:
        print(f"removed {item}")
    print(f"clean: {len(removed)} leftover(s) removed")
    return 0


# --- trace ---------------------------------------------------------------------------


def cmd_trace(args: argparse.Namespace) -> int:
    from netkv.trace import cmd_trace as run_trace

    return run_trace(args)


# --- wireshark -------------------------------------------------------------------------


def cmd_wireshark(args: argparse.Namespace) -> int:
    from netkv.wire.wireshark import install, lua_source

    if args.print:
        print(lua_source(), end="")
        return 0
    try:
        path = install(Path(args.dir) if args.dir else None)
    except OSError as exc:   # --dir names a file, a folder not writable, ...
        where = f"--dir {args.dir!r}" if args.dir else "the personal Lua plugin folder"
        why = "a file" if args.dir and Path(args.dir).is_file() else exc.strerror or exc
        return _fail(f"wireshark: cannot write netkv.lua into {where}: {why} "
                     "(allowed: a folder you can write)")
    print(f"wrote {path} (restart Wireshark, or `tshark -r FILE` picks it up)")
    return 0


# --- entry -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m netkv",
        description="Experiment framework for in-network key-value protocols.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="run one experiment (or a -m sweep) and write its run directory",
        description=(
            "Compose conf/ with Hydra overrides, validate it, find the maximum throughput "
            "under the SLO, and write runs/<date>/<time>-<name>/. Examples: "
            "`run protocol=pegasus alpha=1.2`, `run -m alpha=0.9,0.99,1.2`."
        ),
    )
    # default=[]: argparse counts a "*" positional without a default as required
    # in its usage errors ("required: experiment, KEY=VALUE")
    run.add_argument("overrides", nargs="*", default=[], metavar="KEY=VALUE",
                     help="Hydra overrides: group choices (protocol=hash) and values (alpha=1.2)")
    run.add_argument("-m", "--multirun", action="store_true",
                     help="sweep every combination of comma-separated values, in parallel")
    run.add_argument("--cfg", metavar="job", help="print the resolved, validated config and exit")
    run.set_defaults(func=cmd_run)

    lst = sub.add_parser("list", help="list protocols, targets, workloads and experiments",
                         description="One line per choice, with what it is.")
    lst.add_argument("what", nargs="?", choices=["protocol", "target", "workload", "topology",
                                                 "slo", "experiment"])
    lst.set_defaults(func=cmd_list)

    rep = sub.add_parser(
        "reproduce", help="rerun a paper figure, plot it and check it against the paper",
        description=("Run every cell of experiments/<paper>/<figure>.yaml, write results.parquet, "
                     "plot.png and checks.md (paper says / we measured / verdict). Exit 0 if "
                     "every claim holds, 3 if the others are declared differences, 1 if "
                     "a claim fails, 2 for a bad config, 130 if interrupted. Example: "
                     "`reproduce pegasus/fig7`."),
    )
    rep.add_argument("experiment", help="experiment name, e.g. pegasus/fig7 (see `list experiment`)")
    rep.add_argument("overrides", nargs="*", default=[], metavar="KEY=VALUE",
                     help="extra overrides applied to every cell (e.g. duration=0.1)")
    rep.add_argument("--out", help="experiment directory (re-use it to resume)")
    rep.add_argument("--jobs", type=integer(1, 256), default=2, help="cells run at once (default 2)")
    rep.add_argument("--launcher", default="joblib",
                     choices=["joblib", "submitit_local", "submitit_slurm"],
                     help="where cells run: joblib workers here (default), or submitit jobs "
                          "(local processes or Slurm; needs the `cluster` extra)")
    rep.add_argument("--launcher-param", action="append", default=[], metavar="KEY=VALUE",
                     help="submitit executor parameter, repeatable (e.g. "
                          "slurm_partition=debug, timeout_min=30, cpus_per_task=2)")
    rep.set_defaults(func=cmd_reproduce)

    rpt = sub.add_parser(
        "report", help="one self-contained HTML report of a run, sweep or experiment",
        description="Write PATH/report.html: every figure (also as SVG and PDF), the "
                    "paper-vs-measured table of an experiment, the provenance and the noise "
                    "indicators of every point. Opens without a network.")
    rpt.add_argument("path", help="a run directory, a folder of runs, or an experiment directory")
    rpt.set_defaults(func=cmd_report)

    cln = sub.add_parser(
        "clean", help="remove namespaces, links and processes a crashed Mininet run left",
        description="Kill leftover netkv-switch/kvserver/kvclient processes and remove the "
                    "Mininet interfaces and state of runs that are no longer alive.")
    cln.add_argument("--force", action="store_true",
                     help="also remove the state of runs whose owner still looks alive")
    cln.add_argument("--runs", metavar="DIR",
                     help="where run and figure folders are (default: runs): the workload "
                          "tables of figures whose process is gone are removed")
    cln.add_argument("--inventory", metavar="NAME",
                     help="also stop and remove what crashed target=testbed runs left on "
                          "the hosts of conf/inventory/NAME.yaml")
    cln.set_defaults(func=cmd_clean)

    from netkv.trace_args import build_parser as trace_parser

    trc = sub.add_parser(
        "trace", help="follow every request through a run's packet capture",
        description="Decode every captured frame with netkv's codecs, follow each request "
                    "client -> switch -> server -> back by (client, req_id), print per-hop "
                    "times and what happened, and write the flows as parquet.")
    trace_parser(trc)
    trc.set_defaults(func=cmd_trace)

    ws = sub.add_parser(
        "wireshark", help="install the Wireshark/tshark dissectors (netkv.lua)",
        description="Generate netkv.lua from the wire layout (netkv/wire/layout.py) and write "
                    "it into your personal Wireshark Lua plugin folder (`tshark -G folders`).")
    ws.add_argument("--dir", help="plugin folder to write to instead")
    ws.add_argument("--print", action="store_true", help="print the plugin instead of installing")
    ws.set_defaults(func=cmd_wireshark)
    return parser


def _terminated(signum: int, frame: object) -> None:
    # SIGTERM (kill, timeout, a batch scheduler) ends a run as Ctrl-C does:
    # finished points stay, racks and a figure's workload tables are removed
    raise KeyboardInterrupt


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, overrides anywhere among the options: argparse fills
    a ``nargs="*"`` positional from one stretch only, so the overrides after
    an option (`reproduce pegasus/fig7 --jobs 1 duration=0.1`, `run
    protocol=hash -m alpha=0,1.2`) came back unrecognized."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    overrides = getattr(args, "overrides", None)
    stray = [a for a in extra if overrides is None or a.startswith("-") or "=" not in a]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = [*overrides, *extra]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if main_thread else None
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        # Ctrl-C, or SIGTERM (_terminated), in a command that does not say
        # it itself (run and reproduce name what they kept): one line
        print(f"netkv: {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (`netkv list | head`): exit as a shell's SIGPIPE
        # would, without a traceback; stdout to /dev/null quiets the final flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13
    finally:
        if main_thread:   # an embedding caller (a test) keeps its own handler
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    raise SystemExit(main())
