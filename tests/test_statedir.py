"""A run's state folder is never seen without its record (netkv.statedir).

CI stop 36: Ctrl-C on a pooled Mininet sweep left a worker's state folder
behind. joblib killed the worker part-way through removing its folder, after
``state.json`` and before the rest; the command's ``clean_children`` then
found a folder with no record, which it could not tell was its worker's.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from pathlib import Path

import pytest

from netkv import procstat, statedir
from netkv.mininet import cleanup


def test_a_folder_appears_with_its_record(tmp_path: Path) -> None:
    folder = statedir.create(tmp_path, "nk", {"owner": "1 2\n", "b": "x"})
    assert folder.parent == tmp_path and folder.name.startswith("nk") and len(folder.name) == 5
    assert sorted(p.name for p in folder.iterdir()) == ["b", "owner"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]   # no debris
    assert folder.stat().st_mode & 0o777 == 0o700


def test_a_taken_tag_is_never_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = statedir.create(tmp_path, "nk", {"r": "first"}, tag_chars=1)
    # every random tag the taken one: rename onto a folder with its record refuses
    monkeypatch.setattr(statedir.random, "choice", lambda _: taken.name[-1])
    with pytest.raises(RuntimeError, match="no free run tag"):
        statedir.create(tmp_path, "nk", {"r": "second"}, tag_chars=1, tries=5)
    assert (taken / "r").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == [taken.name]   # the half-made one went


def test_a_removal_killed_part_way_leaves_debris_not_a_recordless_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = statedir.create(tmp_path, "nk", {"state.json": "{}", "log": "x"})
    (folder / "sub").mkdir()

    def killed(path: Path, ignore_errors: bool = False) -> None:
        (Path(path) / "state.json").unlink()   # the record first, as the old removal did
        raise KeyboardInterrupt

    monkeypatch.setattr(statedir.shutil, "rmtree", killed)
    with pytest.raises(KeyboardInterrupt):
        statedir.remove(folder)
    monkeypatch.undo()
    assert not folder.exists()
    [debris] = list(tmp_path.iterdir())
    # named by its maker and the run's tag (what may still name its old path)
    assert debris.name.startswith(statedir.GONE) and debris.name.endswith(f"-{folder.name}")
    assert statedir.makers(tmp_path) == [procstat.owner_record()]
    # its maker (this process) runs: kept; once gone, removed
    assert statedir.remove_debris(tmp_path) == []
    tags: list[str] = []
    assert statedir.remove_debris(tmp_path, running=lambda _: False,
                                  before=tags.append) == [f"state {debris}"]
    assert tags == [folder.name]
    assert list(tmp_path.iterdir()) == []
    assert statedir.remove(folder) is False


def test_remove_debris_leaves_what_is_not_debris(tmp_path: Path) -> None:
    for name in (".gone-12", ".gone-a-1-x", ".new-1-x", "nkabc", ".gone-1-2-x-y"):
        (tmp_path / name).mkdir()
    (tmp_path / ".gone-1-2-file").write_text("not a folder")
    assert statedir.remove_debris(tmp_path, running=lambda _: False) == []
    assert len(list(tmp_path.iterdir())) == 6


def _worker_killed_mid_removal(root: str, exiting_s: float = 0.0) -> None:
    """A sweep's worker: a Mininet run's folder, then killed while removing
    it (still exiting for ``exiting_s``)."""
    cleanup.STATE_ROOT = Path(root)
    state = cleanup.RunState.create()

    def killed(path: Path, ignore_errors: bool = False) -> None:
        (Path(path) / "state.json").unlink()
        time.sleep(exiting_s)
        os._exit(1)

    shutil.rmtree = killed   # type: ignore[assignment]  # this process only
    statedir.remove(state.folder)


def test_clean_children_removes_a_killed_workers_half_removed_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's ``clean_children`` takes what a worker killed part-way
    through removing its run's folder left (the old removal left a folder
    with no ``state.json``: ``clean_children`` kept it)."""
    monkeypatch.setattr(cleanup, "STATE_ROOT", tmp_path)
    proc = multiprocessing.get_context("fork").Process(target=_worker_killed_mid_removal,
                                                       args=(str(tmp_path),))
    proc.start()
    proc.join(30)
    assert proc.exitcode == 1
    [debris] = list(tmp_path.iterdir())
    assert debris.name.startswith(statedir.GONE) and not (debris / "state.json").exists()
    removed, left = cleanup.clean_children(wait_s=1.0)
    assert removed == [f"state {debris}"] and left == []
    assert list(tmp_path.iterdir()) == []


def test_clean_children_waits_for_a_worker_still_exiting_after_its_rename(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The debris's maker still runs when ``clean_children`` looks (joblib's
    kill not yet delivered): waited for, like a run's owner, then its debris
    removed (not waiting, the debris was kept as a live process's)."""
    monkeypatch.setattr(cleanup, "STATE_ROOT", tmp_path)
    proc = multiprocessing.get_context("fork").Process(target=_worker_killed_mid_removal,
                                                       args=(str(tmp_path), 1.0))
    proc.start()
    deadline = time.monotonic() + 30
    while not any(p.name.startswith(statedir.GONE) for p in tmp_path.iterdir()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    removed, left = cleanup.clean_children(wait_s=10.0)
    proc.join(30)
    assert len(removed) == 1 and removed[0].startswith(f"state {tmp_path}/{statedir.GONE}")
    assert list(tmp_path.iterdir()) == []


def test_a_mininet_run_state_is_whole_from_the_start(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cleanup, "STATE_ROOT", tmp_path)
    state = cleanup.RunState.create()
    saved = json.loads((state.folder / "state.json").read_text())
    assert saved["tag"] == state.tag and saved["owner"] == os.getpid()
    assert saved["parent"] == procstat.owner_record(os.getppid())
    assert cleanup.clean_run(state.tag) == [f"state {state.folder}"]
    assert list(tmp_path.iterdir()) == []
