"""A run's local state folder, made and removed whole.

A sweep's command finds what its killed joblib workers left by reading each
``<root>/<tag>/`` folder's record (netkv.mininet.cleanup's and
netkv.testbed.clean's ``clean_children``). A worker killed between ``mkdir``
and writing the record, or part-way through removing the folder (its record
gone, a log or socket still there), left a folder with no record, which no
one could tell was theirs: the command exited with it behind (CI, stop 36).

So a folder appears under its tag with its record already in it (written in
``<root>/.new-<owner>-<random>`` and renamed), and goes first by a rename
to ``<root>/.gone-<owner>-<tag>``, then is removed. What a killed
process leaves is debris named by its pid and start time, which
``remove_debris`` takes once that process is gone.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import string
from collections.abc import Callable, Mapping
from pathlib import Path

from netkv import procstat

NEW, GONE = ".new-", ".gone-"
_ALPHABET = string.ascii_lowercase + string.digits


def _debris_name(kind: str, tag: str | None = None) -> str:
    pid, start = procstat.owner_record().split()
    return f"{kind}{pid}-{start}-{tag or ''.join(random.choice(_ALPHABET) for _ in range(6))}"


def create(root: Path, prefix: str, files: Mapping[str, str], tag_chars: int = 3,
           tries: int = 1000) -> Path:
    """``root/<prefix><random>`` (0700) holding ``files`` (name -> text),
    made in one step: no one sees the folder without them."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    root.chmod(0o700)
    tmp = root / _debris_name(NEW)
    tmp.mkdir(mode=0o700)
    try:
        for name, text in files.items():
            (tmp / name).write_text(text)
        for _ in range(tries):
            tag = prefix + "".join(random.choice(_ALPHABET) for _ in range(tag_chars))
            try:
                # a taken tag holds its record (never empty): rename refuses it
                os.rename(tmp, root / tag)
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    continue
                raise
            return root / tag
        raise RuntimeError(f"no free run tag under {root}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def remove(folder: Path) -> bool:
    """Remove ``folder`` whole: renamed away first (to a name keeping its
    tag: processes may name the old path), so that it never stands under
    its tag without its record. False if it was not there."""
    away = folder.parent / _debris_name(GONE, folder.name)
    try:
        os.rename(folder, away)
    except FileNotFoundError:
        return False
    shutil.rmtree(away, ignore_errors=True)
    return True


def _debris(name: str) -> tuple[str, str] | None:
    """The owner record a debris folder's name holds and its last word (a
    removed run's tag, or a random one); None if it is not debris."""
    for kind in (NEW, GONE):
        if name.startswith(kind):
            words = name[len(kind):].split("-")
            if len(words) == 3 and words[0].isdigit() and words[1].isdigit():
                return f"{words[0]} {words[1]}", words[2]
    return None


def _entries(root: Path) -> list[Path]:
    try:
        return sorted(root.iterdir())
    except OSError:
        return []


def makers(root: Path) -> list[str]:
    """The owner records of the processes that left debris under ``root``
    (``procstat.wait_exited`` waits for them: one still exiting is not
    gone yet)."""
    return [d[0] for d in map(_debris, (e.name for e in _entries(root))) if d is not None]


def remove_debris(root: Path, running: Callable[[str], bool] = procstat.owner_running,
                  before: Callable[[str], object] | None = None) -> list[str]:
    """Remove the half-made and half-removed folders under ``root`` of
    processes that are gone (``before(tag)`` first for a removed run's: e.g.
    stop what names its old path); one line per folder removed."""
    removed: list[str] = []
    for entry in _entries(root):
        debris = _debris(entry.name)
        if debris is None or not entry.is_dir() or running(debris[0]):
            continue
        if before is not None and entry.name.startswith(GONE):
            before(debris[1])
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(f"state {entry}")
    return removed
