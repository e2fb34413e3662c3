"""A pipeline that declares never_to_cpu must not clone to the controller:
the simulator skips the as-received copy a clone needs (engine.c)."""

from __future__ import annotations

import re
from pathlib import Path

PIPELINES = Path(__file__).resolve().parents[1] / "hostapps" / "src" / "pipeline"


def wrong_flag(source: str) -> bool:
    """True if the source declares never_to_cpu and still sets to_cpu."""
    declares = re.search(r"\.never_to_cpu\s*=\s*1", source) is not None
    clones = re.search(r"->to_cpu\s*=\s*1", source) is not None
    return declares and clones


def test_no_pipeline_declares_never_to_cpu_and_clones() -> None:
    files = sorted(PIPELINES.glob("*.c"))
    assert files
    declared = [f.name for f in files if ".never_to_cpu = 1" in f.read_text()]
    assert "kvswitch.c" in declared
    assert [f.name for f in files if wrong_flag(f.read_text())] == []


def test_check_refuses_a_cloning_pipeline_with_the_flag() -> None:
    netcache = (PIPELINES / "netcache.c").read_text()
    assert not wrong_flag(netcache)
    doctored = netcache.replace(".state_size", ".never_to_cpu = 1,\n\t.state_size", 1)
    assert wrong_flag(doctored)
