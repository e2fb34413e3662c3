"""One controller per switch when the simulator runs racks (topology.kind=racks).

Every switch's pipeline sees itself as one rack's switch (sim.h "Racks"):
the spine's "servers" are the racks, a leaf's its own servers. A
``SwitchView`` gives a protocol's simulator controller factory the same
view of the engine: the engine's API acting on that switch, a config whose
``topology.servers`` is the switch's servers, and a workload whose homes
are those servers (the spine: the home's rack; a leaf: the home's index in
its rack, which is where the spine's copies of a key land). A factory
written for one rack then runs unchanged on every switch; it may read
``role`` ("spine", "leaf" or "rack"), ``rack``, ``racks`` and ``per_rack``
to plan differently per level. ``SwitchEpochs`` runs all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from netkv.sim.engine import SimEngine, Workload


class WorkloadView:
    """The workload with each key's home as one switch sees it."""

    def __init__(self, workload: Workload, home: Callable[[np.ndarray], np.ndarray]) -> None:
        self._workload = workload
        self._home = home

    @property
    def base(self) -> Workload:
        """The workload itself, homes over every server."""
        return self._workload

    def home_of(self, home: int) -> int:
        """A global home as this switch sees it."""
        return int(self._home(np.int64(home)))

    def rank_info(self) -> np.ndarray:
        info = self._workload.rank_info().copy()
        info["home"] = self._home(info["home"].astype(np.int64))
        return info

    def __getattr__(self, name: str) -> Any:
        return getattr(self._workload, name)


class SwitchView:
    """The engine as switch ``sw``'s controller sees it."""

    def __init__(self, engine: SimEngine, sw: int) -> None:
        top = engine.cfg.topology
        self._engine = engine
        self.switch = sw
        self.racks = top.racks
        self.per_rack = top.servers // top.racks
        self.role = "spine" if sw == 0 else "leaf"
        self.rack = sw - 1 if sw else None
        p = self.per_rack
        self.servers = [list(range(r * p, (r + 1) * p)) for r in range(self.racks)] if sw == 0 \
            else [[(sw - 1) * p + i] for i in range(p)]
        self.cfg = engine.cfg.model_copy(update={"topology": top.model_copy(
            update={"servers": len(self.servers), "kind": "rack", "racks": 1})})
        cap = np.asarray(engine.capacity, dtype=np.float64)
        self.capacity = np.array([cap[s].mean() for s in self.servers])
        self.workload = WorkloadView(engine.workload,
                                     (lambda h: h // p) if sw == 0 else (lambda h: h % p))

    def _select(self) -> SimEngine:
        self._engine.select_switch(self.switch)
        return self._engine

    @property
    def cpu_port(self) -> int:
        return self._select().cpu_port

    @property
    def recirc_port(self) -> int:
        return self._select().recirc_port

    def server_ctl(self, server: int, line: str) -> str:
        """On each server behind the switch's node ``server`` (the spine: the
        whole rack): the first reply that is not ok, else the last."""
        reply = ""
        for s in self.servers[server]:
            reply = self._engine.server_ctl(s, line)
            if not reply.startswith("ok"):
                return reply
        return reply

    def server_up(self, server: int) -> bool:
        return all(self._engine.server_up(s) for s in self.servers[server])

    def store_merge(self, src: int, dst: int) -> int:
        return sum(self._engine.store_merge(a, b)
                   for a, b in zip(self.servers[src], self.servers[dst]))

    def store_newest(self, server: int) -> int:
        return max(self._engine.store_newest(s) for s in self.servers[server])

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._engine, name)
        if not callable(attr):
            return attr
        engine, sw = self._engine, self.switch

        def on_this_switch(*args: Any, **kwargs: Any) -> Any:
            engine.select_switch(sw)
            return attr(*args, **kwargs)
        # kept: a controller installing thousands of keys calls these often
        setattr(self, name, on_this_switch)
        return on_this_switch


class SwitchEpochs:
    """Every switch's controller at each epoch, the spine's first."""

    def __init__(self, engine: SimEngine, factory: Callable[[Any], Any]) -> None:
        self.views = [SwitchView(engine, sw) for sw in range(engine.switches)]
        self.controllers = [factory(v) for v in self.views]

    def epoch(self, engine: SimEngine, t_s: float) -> None:
        del engine
        for view, ctl in zip(self.views, self.controllers):
            ctl.epoch(view, t_s)

    def metrics(self) -> dict[str, Any]:
        """The spine's metrics as they are, and the leaves' numeric ones
        averaged (``leaf_<name>``)."""
        per = [dict(get()) if callable(get := getattr(c, "metrics", None)) else {}
               for c in self.controllers]
        out = dict(per[0])
        for name in per[1] if len(per) > 1 else {}:
            vals = [m[name] for m in per[1:] if isinstance(m.get(name), (int, float))]
            if vals:
                out[f"leaf_{name}"] = float(np.mean(vals))
        return out
