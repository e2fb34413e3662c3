"""One run: validate, prepare the target, search the load, write the results.

``run_job`` is what Hydra calls for every job (one run, or one point of a
``-m`` sweep, possibly in a joblib worker). It never keeps global state: all
it needs comes from the composed config.
"""

from __future__ import annotations

import hashlib
import math
import importlib
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import polars as pl
import yaml
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from netkv.backends import backend_class
from netkv.config.compose import ConfigError, validate
from netkv.config.core import EXIT_INTERRUPTED
from netkv.config.setting import notice, setting_named
from netkv import retries
from netkv.interrupts import interruptible
from netkv.config.schema import RunConfig
from netkv.loadstats import balance_columns
from netkv.native import NativeBuildMissing
from netkv.protocols import implemented_on
from netkv.protocols import lookup as protocol_plugin
from netkv.results import capture, noise, provenance
from netkv.results.columns import config_columns
from netkv.results.rundir import RunDir, RunDirConflict, point_key
from netkv.slo import (CI_LEVEL, MeasurementError, SearchOutcome, latency_key, passes,
                       search_repeated)
from netkv.targets.base import PointResult, Target

if TYPE_CHECKING:
    from netkv.sim.workload_cache import WorkloadCache


REFERENCE_KEY = "reference"  # the SLO reference point's fragment in points.d/
LOG_WIDTH = 400  # columns of a console that is not a terminal (a log file)

#: placement (target.name) -> "module:Class" of its Target
PLACEMENTS: dict[str, str] = {
    "sim": "netkv.targets.sim:SimTarget",
    "mininet": "netkv.targets.mininet:MininetTarget",
    "testbed": "netkv.targets.testbed:TestbedTarget",
}


class UnsupportedCombination(ConfigError):
    """The protocol does not run on the chosen target (yet)."""


def check_supported(cfg: RunConfig) -> None:
    """Refuse, in one line, a run that cannot start here: the config
    (check_combination), then this machine (fresh binaries, the switch
    back-end's tools, the placement's check_machine)."""
    provenance.check_fresh()  # binaries older than their C sources would run the old code
    with setting_named(cfg.model_dump(mode="json")):   # one dump for every check
        _check_combination(cfg)
        backend_class(cfg.target.switch).preflight(cfg, protocol_plugin(cfg.protocol.name))
        check = getattr(placement_module(cfg.target.name), "check_machine", None)
        if check is not None:  # what the placement needs of this machine (root, tools)
            check(cfg)


def check_combination(cfg: RunConfig) -> None:
    """Refuse, in one line, what no machine could run: a protocol the target
    does not implement, hostile traffic the protocol has none of, and what
    the placement cannot run (its check_config); ``run --cfg job`` too.
    A refusal of a value the protocol's setting gave names the setting."""
    with setting_named(cfg.model_dump(mode="json")):
        _check_combination(cfg)


def _check_combination(cfg: RunConfig) -> None:
    info = protocol_plugin(cfg.protocol.name)
    if cfg.target.name not in info.targets or cfg.target.name not in PLACEMENTS:
        ready = ", ".join(implemented_on(cfg.target.name)) or "none"
        raise UnsupportedCombination(
            f"invalid config: protocol = '{cfg.protocol.name}' is not implemented on "
            f"target = '{cfg.target.name}' yet (implemented there: {ready})"
        )
    if cfg.topology.hostile_clients:
        # the simulator and kvclient --mode hostile send the host logic's
        # client_hostile: one C function serves every target
        from netkv.sim import native

        _, lib = native.load()
        if not lib.nk_host_has_hostile(cfg.protocol.name.encode()):
            raise UnsupportedCombination(
                f"invalid config: topology.hostile_clients = {cfg.topology.hostile_clients}: "
                f"protocol {cfg.protocol.name} has no hostile traffic (allowed: 0; "
                f"docs/security.md)")
    check = getattr(placement_module(cfg.target.name), "check_config", None)
    if check is not None:  # what the placement cannot run, before anything is written
        check(cfg)


def placement_module(name: str) -> ModuleType:
    """The module of placement ``name`` (its optional check_config and
    check_machine)."""
    return importlib.import_module(PLACEMENTS[name].partition(":")[0])


