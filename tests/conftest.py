"""Shared pytest hooks.

Tests marked ``bmv2`` need the P4 toolchain (p4c-bm2-ss, simple_switch_grpc,
simple_switch_CLI, p4runtime-shell), which no package registry carries: where
any piece is missing they skip with one line naming it (``pytest -m bmv2
--collect-only`` lists them all).
"""

from __future__ import annotations

import pytest

from netkv.drivers import bmv2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = bmv2.missing_bmv2()
    if not missing:
        return
    skip = pytest.mark.skip(reason=f"needs the P4 toolchain: {', '.join(missing)} not found")
    for item in items:
        if item.get_closest_marker("bmv2") is not None:
            item.add_marker(skip)
