"""Every protocol's packet path has a libFuzzer harness (docs/robustness.md).

The harnesses run under `just fuzz` / `just test-fuzz` (clang); here only
that each registered protocol has one, seeded with its golden vectors, and
that every kept regression input belongs to a harness.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from netkv.protocols import names

ROOT = Path(__file__).resolve().parents[1]


def fuzz_tool():
    spec = importlib.util.spec_from_file_location("netkv_fuzz_tool", ROOT / "tools" / "fuzz.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_protocol_has_a_harness_and_seeds() -> None:
    tool = fuzz_tool()
    for name in names():
        assert (ROOT / "hostapps" / "fuzz" / f"fuzz_{name}.c").is_file(), name
        assert name in tool.VECTORS, name
        assert (ROOT / "tests" / "vectors" / f"{tool.VECTORS[name]}.json").is_file(), name


def test_regression_inputs_belong_to_a_harness() -> None:
    for folder in (ROOT / "tests" / "fuzz").iterdir():
        assert (ROOT / "hostapps" / "fuzz" / f"fuzz_{folder.name}.c").is_file(), folder


def test_seeds_use_the_harness_framing(tmp_path: Path) -> None:
    tool = fuzz_tool()
    n = tool.seed_inputs("pegasus", tmp_path)
    assert n > 0
    one = (tmp_path / "vec0-f0").read_bytes()
    length = int.from_bytes(one[2:4], "big")
    assert len(one) == 4 + length  # flags, sender, u16 length, the packet