def placement_class(name: str) -> type[Target]:
    """The Target class of placement ``name``."""
    module, _, cls = PLACEMENTS[name].partition(":")
    found: type[Target] = getattr(importlib.import_module(module), cls)
    return found


def make_target(cfg: RunConfig, workloads: "WorkloadCache | None" = None) -> Target:
    """The placement ``target.name`` with the protocol's controller and params;
    a placement that builds workloads takes them from ``workloads``."""
    check_supported(cfg)
    info = protocol_plugin(cfg.protocol.name)
    target_cls = placement_class(cfg.target.name)
    factory = info.sim_controller if cfg.target.name == "sim" else info.rack_controller
    shares = target_cls.builds_workloads and workloads is not None
    shared = {"workloads": workloads} if shares else {}
    target: Target = target_cls(cfg, controller_factory=factory(cfg),
                                params=info.pipeline_params(cfg), **shared)
    return target


def run_workloads(given: "WorkloadCache | None") -> "WorkloadCache":
    """``given``, or a cache of the run's own: its racks (SLO reference and
    measured) share one workload."""
    if given is not None:
        return given
    from netkv.sim.workload_cache import WorkloadCache

    return WorkloadCache()


def measure_point(target: Target, cfg: RunConfig, run_dir: RunDir, key: str,
                  offered_rps: float, seed: int) -> PointResult:
    """One point (captured when cfg.capture), with the machine's busyness
    during it (netkv.results.noise); on real packets measured again while
    the hypervisor stole more than ``slo.max_steal`` of the CPU time (at
    most ``slo.steal_retries`` times; ``steal_remeasured`` counts them).
    Not with timed faults (crashes, switch outages): they fire once per
    rack, so a second try would measure a run without them."""
    faults = cfg.target.faults
    timed = bool(faults.crashes or faults.switch_outages)
    again = cfg.slo.steal_retries if target.real_time and not timed else 0
    return noise.measure_until_calm(
        lambda: capture.run_point(target, cfg, run_dir.path, key, offered_rps, seed),
        cfg.slo.max_steal, again)


def point_seed(run_seed: int, offered_rps: float, repeat: int = 0) -> int:
    """A per-point seed that depends only on the run seed, the load and the
    repeat's index (``repeat=N``; the first repeat keeps the single run's seed)."""
    text = f"{run_seed}:{offered_rps:.9e}" + (f":{repeat}" if repeat else "")
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 62) - 1)


def config_yaml(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)


def run_provenance(cfg: RunConfig, argv: list[str], console: Console) -> dict[str, Any]:
    """The run's provenance; the protocol's caveats for this config (e.g. a
    baseline that is not linearizable) printed and kept in it."""
    prov = provenance.collect(
        seed=cfg.seed, target=cfg.target.name, protocol=cfg.protocol.name, argv=argv
    )
    plugin = protocol_plugin(cfg.protocol.name)
    # the knobs as the switch and hosts get them, auto ones resolved
    # (Pegasus' protocol.amo: null in config.yaml, amo=1 here with resends)
    params = plugin.pipeline_params(cfg)
    if params:
        prov["protocol_params"] = params
    caveats = plugin.caveats(cfg)
    if caveats:
        prov["caveats"] = caveats
        for line in caveats:
            console.print(f"[yellow]{cfg.name}: {line}[/yellow]")
    return prov


