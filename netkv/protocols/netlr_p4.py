"""NetLR on BMv2 (p4src/netlr/netlr.p4): pipeline/netlr.c's params as the
program's compile-time constants, and what netlr.c's init leaves non-zero."""

from __future__ import annotations

from netkv.protocols.plugin import P4Program, Params, param_int, servers_register

MAX_REPLICAS = 8     # LiveMask / AckMask are 8 bits
MAX_SLOTS = 1 << 20  # NETLR_MAX_SLOTS


def _flag(params: Params, key: str) -> int:
    """netlr.c reads these as on when non-zero."""
    return int(param_int(params, key, 0) != 0)


def p4_defines(params: Params) -> dict[str, int]:
    """netlr.c's params (mode, replication, slots, ack_superseded, stamp,
    collision_nack, dedup) as ``-D`` constants; what netlr.c refuses, refused."""
    slots = param_int(params, "slots", 131072)
    mode = params.get("mode") or "strict"
    repl = params.get("replication") or "netlr"
    if not 1 <= slots <= MAX_SLOTS or slots & (slots - 1):
        raise ValueError(f"netlr slots must be a power of two in 1..{MAX_SLOTS} (got {slots})")
    if mode not in ("strict", "paper") or repl not in ("netlr", "cr", "hermes", "harmonia"):
        raise ValueError(f"netlr mode strict|paper, replication netlr|cr|hermes|harmonia "
                         f"(got {mode}, {repl})")
    # CR and Hermes: the switch forwards only (netlr.c's chain); Harmonia:
    # netlr_harmonia.c's dirty set and read routing
    return {"NL_SLOTS": slots, "NL_STRICT": int(mode == "strict"),
            "NL_ACK_SUPERSEDED": _flag(params, "ack_superseded"), "NL_STAMP": _flag(params, "stamp"),
            "NL_COLLISION_NACK": _flag(params, "collision_nack"),
            "NL_CHAIN": int(repl in ("cr", "hermes")), "NL_HARMONIA": int(repl == "harmonia"),
            "NL_DEDUP": int(param_int(params, "dedup", 1) != 0)}


def p4_initial_registers(n_servers: int, params: Params) -> list[tuple[str, int, int]]:
    """netlr.c's init: seq 1 (the preload's version is 1), every replica
    live unless boot_empty (then the controller installs them)."""
    p4_defines(params)
    if not 1 <= n_servers <= MAX_REPLICAS:
        raise ValueError(f"netlr: {n_servers} replicas (allowed: 1..{MAX_REPLICAS})")
    cells = [*servers_register(n_servers, params), ("seq", 0, 1)]
    if not param_int(params, "boot_empty", 0):
        cells += [("num_replica", 0, n_servers), ("LiveMask", 0, (1 << n_servers) - 1)]
    return cells


PROGRAM = P4Program("netlr/netlr.p4", defines=p4_defines, initial_registers=p4_initial_registers)
