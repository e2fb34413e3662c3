"""Static consistent hashing (the baseline): no switch state, no controller.

The switch only forwards a request to its key's home server
(hostapps/src/pipeline/hash.c, p4src/hash/hash.p4); the hosts speak the
plain wire format (hostapps/src/host/hash.c).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from netkv.config.base import MAX_VNODES, ProtocolBase, Ring
from netkv.protocols.plugin import P4Program, ProtocolPlugin
from netkv.wire.codec import PEGASUS_PORT, Proto

# What the switch refused at the trust boundary (docs/security.md):
# reason -> (register, index).
REFUSALS = {"host_server_op": ("host_server_op", 0)}


class HashProtocol(ProtocolBase):
    name: Literal["hash"]
    max_servers: int = Field(256, ge=1)
    virtual_nodes: int = Field(16, ge=1, le=MAX_VNODES)
    ring: Ring = "consistent"


PLUGIN = ProtocolPlugin(
    name="hash",
    summary="static consistent hashing (baseline)",
    targets=("sim", "mininet", "testbed"),
    config=HashProtocol,
    wire=Proto.PLAIN,
    udp_port=PEGASUS_PORT,  # the plain format shares Pegasus' port (the artifact's)
    p4=P4Program("hash/hash.p4"),
    refusals=REFUSALS,
)