def execute(cfg: RunConfig, out_dir: Path, argv: list[str], console: Console,
            workloads: "WorkloadCache | None" = None) -> pl.DataFrame:
    """Run the whole SLO search for ``cfg`` into ``out_dir``; return points."""
    workloads = run_workloads(workloads)
    run_dir = RunDir(out_dir)
    prov = run_provenance(cfg, argv, console)
    held = run_dir.prepare(config_yaml(cfg), prov)
    if held:
        console.print(f"[dim]resuming {out_dir}: {held} point(s) already measured[/dim]")
    columns = config_columns(cfg)
    order: list[str] = []
    with make_target(cfg, workloads) as target, Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
        console=console, transient=True, disable=not console.is_terminal,
    ) as progress:
        task = progress.add_task(f"{cfg.name}: unloaded point", total=None)
        run_dir.add_provenance(target.provenance())

        key_of: dict[tuple[int, float], str] = {}   # (repeat, load asked for): point key

        def measure_one(i: int, offered_rps: float, phase: str) -> PointResult:
            seed = point_seed(cfg.seed, offered_rps, i)
            key = point_key(offered_rps, seed)
            if key not in key_of.values():
                # one row a measurement: the search may probe the unloaded
                # point's load again (slo.unloaded_fraction=0.25 is its first
                # probe), which then reuses it
                order.append(key)
            key_of[(i, offered_rps)] = key
            cached = run_dir.load_point(key)
            if cached is not None:
                return cached
            times = f" (search {i + 1}/{cfg.repeat})" if cfg.repeat > 1 else ""
            progress.update(task, description=f"{cfg.name}: {phase} {offered_rps:,.0f} "
                                              f"req/s{times}")
            result = measure_point(target, cfg, run_dir, key, offered_rps, seed)
            run_dir.store_point(key, phase, result, columns)
            if cfg.record_history:  # after the commit mark: an unmarked folder is discarded
                target.write_history(run_dir.path / "points.d" / key / "history.jsonl")
            return result

        announced: list[bool] = []
        used: list[dict[str, float | int | None]] = []

        def bound_of(i: int) -> float | None:
            """Search i's bound, from a reference measured just before it;
            its clients' timeouts follow from it (injected faults)."""
            ref_ns = reference_bound_ns(cfg, run_dir, order, console, i, refs)
            resolved = retries.resolve(cfg, retries.known_slo_ns(cfg, ref_ns)).topology
            target.set_client_retries(resolved.timeout_us or 0.0, resolved.retries or 0)
            used.append(client_retries_used(resolved))
            run_dir.note(client_retries=used)
            if resolved.retries and cfg.topology.retries is None and not announced:
                announced.append(True)
                console.print(f"[dim]{cfg.name}: injected faults: clients resend after "
                              f"{resolved.timeout_us:.0f} us, at most {resolved.retries} times "
                              "(topology.retries=0 turns this off)[/dim]")
            return ref_ns

        with ReferenceRack(cfg, workloads) as refs:
            if target.one_rack_at_a_time:
                # the protocol's rack comes up at its first point and stays:
                # every search's reference first, then the reference rack down
                for i in range(cfg.repeat):
                    reference_bound_ns(cfg, run_dir, order, console, i, refs)
                refs.close()
            outcome = search_repeated(measure_one, cfg.repeat, target.capacity_hint_rps(),
                                      cfg.slo, bound_of)
    references = [refs.points[i] for i in sorted(refs.points)]
    return finish(run_dir, outcome, order, cfg, console, key_of, references)


def execute_at(cfg: RunConfig, out_dir: Path, argv: list[str], console: Console,
               offered_rps: float, slo_ns: float, phase: str = "fixed",
               workloads: "WorkloadCache | None" = None) -> pl.DataFrame:
    """One point at ``offered_rps`` (no search) into ``out_dir``, judged
    against ``slo_ns`` (fixed elsewhere, e.g. by a search run); return points.

    The long run of a timeline experiment. Stored like a search's points (a
    fragment under points.d/, then the run-level tables), so it resumes the
    same way: the point's key is (load, seed), and a finished point is never
    measured again."""
    run_dir = RunDir(out_dir)
    prov = run_provenance(cfg, argv, console)
    if run_dir.prepare(config_yaml(cfg), prov):
        console.print(f"[dim]resuming {out_dir}: the point is already measured[/dim]")
    seed = point_seed(cfg.seed, offered_rps)
    key = point_key(offered_rps, seed)
    result = run_dir.load_point(key)
    resolved = retries.resolve(cfg, slo_ns).topology
    run_dir.note(client_retries=[client_retries_used(resolved)])
    if result is None:
        console.print(f"[dim]{cfg.name}: {offered_rps:,.0f} req/s for {cfg.duration:g} s[/dim]")
        with make_target(cfg, workloads) as target:
            run_dir.add_provenance(target.provenance())  # its hosts, as a search's run
            target.set_client_retries(resolved.timeout_us or 0.0, resolved.retries or 0)
            result = measure_point(target, cfg, run_dir, key, offered_rps, seed)
        run_dir.store_point(key, phase, result, config_columns(cfg))
    met = passes(result, slo_ns, cfg.slo)
    points = run_dir.finalize_tables(slo_ns, {key: met}, key if met else None, [key])
    run_dir.note(load_after=provenance.load_average())
    return points


