"""The pieces every config model is built from, protocols' included.

Kept apart from ``schema`` so that a protocol's own module can define its
config model without importing the whole schema (which is built from the
protocol registry: ``schema`` -> registry -> protocol modules -> here).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

# Every bound the C side needs is stated in the config models, so that they
# are the one statement of what a run may be: a value the programs cannot
# hold (a uint32, a frame buffer, a table in memory) is a config error, never
# a crash later. Floats are finite everywhere (``allow_inf_nan=False``);
# times and rates have generous upper bounds so that no value overflows a C
# integer (nanoseconds and picoseconds are uint64 there).
Frac = Annotated[float, Field(ge=0.0, le=1.0)]
NonNeg = Annotated[float, Field(ge=0.0, le=1e12)]
Pos = Annotated[float, Field(gt=0.0, le=1e12)]
Alpha = Annotated[float, Field(ge=0.0, le=100.0)]  # beyond ~10 all requests hit one key
Nanos = Annotated[float, Field(ge=0.0, le=1e10)]  # up to 10 s
PosNanos = Annotated[float, Field(gt=0.0, le=1e10)]
Millis = Annotated[float, Field(ge=0.0, le=1e5)]  # up to 100 s
PosMillis = Annotated[float, Field(gt=0.0, le=1e5)]
Micros = Annotated[float, Field(ge=0.0, le=1e8)]  # up to 100 s
Gbps = Annotated[float, Field(ge=0.0, le=1e4)]

MAX_KEYS = 1 << 27  # the simulator and kvserver hold per-key tables in memory (~40 B a key)
MAX_SERVERS = 256
MAX_RACKS = 64  # topology.racks (sim.h NK_SIM_MAX_RACKS)
MAX_TOTAL_SERVERS = MAX_RACKS * 32  # servers over every rack (the engine's node ids are 16-bit)
MAX_CLIENTS = 1024
MAX_DURATION_S = 3600.0
MAX_VALUE_BYTES = 1 << 20
MAX_VNODES = 1024


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ProtocolBase(Strict):
    """What every protocol's config has; each protocol's model (in its own
    module under ``netkv/protocols/``) adds ``name: Literal[...]`` and its knobs."""

    name: str
    description: str = ""
    max_servers: int = Field(ge=1, le=MAX_SERVERS)
    #: its hosts turn an application multiget into packets (host.h client_multiget)
    supports_multiget: ClassVar[bool] = False

    def coordinators(self) -> tuple[int, int]:
        """Coordinator hosts in the rack (host.h coord_handle) and the cores
        of each: none by default."""
        return 0, 1

    def payload_bytes(self, key_size: int, value_size: int) -> int:
        """UDP payload of a request carrying a value: the Pegasus/plain layout
        (30 B header, 16 B payload preamble, key, value; docs/wire.md)."""
        return 46 + key_size + value_size


Ring = Literal["consistent", "equal_ranges", "hash_mod"]
"""Key placement: ``consistent`` = ``virtual_nodes`` points per server at
pseudo-random ring positions; ``equal_ranges`` = the Pegasus artifact's
16*n equal ranges of the 2^31 keyhash space, range j -> server j mod n;
``hash_mod`` = mix64(keyhash) mod n (hash mod N), which also spreads keys
shorter than 8 B, whose djb2 hashes differ only in their low bits."""
