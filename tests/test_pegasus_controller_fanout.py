"""The controller's write fan-out rounds like the C pipeline's fanout=auto."""

from __future__ import annotations

import pytest

from netkv.protocols.pegasus import fanout_of


@pytest.mark.parametrize(("rd", "wr", "div", "want"), [
    (5, 1, 1.0, 3),      # 2.5 rounds up (C: (2rd + den) / (2den)), not to even
    (9, 0, 4.0, 2),      # 2.25
    (14, 3, 1.0, 4),     # 3.5
    (0, 10, 1.0, 0),     # clamped to 1 by the caller
    (30, 1, 0.25, 60),
])
def test_fanout_rounds_half_up_like_the_pipeline(rd: int, wr: int, div: float, want: int) -> None:
    assert fanout_of(rd, wr, div) == want
    if div >= 1 and div == int(div):
        den = (wr + 1) * int(div)
        assert fanout_of(rd, wr, div) == (2 * rd + den) // (2 * den)  # pegasus.c write_fanout