def client_retries_used(topology: Any) -> dict[str, float | int | None]:
    """What the clients of a search ran with, ``null`` (auto) resolved:
    config.yaml keeps what was asked."""
    timeout = float(topology.timeout_us or 0.0)
    # a probe judged by no SLO (slo_ns inf) resends never: JSON has no inf
    return {"timeout_us": timeout if math.isfinite(timeout) else None,
            "retries": int(topology.retries or 0) if math.isfinite(timeout) else 0}


def reference_protocol(cfg: RunConfig) -> Any:
    """``slo.reference``'s config: its model's defaults, with every knob it
    shares with the run's protocol (placement: ``virtual_nodes``, ``ring``)
    taken from the run, so that both place keys alike."""
    model = protocol_plugin(cfg.slo.reference).config
    own = cfg.protocol.model_dump()
    shared = {k: own[k] for k in model.model_fields
              if k in own and k not in ("name", "description", "max_servers")}
    return model.model_validate({**shared, "name": cfg.slo.reference})


def reference_config(cfg: RunConfig) -> RunConfig:
    """The SLO's reference: ``slo.reference`` (the hash baseline by default)
    on the same rack, key space and sizes, with uniform popularity and no
    writes, so that a low load is truly unloaded whatever the skew (a hot
    key's core would queue even at 5% of the rack's capacity) and every skew
    of a figure gets the same bound. Nor does it run hostile clients' traffic
    (load, and refused packets) or timed faults (a crash or switch outage in
    its window would move the bound); link faults, which every request of
    the run meets, stay."""
    workload = cfg.workload.model_copy(update={"kind": "uniform", "alpha": 0.0,
                                               "write_ratio": 0.0})
    topology = cfg.topology.model_copy(update={"hostile_clients": 0})
    faults = cfg.target.faults.model_copy(update={"crashes": [], "switch_outages": []})
    target = cfg.target.model_copy(update={"faults": faults})
    return cfg.model_copy(update={"protocol": reference_protocol(cfg), "workload": workload,
                                  "topology": topology, "target": target,
                                  "record_history": False})


class ReferenceRack:
    """The SLO reference's rack (``reference_config``), brought up the first
    time a reference point must be measured and held until the run ends:
    beside the protocol's, so that search i's reference is measured just
    before search i."""

    def __init__(self, cfg: RunConfig, workloads: "WorkloadCache | None" = None) -> None:
        self.cfg = reference_config(cfg)
        self.workloads = workloads
        self.stack = ExitStack()
        self.target: Target | None = None
        self.points: dict[int, PointResult] = {}   # search -> its reference, once obtained

    def get(self) -> Target:
        if self.target is None:
            self.target = self.stack.enter_context(make_target(self.cfg, self.workloads))
        return self.target

    def __enter__(self) -> "ReferenceRack":
        return self

    def close(self) -> None:
        self.stack.close()
        self.target = None

    def __exit__(self, *exc: object) -> None:
        self.close()


def reference_key(i: int) -> str:
    return REFERENCE_KEY if i == 0 else f"{REFERENCE_KEY}-{i}"


def reference_bound_ns(cfg: RunConfig, run_dir: RunDir, order: list[str], console: Console,
                       i: int, refs: ReferenceRack) -> float | None:
    """slo.reference=<protocol>: search i's bound, factor x that protocol's
    unloaded median on the same rack and workload, measured now (stored as
    point ``reference`` or ``reference-<i>``; resumed like any point). With
    repeat=N each search gets its own, measured just before it: one bound
    for all, measured before any search, moved the whole run when the
    machine was busy in that minute (a Mininet run's bound went from about
    0.8 ms to 17 ms; docs/configuration.md "Repeats")."""
    if cfg.slo.kind != "auto" or cfg.slo.reference == "self":
        return None
    key = reference_key(i)
    result = refs.points.get(i)
    if result is None:
        result = run_dir.load_point(key)
        order.append(key)
    if result is None:
        times = f", for search {i + 1} of {cfg.repeat}" if cfg.repeat > 1 else ""
        console.print(f"[dim]{cfg.name}: measuring the SLO reference "
                      f"({cfg.slo.reference}, uniform, unloaded{times})[/dim]")
        ref = refs.get()
        rate = ref.capacity_hint_rps() * cfg.slo.unloaded_fraction
        result = measure_point(ref, refs.cfg, run_dir, key, rate, point_seed(cfg.seed, rate, i))
        # labelled with what it ran: the reference protocol on its own workload
        run_dir.store_point(key, "reference", result, config_columns(refs.cfg))
    refs.points[i] = result
    p50 = result.latency_ns.get("p50", float("inf"))
    if result.completed == 0 or not p50 < float("inf"):
        # over half lost leaves the median unbounded: no bound, whatever completed
        done = ("no request" if result.completed == 0 else
                f"only {result.completed} of its {result.issued} requests: over half "
                "lost, its median is unbounded")
        raise MeasurementError(f"the SLO reference point ({cfg.slo.reference}, unloaded) "
                               f"completed {done}")
    return cfg.slo.factor * p50


