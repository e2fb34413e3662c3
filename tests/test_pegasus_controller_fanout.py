"""The controller's write fan-out is the C pipeline's fanout=auto formula
(spec/constants.toml: one integer formula, fanout_div in sixteenths), for
integer and fractional divisors alike."""

from __future__ import annotations

import numpy as np
import pytest

from netkv.config.compose import ConfigError, load
from netkv.pipeline import FWD_MCAST, Pipeline
from netkv.protocols.pegasus import fanout_of
from netkv.wire.codec import Msg, PegasusOp, Proto, encode


@pytest.mark.parametrize(("rd", "wr", "div", "want"), [
    (5, 1, 1.0, 3),      # 2.5 rounds up, not to even
    (9, 0, 4.0, 2),      # 2.25
    (14, 3, 1.0, 4),     # 3.5
    (0, 10, 1.0, 0),     # clamped to 1 by the caller
    (30, 1, 0.25, 60),
    (7, 1, 1.5, 2),      # 2.33
    (3, 0, 0.0625, 48),
])
def test_fanout_rounds_half_up_like_the_pipeline(rd: int, wr: int, div: float, want: int) -> None:
    assert fanout_of(rd, wr, round(div * 16)) == want


def _c_auto_fanout(rd: int, wr: int, div16: int) -> int:
    """r as pegasus.c picks it with fanout=auto for a write that finds rd
    reads and wr writes (itself included) in the epoch: read back from the
    multicast group it chooses (start * 32 + r - 1), or 1 for a unicast."""
    with Pipeline("pegasus", n_servers=32, n_clients=1,
                  params=f"selection=rr;fanout=auto;fanout_div16={div16}") as p:
        p.table_add("rkeys", [77], [0])
        p.reg_write("rset_size", 0, 1)
        p.reg_write("rd_cnt", 0, rd)
        p.reg_write("wr_cnt", 0, wr - 1)
        w = Msg(proto=Proto.PEGASUS, op=PegasusOp.WRITE, keyhash=77, key=b"k", value=b"v")
        d = p.process(encode(w), src=32, dst=0, port=32)
        assert d is not None
        return d.mcast_group % 32 + 1 if d.fwd == FWD_MCAST else 1


def test_controller_fanout_equals_the_c_pipeline_on_fractional_divisors() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        rd, wr = int(rng.integers(0, 3000)), int(rng.integers(1, 300))
        div16 = int(rng.choice([1, 3, 4, 8, 16, 24, 40, 64]))
        want = min(max(fanout_of(rd, wr, div16), 1), 32)
        assert _c_auto_fanout(rd, wr, div16) == want, (rd, wr, div16)


def test_fanout_div_must_be_sixteenths() -> None:
    assert load(["protocol=pegasus", "protocol.fanout_div=0.25"]).protocol.fanout_div16 == 4
    for bad in ("0.3", "4096"):
        with pytest.raises(ConfigError) as e:
            load(["protocol=pegasus", f"protocol.fanout_div={bad}"])
        assert f"protocol.fanout_div = {bad} (allowed: a multiple of 1/16 in 1/16..4095.9375:" \
            in str(e.value) and "\n" not in str(e.value)


def test_smooth_wrr_picks_as_numpy_argmax_did() -> None:
    """smooth_wrr runs in plain floats (it runs every epoch on Mininet's
    shared cores); it must pick exactly what the numpy version picked."""
    import numpy as np

    from netkv.protocols.pegasus import smooth_wrr

    def reference(weights: np.ndarray, slots: int) -> list[int]:
        w = np.asarray(weights, dtype=np.float64)
        if not np.isfinite(w.sum()) or w.sum() <= 0:
            w = np.ones_like(w)
        w = w / w.sum()
        current, out = np.zeros_like(w), []
        for _ in range(slots):
            current += w
            pick = int(np.argmax(current))
            current[pick] -= 1.0
            out.append(pick)
        return out

    rng = np.random.default_rng(1)
    for n in (1, 2, 4, 16, 32):
        for _ in range(50):
            w = rng.random(n) * (rng.random(n) > 0.2)
            assert smooth_wrr(w, 256) == reference(w, 256)
    assert smooth_wrr(np.array([3.0, 1.0]), 8) == [0, 0, 1, 0, 0, 0, 1, 0]
