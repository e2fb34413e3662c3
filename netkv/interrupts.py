"""Ctrl-C and joblib's worker processes.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group: the
command and its loky workers. A worker still starting (the interpreter, its
imports, the job's unpickling) died of it with a KeyboardInterrupt traceback
on the shared stderr, while the command itself had the same signal and was
already stopping the pool (joblib kills its workers on an interruption).

So workers start with SIGINT blocked (a signal mask is inherited through
fork and exec) and unblock it only while a job runs: a job (a Mininet rack)
still hears Ctrl-C and tears down what it built; a worker starting keeps
the signal pending and is killed by joblib, without a word. (An idle worker
may take it in a thread a finished job started, e.g. polars' pool, with the
job's mask; joblib kills it all the same.) A real error in a worker or a job
is reported as before.

While a section runs, the command's main thread sees Ctrl-C only at its
next bytecode: a wait with no timeout there (joblib's shutdown after a first
Ctrl-C) is not broken by a second one; SIGTERM still is.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

_SIGINT = {signal.SIGINT}
T = TypeVar("T")


@contextmanager
def workers_start_deaf() -> Iterator[None]:
    """Processes and threads started inside (joblib's loky workers) start
    with SIGINT blocked; the command still gets Ctrl-C as KeyboardInterrupt
    in its main thread. From any other thread: nothing changes (workers
    started from there start as usual)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # multiprocessing's resource tracker (loky starts it for its first
    # worker) leaves SIGINT unblocked in the thread that started it (CPython
    # < 3.14: SIG_UNBLOCK, not the previous mask): started now, it is not
    # started again below
    from multiprocessing import resource_tracker   # here: not in every worker's imports

    resource_tracker.ensure_running()
    done = threading.Event()
    # started before the block, so it keeps SIGINT unblocked: the kernel
    # hands the process's SIGINT to it, and Python raises KeyboardInterrupt
    # in the main thread (its handlers always run there)
    listener = threading.Thread(target=done.wait, name="netkv-sigint", daemon=True)
    listener.start()
    # the mask read first: pthread_sigmask raises a pending KeyboardInterrupt
    # after changing the mask, which must not skip the restore below
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
        yield
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        finally:
            done.set()
            listener.join()


@contextmanager
def joblib_workers() -> Iterator[None]:
    """Around every joblib pool (a sweep, a figure's runs): its workers
    start deaf to Ctrl-C, and what joblib's killed workers left of their
    racks goes on the way out."""
    with workers_racks_removed(), workers_start_deaf():
        yield


@contextmanager
def workers_racks_removed() -> Iterator[None]:
    """Around a joblib pool whose jobs may build racks (Mininet's, or the
    testbed's over SSH): stopped by Ctrl-C, SIGTERM or a job's error, joblib
    kills its workers at once, some still tearing a rack down (Hydra's
    launcher asks for joblib's loky backend by name: it cannot be made to
    wait); what they left goes on the way out (netkv.mininet.cleanup's and
    netkv.testbed.clean's ``clean_children``), so the command exits with
    nothing of its racks running or left behind. The error that stopped the
    pool is the one raised: a clean-up that fails (a host unreachable over
    SSH during Ctrl-C) is one line on stderr, and the other still runs; a
    host the testbed's skipped (netkv.testbed.clean.clean_inventory's
    ``skipped host ...``) is one line each."""
    try:
        yield
    except BaseException:
        from netkv.mininet import cleanup
        from netkv.testbed.clean import STATE_ROOT
        from netkv.testbed import clean

        left: list[str] = []
        for what, clean_children in (("Mininet", cleanup.clean_children),
                                     ("testbed", lambda: clean.clean_children(STATE_ROOT))):
            try:
                removed, still = clean_children()
            except BaseException as exc:   # a second Ctrl-C too: the first error stands
                why = " ".join(str(exc).split()) or "interrupted"
                print(f"netkv: removing the killed workers' {what} runs failed: "
                      f"{type(exc).__name__}: {why} (`python -m netkv clean`, with `--inventory "
                      "NAME` for a testbed run's, removes them)", file=sys.stderr)
                continue
            left += still
            for skipped in (r for r in removed if r.startswith("skipped ")):   # testbed.clean's
                print(f"netkv: removing the killed workers' {what} runs {' '.join(skipped.split())} "
                      "(`python -m netkv clean --inventory NAME` removes its runs once it "
                      "answers)", file=sys.stderr)
        if left:   # joblib kills its workers before it raises: not expected
            print(f"netkv: run(s) {', '.join(left)} still running after the pool "
                  "stopped: left alone (`python -m netkv clean`, with `--inventory NAME` for a "
                  "testbed run's, removes them once they exit)", file=sys.stderr)
        raise


@contextmanager
def interruptible() -> Iterator[None]:
    """A job: SIGINT unblocked while it runs (and in the processes it
    starts: tcpdump, a rack's nodes), the previous mask back after. A
    Ctrl-C that reached a worker before its job started is raised here, at
    once, before the job builds anything. One that lands inside a callback
    Python cannot raise from (a weakref's, at garbage collection) is not
    printed ("Exception ignored in ... KeyboardInterrupt", 5 lines beside the
    command's one: CI, once): joblib kills the worker all the same."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    hook = sys.unraisablehook

    def quiet(unraisable: Any) -> None:
        if not issubclass(unraisable.exc_type, KeyboardInterrupt):
            hook(unraisable)

    sys.unraisablehook = quiet
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        sys.unraisablehook = hook


def call_interruptible(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` as a job (module-level: what joblib sends to a worker)."""
    with interruptible():
        return fn(*args)