def measure_slo_ns(cfg: RunConfig, out_dir: Path, argv: list[str], console: Console,
                   workloads: "WorkloadCache | None" = None) -> float | None:
    """The bound many runs share (one SLO per figure): factor x the SLO
    reference's unloaded median on ``cfg``'s rack, measured once into
    ``out_dir`` (a run directory holding only the reference point; resumed
    like any point). None when there is nothing to share: a fixed SLO is
    already one bound, and ``slo.reference=self`` is each protocol's own."""
    if cfg.slo.kind != "auto" or cfg.slo.reference == "self":
        return None
    run_dir = RunDir(out_dir)
    prov = provenance.collect(
        seed=cfg.seed, target=cfg.target.name, protocol=cfg.protocol.name, argv=argv
    )
    run_dir.prepare(config_yaml(cfg), prov)
    order: list[str] = []
    with ReferenceRack(cfg, workloads) as refs:
        slo_ns = reference_bound_ns(cfg, run_dir, order, console, 0, refs)
    run_dir.finalize_tables(slo_ns, {}, None, order)
    run_dir.note(load_after=provenance.load_average())
    return slo_ns


def finish(run_dir: RunDir, outcome: SearchOutcome, order: list[str], cfg: RunConfig,
           console: Console, key_of: dict[tuple[int, float], str],
           references: Sequence[PointResult] = ()) -> pl.DataFrame:
    """The run-level tables: each measurement's own verdict, the best one;
    with repeats also each row's search index (repeat_index; the knob keeps
    its own column, repeat), its load's verdict over the searches that
    measured it, whether they agree and the maximum's
    confidence interval."""
    met: dict[str, bool] = {}
    extra: dict[str, dict[str, Any]] = {}
    bound_of: dict[str, float] = {}
    lo, hi, level = outcome.interval_rps()
    for i in range(len(outcome.bounds)):
        bound_of[reference_key(i)] = outcome.bound(i)
    for load in outcome.loads:
        for j, rid in enumerate(load.ids()):
            key = key_of[(rid, load.rate)]
            met[key] = load.passed[j] if load.passed else load.slo_met
            bound_of[key] = outcome.bound(rid)
            if cfg.repeat > 1:
                extra[key] = {"repeat_index": rid, "load_slo_met": load.slo_met,
                              "repeats_agree": load.agree, "max_tput_lo_rps": lo,
                              "max_tput_hi_rps": hi, "ci_level": level}
    found = outcome.best_repeat()
    best_key = key_of[(found[0].ids()[found[1]], found[0].rate)] if found is not None else None
    points = run_dir.finalize_tables(outcome.slo_ns, met, best_key, order, extra, bound_of)
    run_dir.note(load_after=provenance.load_average())
    print_summary(cfg, outcome, run_dir.path, console, references)
    return points


def human_rate(rps: float) -> str:
    """3 significant digits with k/M: 1.73 M, 4.21 k."""
    for scale, unit in ((1e6, " M"), (1e3, " k")):
        if rps >= scale:
            return f"{rps / scale:.3g}{unit}"
    return f"{rps:.3g}"


