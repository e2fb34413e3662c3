"""Where an experiment's runs execute: joblib workers on this machine (the
default), or submitit jobs — local processes (``submitit_local``) or a Slurm
cluster (``submitit_slurm``). Every run writes its own run directory and
resumes from it, so a launcher changes where the work happens, never the
dataset: finished points are not recomputed whichever launcher ran them."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netkv.config.compose import ConfigError
from netkv.interrupts import call_interruptible, joblib_workers

LAUNCHERS = ("joblib", "submitit_local", "submitit_slurm")


class LaunchError(RuntimeError):
    """A submitted run failed; the message names its log."""


@dataclass(frozen=True)
class Pool:
    """``jobs`` runs at once (on Slurm: submitted at once) through ``launcher``;
    ``params`` go to submitit's executor (e.g. ``slurm_partition``,
    ``timeout_min``, ``cpus_per_task``)."""

    jobs: int = 2
    launcher: str = "joblib"
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.launcher not in LAUNCHERS:
            raise ConfigError(f"--launcher {self.launcher!r}: allowed {', '.join(LAUNCHERS)}")
        if self.launcher != "joblib":
            try:
                import submitit  # noqa: F401
            except ImportError:
                raise ConfigError(f"--launcher {self.launcher}: submitit is not installed "
                                  "(pip install -e '.[cluster]')") from None
        elif self.params:
            raise ConfigError("--launcher-param: only for the submitit launchers")

    def describe(self) -> str:
        where = "" if self.launcher == "joblib" else f" via {self.launcher}"
        return f"{self.jobs} at a time{where}"

    def map(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]],
            folder: Path) -> list[Any]:
        """``[fn(*c) for c in calls]``, in order; submitit keeps its job logs
        under ``folder/.submitit``."""
        if self.launcher == "joblib":
            if self.jobs > 1 and len(calls) > 1:
                from joblib import Parallel, delayed

                # Ctrl-C: the calls hear it, starting workers don't; what
                # joblib's killed workers left of their racks goes after
                with joblib_workers():
                    return list(Parallel(n_jobs=self.jobs, backend="loky")(
                        delayed(call_interruptible)(fn, *c) for c in calls))
            return [fn(*c) for c in calls]
        return self._submitit(fn, calls, folder)

    def _submitit(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]],
                  folder: Path) -> list[Any]:
        import submitit

        cluster = "local" if self.launcher == "submitit_local" else "slurm"
        executor = submitit.AutoExecutor(folder=folder / ".submitit" / "%j", cluster=cluster)
        params = {"timeout_min": 60, **self.params}
        try:
            executor.update_parameters(**params)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"--launcher-param: {str(exc).splitlines()[0]}") from None
        results: list[Any] = [None] * len(calls)
        pending = list(range(len(calls)))
        running: dict[int, Any] = {}
        try:
            while pending or running:
                # at most `jobs` at once: submitit's local executor would start all
                while pending and len(running) < self.jobs:
                    i = pending.pop(0)
                    running[i] = executor.submit(fn, *calls[i])
                finished = [i for i, job in running.items() if job.done()]
                for i in finished:
                    job = running.pop(i)
                    try:
                        results[i] = job.result()
                    except Exception as exc:  # submitit wraps the job's own error
                        last = [ln for ln in str(exc).splitlines() if ln.strip()]
                        raise LaunchError(f"{self.launcher} job {job.job_id} failed: "
                                          f"{last[-1] if last else exc} (log: "
                                          f"{job.paths.stderr})") from None
                if not finished:
                    time.sleep(0.2)
        finally:
            for job in running.values():  # an error or Ctrl-C: nothing keeps running
                job.cancel(check=False)
        return results
