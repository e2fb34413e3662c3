"""Who owns a run's folder: every liveness check (session namespace racks,
testbed run folders, Mininet run state, figure workload folders) names its
owner by pid *and* start time, so a dead owner whose pid was reused by
another process is seen as dead. Each check is shown failing on a record
whose pid lives but whose start time is another's (it passed on pid alone)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from netkv import procstat
from netkv.mininet import cleanup
from netkv.sim import workload_cache
from netkv.testbed import clean as testbed_clean
from netkv.testbed import netns


@pytest.fixture
def child() -> Iterator[int]:
    """A live process other than this one: a 'reused pid' when its start
    time is misstated."""
    p = subprocess.Popen(["sleep", "60"])
    try:
        yield p.pid
    finally:
        p.kill()
        p.wait()


def test_owner_record_names_one_process(child: int) -> None:
    start = procstat.started(child)
    assert start is not None
    assert procstat.owner_record(child) == f"{child} {start}"
    assert procstat.owner_running(procstat.owner_record(child))
    assert procstat.owner_running(procstat.owner_record())          # this process
    assert not procstat.owner_running(f"{child} {start + 1}")       # reused pid
    assert procstat.owner_running(f"{child}")                       # older record: pid alone
    for bad in ("", "x", "1 2 3", "0 5", "-4"):
        with pytest.raises(ValueError):
            procstat.owner_running(bad)


def test_owner_running_counts_a_zombie_as_gone() -> None:
    p = subprocess.Popen(["true"])
    record = procstat.owner_record(p.pid)
    for _ in range(250):   # until it has exited; not reaped yet: a zombie
        if not procstat.alive(p.pid):
            break
        time.sleep(0.02)
    assert not procstat.owner_running(record)
    p.wait()
    assert not procstat.owner_running(record)


def test_netns_session_rack_owner(tmp_path: Path, child: int) -> None:
    start = procstat.started(child)
    (tmp_path / "owner").write_text(f"{child} {start}\n")
    assert netns.owner_alive(tmp_path)
    (tmp_path / "owner").write_text(f"{child} {start + 7}\n")
    assert not netns.owner_alive(tmp_path)


def test_testbed_run_owner(tmp_path: Path, child: int) -> None:
    start = procstat.started(child)
    (tmp_path / "nkabc").mkdir()
    (tmp_path / "nkabc" / "owner").write_text(f"{child} {start}\n")
    assert testbed_clean.alive(tmp_path, "nkabc")
    (tmp_path / "nkabc" / "owner").write_text(f"{child} {start + 7}\n")
    assert not testbed_clean.alive(tmp_path, "nkabc")
    assert not testbed_clean.alive(tmp_path, "nkmissing")


def test_figure_folder_owner(tmp_path: Path, child: int) -> None:
    start = procstat.started(child)
    (tmp_path / workload_cache.OWNER).write_text(f"{child} {start}\n")
    assert workload_cache.owner_alive(tmp_path)
    (tmp_path / workload_cache.OWNER).write_text(f"{child} {start + 7}\n")
    assert not workload_cache.owner_alive(tmp_path)


def test_mininet_run_state_owner(tmp_path: Path, child: int,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cleaned: list[str] = []
    monkeypatch.setattr(cleanup, "STATE_ROOT", tmp_path)
    monkeypatch.setattr(cleanup, "clean_run", lambda tag, pids: cleaned.append(tag) or [tag])
    start = procstat.started(child)
    for tag, state in ((f"{cleanup.TAG_PREFIX}liv", {"owner": child, "owner_start": start}),
                       (f"{cleanup.TAG_PREFIX}old", {"owner": child}),   # older state file
                       (f"{cleanup.TAG_PREFIX}reu", {"owner": child, "owner_start": start + 7})):
        (tmp_path / tag).mkdir()
        (tmp_path / tag / "state.json").write_text(json.dumps({"tag": tag, **state, "pids": []}))
    assert cleanup.clean() == [f"{cleanup.TAG_PREFIX}reu"]
    # `netkv clean --force`: the live owner's runs too
    assert cleanup.clean(force=True) == [f"{cleanup.TAG_PREFIX}{t}" for t in ("liv", "old", "reu")]
    # what a run writes carries its owner's start time
    state = cleanup.RunState(f"{cleanup.TAG_PREFIX}new", tmp_path / "new")
    state.folder.mkdir()
    state.save()
    saved = json.loads((state.folder / "state.json").read_text())
    assert saved["owner"] == os.getpid() and saved["owner_start"] == procstat.started(os.getpid())