def print_summary(cfg: RunConfig, outcome: SearchOutcome, path: Path, console: Console,
                  references: Sequence[PointResult] = ()) -> None:
    table = Table(title=f"{cfg.name}: throughput under SLO", title_justify="left")
    for column in ("protocol", "target", "alpha", "writes", "servers", "SLO us",
                   "max req/s", "p50 us", "p99 us", "max/mean"):
        table.add_column(column, justify="right")
    found = outcome.best_repeat()
    best = found[0] if found is not None else None
    at_max: PointResult | None = None
    if found is not None:
        at_max = found[0].repeats[found[1]] if found[0].repeats else found[0].result
        # "-": no server served a request (the switch answered all): NaN
        over_mean = balance_columns(at_max.server_requests)["max_over_mean"]
        spread = "-" if math.isnan(over_mean) else f"{over_mean:.2f}"
        cells = [human_rate(at_max.achieved_rps), f"{at_max.latency_ns['p50'] / 1e3:.1f}",
                 f"{at_max.latency_ns['p99'] / 1e3:.1f}", spread]
    else:
        cells = ["none met", "-", "-", "-"]
    variant = protocol_plugin(cfg.protocol.name).variant(cfg)
    label = f"{cfg.protocol.name} ({variant})" if variant else cfg.protocol.name
    table.add_row(label, cfg.target.name, f"{cfg.workload.alpha:g}",
                  f"{cfg.workload.write_ratio:g}", str(cfg.topology.servers),
                  f"{outcome.slo_ns / 1e3:.1f}", *cells)
    console.print(table)
    unloaded = outcome.unloaded
    if not unloaded.slo_met:
        # e.g. Mininet on a small VM, where a quiet flow pays wakeups (the tail
        # is no better at low load), or a protocol that cannot meet the
        # reference's bound at all: either way the maximum is not a knee
        res, key = unloaded.result, latency_key(cfg.slo.percentile)
        tail = res.tail_ns(cfg.slo.percentile) / 1e3
        if res.completion < cfg.slo.min_completion:
            why = (f"completion {res.completion:.4f} < {cfg.slo.min_completion:g}: "
                   f"{res.lost} of {res.issued} requests never completed, {res.retries} resent")
            if retries.injects_faults(cfg) and res.retries == 0:
                why += "; client retries are off (topology.timeout_us, topology.retries)"
        else:
            why = f"{key} {tail:.1f} us > {outcome.slo_ns / 1e3:.1f} us"
            if res.retries > (1 - cfg.slo.percentile / 100) * res.issued:
                # injected loss: a resent request's latency includes its timeout
                why += (f"; {res.retries} of {res.issued} requests were resent after their "
                        f"timeout, over {100 - cfg.slo.percentile:g}%, so the {key} includes one")
        if best is None:
            console.print(f"[yellow]warning: no load point met the SLO; the unloaded point "
                          f"({res.offered_rps:,.0f} req/s) misses it: {why}[/yellow]")
        else:
            console.print(f"[yellow]warning: the unloaded point ({res.offered_rps:,.0f} req/s) "
                          f"already misses the SLO ({why}): the maximum above is not where "
                          "load starts to cost latency[/yellow]")
    warn_reference_noise(cfg, outcome, references, console)
    if cfg.repeat > 1:
        lo, hi, level = outcome.interval_rps()
        interval = (f"{human_rate(lo)}-{human_rate(hi)} req/s ({100 * level:.0f}% interval of "
                    f"the median)" if math.isfinite(lo) else
                    f"no {100 * CI_LEVEL:.0f}% interval with fewer than 5 repeats")
        console.print(f"{cfg.repeat} independent searches: max is the median of their "
                      f"maxima, {interval}")
        bounds = ", ".join(f"{b / 1e3:.0f}" for b in outcome.bounds)
        console.print(f"each search under its own SLO bound (us): {bounds}; the table's is "
                      "their median")
        for load in outcome.disagreeing:
            tails = ", ".join(f"{r.tail_ns(cfg.slo.percentile) / 1e3:.0f}" for r in load.repeats)
            console.print(f"[yellow]warning: the searches that measured "
                          f"{load.result.offered_rps:,.0f} req/s disagree (tails {tails} us; "
                          f"{sum(load.passed)} of {len(load.passed)} met the SLO; tolerance "
                          f"{100 * cfg.slo.repeat_tolerance:.0f}%)"
                          f"{noise.steal_note(load.repeats)}[/yellow]")
    if at_max is not None:
        # the best point's, not the unloaded point's (a warning above names it)
        requests = at_max.server_requests
        total = max(int(requests.sum()), 1)
        shares = " ".join(f"{100 * r / total:.1f}" for r in requests)
        console.print(f"per-server load at max (% of requests, server 0..{len(requests) - 1}): "
                      f"{shares}")
    if cfg.capture:
        console.print(capture.summary_line(path))
    console.print(f"results: {path}")


