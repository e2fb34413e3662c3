"""The pieces every config model is built from, protocols' included.

Kept apart from ``schema`` so that a protocol's own module can define its
config model without importing the whole schema (which is built from the
protocol registry: ``schema`` -> registry -> protocol modules -> here).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Frac = Annotated[float, Field(ge=0.0, le=1.0)]
NonNeg = Annotated[float, Field(ge=0.0)]
Pos = Annotated[float, Field(gt=0.0)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProtocolBase(Strict):
    """What every protocol's config has; each protocol's model (in its own
    module under ``netkv/protocols/``) adds ``name: Literal[...]`` and its knobs."""

    name: str
    description: str = ""
    max_servers: int = Field(ge=1)


Ring = Literal["consistent", "equal_ranges"]
"""Key placement: ``consistent`` = ``virtual_nodes`` points per server at
pseudo-random ring positions; ``equal_ranges`` = the Pegasus artifact's
16*n equal ranges of the 2^31 keyhash space, range j -> server j mod n."""
