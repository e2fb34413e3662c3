"""Analytic load: what each server should get, from the placement and the
exact popularity, without simulating.

  expected_server_shares   share of requests per server (zipf/uniform)
  busiest_share            the largest of those shares
  placement_np             home server of every key id, recomputed in numpy
                           (key bytes -> djb2 -> ring), independent of the C
                           code, so tests can cross-check hostapps/src/workload.c

The shares are what a perfect measurement of a read-only run would give:
sum over ranks r of p_r for the ranks whose key lives on the server. They are
used by the hash skew test and by the reproduction tables (e.g. the busiest
server's share at alpha = 1.2 predicts where consistent hashing saturates).
"""

from __future__ import annotations

import numpy as np

from netkv.sim.engine import Workload, zipf_probabilities



def expected_server_shares(workload: Workload) -> np.ndarray:
    """Fraction of requests each server receives (sums to 1)."""
    info = workload.rank_info()
    p = workload.probabilities()
    shares = np.bincount(info["home"].astype(np.int64), weights=p, minlength=workload.servers)
    return shares / shares.sum()


def busiest_share(workload: Workload) -> float:
    return float(expected_server_shares(workload).max())


# ---- the C key format, hash and ring, in numpy --------------------------------


def mix64_np(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (netkv/rng.h nk_mix64), vectorised."""
    with np.errstate(over="ignore"):
        z = np.asarray(x).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


KEY_BLOCK_STEP = np.uint64(0x632BE59BD9B4E019)


def fmix32_np(x: np.ndarray) -> np.ndarray:
    """murmur3's 32-bit finaliser (workload.c fmix32), a bijection of uint32."""
    m = np.uint64(0xFFFFFFFF)
    with np.errstate(over="ignore"):
        x = np.asarray(x).astype(np.uint64) & m
        x ^= x >> np.uint64(16)
        x = (x * np.uint64(0x85EBCA6B)) & m
        x ^= x >> np.uint64(13)
        x = (x * np.uint64(0xC2B2AE35)) & m
        return x ^ (x >> np.uint64(16))


def key_bytes_np(ids: np.ndarray, key_size: int) -> np.ndarray:
    """(n, key_size) uint8: 16-digit hex blocks of mix64(id + b * step), or
    below 8 B the big-endian bytes of fmix32(id) << 32 | low half of
    mix64(id) (netkv/workload.h)."""
    ids = np.asarray(ids, dtype=np.uint64)
    if key_size < 8:
        w = (fmix32_np(ids) << np.uint64(32)) | (mix64_np(ids) & np.uint64(0xFFFFFFFF))
        shifts = np.arange(56, -8, -8, dtype=np.uint64)[:key_size]
        return ((w[:, None] >> shifts[None, :]) & np.uint64(0xFF)).astype(np.uint8)
    shifts = np.arange(60, -4, -4, dtype=np.uint64)
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    blocks = []
    with np.errstate(over="ignore"):
        for b in range((key_size + 15) // 16):
            m = mix64_np(ids + np.uint64(b) * KEY_BLOCK_STEP)
            nibbles = ((m[:, None] >> shifts[None, :]) & np.uint64(15)).astype(np.uint8)
            blocks.append(digits[nibbles])
    return np.concatenate(blocks, axis=1)[:, :key_size]


def djb2_np(keys: np.ndarray) -> np.ndarray:
    """Pegasus' keyhash over each row: djb2 (h*33 + c, 32-bit) & 0x7FFFFFFF."""
    h = np.full(keys.shape[0], 5381, dtype=np.uint64)
    mask = np.uint64(0xFFFFFFFF)
    for j in range(keys.shape[1]):
        h = (h * np.uint64(33) + keys[:, j].astype(np.uint64)) & mask
    return (h & np.uint64(0x7FFFFFFF)).astype(np.uint32)


def placement_np(n_keys: int, key_size: int, servers: int, virtual_nodes: int = 16,
                 ring: str = "consistent", chunk: int = 1 << 18) -> np.ndarray:
    """Home server of every key id 0..n_keys-1 (uint16)."""
    homes = np.empty(n_keys, dtype=np.uint16)
    if ring == "consistent":
        s = np.repeat(np.arange(servers, dtype=np.uint64), virtual_nodes)
        v = np.tile(np.arange(virtual_nodes, dtype=np.uint64), servers)
        pos = (mix64_np((s << np.uint64(32)) | v) & np.uint64(0x7FFFFFFF)).astype(np.int64)
        order = np.lexsort((v, s, pos))
        pos, owner = pos[order], s[order].astype(np.uint16)
    for start in range(0, n_keys, chunk):
        ids = np.arange(start, min(n_keys, start + chunk), dtype=np.uint64)
        h = djb2_np(key_bytes_np(ids, key_size)).astype(np.int64)
        if ring == "equal_ranges":
            ranges = virtual_nodes * servers
            j = (h * ranges) >> 31
            homes[start:start + len(ids)] = (j % servers).astype(np.uint16)
        elif ring == "hash_mod":
            mixed = mix64_np(h.astype(np.uint64))
            homes[start:start + len(ids)] = (mixed % np.uint64(servers)).astype(np.uint16)
        else:
            idx = np.searchsorted(pos, h, side="left")
            idx[idx == len(pos)] = 0
            homes[start:start + len(ids)] = owner[idx]
    return homes


def expected_server_shares_np(n_keys: int, alpha: float, rank_keys: np.ndarray,
                              homes_by_key: np.ndarray, servers: int) -> np.ndarray:
    """Shares from a rank -> key table and a key -> home table (numpy only)."""
    p = zipf_probabilities(n_keys, alpha)
    shares = np.bincount(homes_by_key[rank_keys].astype(np.int64), weights=p, minlength=servers)
    return shares / shares.sum()