def warn_reference_noise(cfg: RunConfig, outcome: SearchOutcome,
                         references: Sequence[PointResult], console: Console) -> None:
    """The SLO reference (unloaded; search i's bound is factor x its median)
    missing its own bound: its tail is factor x its median with no load at
    all, so the bound sits at the machine's latency noise floor and whether a
    load meets it is decided by noise more than by load (Mininet on a shared
    VM: docs/configuration.md "Repeats")."""
    if not references or len(references) != len(outcome.bounds):
        return
    pct = cfg.slo.percentile
    over = [r.tail_ns(pct) for r, b in zip(references, outcome.bounds, strict=True)
            if not r.tail_ns(pct) <= b]
    noisy = [t for t in over if math.isfinite(t)]
    if len(noisy) < len(over) and cfg.target.faults.loss > 0:
        # not noise: the reference runs without client retries (their timeout
        # is derived from the bound it gives), so injected loss leaves some of
        # its requests unanswered; the bound, from its median, stands
        console.print(f"[yellow]note: the SLO reference ({cfg.slo.reference}, unloaded) lost "
                      f"over {100 - pct:g}% of its requests in {len(over) - len(noisy)} of "
                      f"{len(references)} measurement(s) ({latency_key(pct)} unbounded): it runs "
                      "without client retries, whose timeout comes from the bound it gives, "
                      f"and target.faults drops {100 * cfg.target.faults.loss:g}% of packets; "
                      "the bound is its median's and stands[/yellow]")
        over = noisy
    if over:
        # an unbounded tail is a loss (it said "p99 up to inf us")
        worst = (f"up to {max(over) / 1e3:.0f} us" if math.isfinite(max(over)) else
                 f"unbounded: over {100 - pct:g}% of its requests lost")
        console.print(f"[yellow]warning: the SLO reference ({cfg.slo.reference}, unloaded) "
                      f"misses its own bound in {len(over)} of {len(references)} "
                      f"measurement(s) ({latency_key(pct)} {worst}): "
                      "the bound is at this machine's latency noise floor, so whether a load "
                      "meets it is decided by noise more than by load[/yellow]")


def log_console() -> Console:
    """The terminal's width on a terminal; in a log, wide enough that no
    table is cut or wrapped (rich would assume 80 columns)."""
    return Console(width=None if sys.stdout.isatty() else LOG_WIDTH)


def run_job(cfg_node: Any) -> float:
    """Hydra task function: one run into Hydra's output directory."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(cfg_node, resolve=True)
    assert isinstance(data, dict)
    cfg = validate(data)  # type: ignore[arg-type]
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    console = log_console()
    setting = notice(cfg.protocol.name, cfg.model_dump(mode="json"))
    if setting:
        console.print(f"[dim]{cfg.name}: {setting}[/dim]")
    try:
        with interruptible():  # in a sweep's worker, only the job hears Ctrl-C
            points = execute(cfg, out_dir, sys.argv, console)
    except (ConfigError, RunDirConflict, NativeBuildMissing) as exc:
        print(f"netkv: {exc}", file=sys.stderr)  # one line, never wrapped
        raise SystemExit(2) from None
    except MeasurementError as exc:
        print(f"netkv: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        # the targets' context managers have torn the rack down on the way out
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            # a sweep resumes as a whole, from its own folder: its command
            # says so once (cli.cmd_run), not each job for its subfolder
            raise SystemExit(EXIT_INTERRUPTED) from None
        kept = len(RunDir(out_dir).cached_keys()) if out_dir.is_dir() else 0
        print(f"netkv: interrupted: {kept} finished point(s) kept in {out_dir} (run again "
              f"with out={out_dir} to resume)", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
    best = points.filter(pl.col("best")) if not points.is_empty() else points
    return float(best["achieved_rps"][0]) if not best.is_empty() else 0.0
