"""netkv.lincheck: the Python WGL checker, the Porcupine helper, and their agreement.

The Porcupine half builds tools/porcupine once per session with `go build`
into a temp dir (needs Go and the module proxy or a warm module cache); it is
skipped when `go` is not installed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netkv.lincheck import (
    TOOL_DIR,
    HistoryError,
    check_file,
    check_file_porcupine,
    check_history,
    check_register,
    parse_lines,
)
from netkv.lincheck.history import INF, Op

# ---------------------------------------------------------------- helpers


def ev(process, typ, f, key, value, t, **extra):
    return {"process": process, "type": typ, "f": f, "key": key, "value": value,
            "time_ns": t, **extra}


def op(process, f, key, value, call, ret, typ="ok"):
    """Invoke + completion events; typ "ok" | "fail" | "info" | None (never completes)."""
    inv = ev(process, "invoke", f, key, value if f == "write" else None, call)
    if typ is None:
        return [inv]
    return [inv, ev(process, typ, f, key, value, ret)]


def lines_of(*groups):
    """Events (lists from op() or single dicts), written in time order (stable)."""
    evs = []
    for g in groups:
        evs.extend(g if isinstance(g, list) else [g])
    evs.sort(key=lambda e: e["time_ns"])
    return [json.dumps(e) for e in evs]


def write_history(path: Path, lines) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def py_ok(lines):
    return check_history(parse_lines(lines)).ok


# ---------------------------------------------------------------- porcupine build


@pytest.fixture(scope="session")
def porcupine_bin(tmp_path_factory):
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed: the Porcupine cross-check needs it")
    out = tmp_path_factory.mktemp("porcupine") / "porcupine"
    env = dict(os.environ, GOFLAGS="-mod=mod")
    p = subprocess.run([go, "build", "-o", str(out), "."], cwd=TOOL_DIR, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"go build of tools/porcupine failed:\n{p.stderr}"
    return out


# ---------------------------------------------------------------- classic examples

CLASSIC = {
    # name: (events, linearizable?)
    "stale read after completed write": (lines_of(
        op(0, "write", "x", "a", 0, 10),
        op(0, "write", "x", "b", 20, 30),
        op(1, "read", "x", "a", 40, 50)), False),
    "read after completed write sees it": (lines_of(
        op(0, "write", "x", "a", 0, 10),
        op(1, "read", "x", "a", 20, 30)), True),
    "initial read is null": (lines_of(op(1, "read", "x", None, 0, 5)), True),
    "read null after completed write": (lines_of(
        op(0, "write", "x", "a", 0, 10),
        op(1, "read", "x", None, 20, 30)), False),
    "concurrent write/read sees old value": (lines_of(
        op(0, "write", "x", "a", 0, 10),
        op(0, "write", "x", "b", 20, 60),
        op(1, "read", "x", "a", 30, 40)), True),
    "concurrent write/read sees new value": (lines_of(
        op(0, "write", "x", "a", 0, 10),
        op(0, "write", "x", "b", 20, 60),
        op(1, "read", "x", "b", 30, 40)), True),
    "value never written": (lines_of(
        op(0, "write", "x", "a", 0, 10),
        op(1, "read", "x", "zzz", 5, 40)), False),
    "new then old value (no going back)": (lines_of(
        op(0, "write", "x", "a", 0, 10),
        op(0, "write", "x", "b", 20, 100),
        op(1, "read", "x", "b", 30, 40),
        op(2, "read", "x", "a", 50, 60)), False),
    "closed intervals: touching ops are concurrent": (lines_of(
        op(0, "write", "x", "a", 0, 10),
        op(1, "read", "x", None, 10, 20)), True),
    "info write may have taken effect": (lines_of(
        op(0, "write", "x", "a", 0, 10, typ="info"),
        op(1, "read", "x", "a", 100, 110)), True),
    "info write may not have taken effect": (lines_of(
        op(0, "write", "x", "a", 0, 10, typ="info"),
        op(1, "read", "x", None, 100, 110)), True),
    "info write takes effect after its info line": (lines_of(
        op(0, "write", "x", "a", 0, 10, typ="info"),
        op(1, "read", "x", None, 100, 110),
        op(1, "read", "x", "a", 200, 210)), True),
    "info write takes effect at most once": (lines_of(
        op(0, "write", "x", "a", 0, 10, typ="info"),
        op(2, "write", "x", "b", 20, 30),
        op(1, "read", "x", "a", 100, 110),
        op(1, "read", "x", "b", 200, 210),
        op(1, "read", "x", "a", 300, 310)), False),
    "info write cannot take effect before its invoke": (lines_of(
        op(1, "read", "x", "a", 0, 10),
        op(0, "write", "x", "a", 20, 30, typ="info")), False),
    "never-completed write counts as info": (lines_of(
        op(0, "write", "x", "a", 0, None, typ=None),
        op(1, "read", "x", "a", 100, 110),
        op(1, "read", "x", "a", 200, 210)), True),
    "fail write whose value is read": (lines_of(
        op(0, "write", "x", "a", 0, 10, typ="fail"),
        op(1, "read", "x", "a", 100, 110)), False),
    "fail write is not needed": (lines_of(
        op(0, "write", "x", "a", 0, 10, typ="fail"),
        op(1, "read", "x", None, 100, 110)), True),
    "info read constrains nothing": (lines_of(
        op(0, "write", "x", "a", 0, 10),
        op(1, "read", "x", "bogus", 20, 30, typ="info")), True),
    "two keys are independent registers": (lines_of(
        op(0, "write", "x", "a", 0, 10),
        op(1, "write", "y", "b", 0, 10),
        op(2, "read", "x", "a", 20, 30),
        op(2, "read", "y", "b", 40, 50),
        op(3, "read", "y", None, 0, 5)), True),
    "a value of another key is not readable": (lines_of(
        op(0, "write", "x", "a", 0, 10),
        op(2, "read", "y", "a", 20, 30)), False),
    "string processes and extra fields": ([
        json.dumps(ev("c1/0", "invoke", "write", "x", "a", 0, ver=1)),
        json.dumps(ev("c1/0", "ok", "write", "x", "a", 10, ver=1)),
        json.dumps(ev("c2/0", "invoke", "read", "x", None, 20)),
        json.dumps(ev("c2/0", "ok", "read", "x", "a", 30, ver=1))], True),
    "empty history": ([], True),
}


@pytest.mark.parametrize("name", list(CLASSIC))
def test_classic_python(name):
    lines, expect = CLASSIC[name]
    assert py_ok(lines) is expect


@pytest.mark.parametrize("name", list(CLASSIC))
def test_classic_porcupine(name, porcupine_bin, tmp_path):
    lines, expect = CLASSIC[name]
    f = write_history(tmp_path / "history.jsonl", lines)
    assert check_file_porcupine(f, binary=porcupine_bin).ok is expect


def test_explanation_longest_prefix_and_blocking_op(tmp_path):
    lines, _ = CLASSIC["new then old value (no going back)"]
    res = check_file(write_history(tmp_path / "h.jsonl", lines))
    assert res.ok is False and len(res.failures) == 1
    kr = res.failures[0]
    assert kr.key == "x" and [o.value for o in kr.prefix] == ["a", "b", "b"]
    assert kr.blocked.f == "read" and kr.blocked.value == "a" and kr.blocked.line == 6
    line = res.line()
    assert "\n" not in line and line.startswith("not linearizable")
    assert 'key "x"' in line and "3 of 4 ops" in line and 'holds "b"' in line


@pytest.mark.parametrize("name, words", [
    ("stale read after completed write", "is stale"),
    ("read null after completed write", "is stale"),
    ("value never written", "no write"),
    ("info write cannot take effect before its invoke", "began after it ended"),
])
def test_quick_checks_explain(name, words):
    res = check_history(parse_lines(CLASSIC[name][0]))
    assert res.ok is False and words in res.explanation and "\n" not in res.line()
    # the full search agrees without the quick checks
    h = parse_lines(CLASSIC[name][0])
    assert all(check_register(ops, k, quick=False).ok is False for k, ops in h.by_key().items())


def test_only_failing_keys_reported():
    lines = lines_of(
        op(0, "write", "good", "a", 0, 10), op(1, "read", "good", "a", 20, 30),
        op(2, "write", "bad", "a", 0, 10), op(3, "read", "bad", None, 20, 30))
    res = check_history(parse_lines(lines))
    assert res.ok is False and [k.key for k in res.failures] == ["bad"]
    assert res.keys == 2 and res.ops == 4


def test_pending_and_dropped_counts():
    lines = lines_of(
        op(0, "write", "x", "a", 0, 10, typ="info"), op(1, "write", "x", "b", 0, None, typ=None),
        op(2, "read", "x", "a", 0, 10, typ="info"), op(3, "write", "x", "c", 0, 10, typ="fail"))
    h = parse_lines(lines)
    assert (h.pending_writes, h.dropped_reads, h.failed, len(h.ops)) == (2, 1, 1, 2)
    assert all(o.ret == INF for o in h.ops)


# ---------------------------------------------------------------- malformed input

_W0 = json.dumps(ev(0, "invoke", "write", "x", "a", 0))
MALFORMED = {
    "second invoke on an open process": ([_W0, json.dumps(ev(0, "invoke", "read", "x", None, 5))],
                                         2, "second invoke"),
    "completion without invoke": ([json.dumps(ev(0, "ok", "read", "x", None, 5))], 1,
                                  "without an open invoke"),
    "unknown type": ([_W0, json.dumps(ev(0, "done", "write", "x", "a", 5))], 2, "unknown type"),
    "unknown f": ([json.dumps(ev(0, "invoke", "cas", "x", "a", 0))], 1, "unknown f"),
    "invalid json": ([_W0, "", '{"process": 0, "type": "ok",'], 3, "invalid JSON"),
    "not an object": (["[1, 2]"], 1, "not a JSON object"),
    "time goes backwards": ([json.dumps(ev(0, "invoke", "write", "x", "a", 10)),
                             json.dumps(ev(0, "ok", "write", "x", "a", 5))], 2, "goes backwards"),
    "negative time": ([json.dumps(ev(0, "invoke", "write", "x", "a", -1))], 1, "time_ns"),
    "completion f mismatch": ([_W0, json.dumps(ev(0, "ok", "read", "x", "a", 5))], 2,
                              "does not match"),
    "completion key mismatch": ([_W0, json.dumps(ev(0, "ok", "write", "y", "a", 5))], 2,
                                "does not match"),
    "missing time": (['{"process": 0, "type": "invoke", "f": "read", "key": "x"}'], 1,
                     "time_ns"),
    "float time": (['{"process": 0, "type": "invoke", "f": "read", "key": "x", "time_ns": 1.5}'],
                   1, "time_ns"),
    "non-string value": ([json.dumps(ev(0, "invoke", "write", "x", 7, 0))], 1, "value"),
    "bool process": ([json.dumps(ev(True, "invoke", "write", "x", "a", 0))], 1, "process"),
    "missing key on invoke": (['{"process": 0, "type": "invoke", "f": "read", "time_ns": 0}'],
                              1, "key"),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_one_line_error(name, tmp_path):
    lines, lineno, words = MALFORMED[name]
    f = write_history(tmp_path / "history.jsonl", lines)
    with pytest.raises(HistoryError) as ei:
        check_file(f)
    msg = str(ei.value)
    assert "\n" not in msg and ei.value.line == lineno
    assert msg.startswith(f"{f}:{lineno}: ") and words in msg


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_porcupine(name, porcupine_bin, tmp_path):
    lines, lineno, _ = MALFORMED[name]
    f = write_history(tmp_path / "history.jsonl", lines)
    with pytest.raises(HistoryError) as ei:
        check_file_porcupine(f, binary=porcupine_bin)
    assert ei.value.line == lineno and "\n" not in str(ei.value)


def test_cli(tmp_path, porcupine_bin):
    good = write_history(tmp_path / "good.jsonl", CLASSIC["concurrent write/read sees new value"][0])
    bad = write_history(tmp_path / "bad.jsonl", CLASSIC["stale read after completed write"][0])
    broken = write_history(tmp_path / "broken.jsonl", MALFORMED["unknown f"][0])
    env = dict(os.environ, NETKV_PORCUPINE=str(porcupine_bin))
    for extra in ([], ["--porcupine"]):
        for path, code, start in ((good, 0, "linearizable"), (bad, 1, "not linearizable"),
                                  (broken, 2, "error: ")):
            p = subprocess.run([sys.executable, "-m", "netkv.lincheck", str(path), *extra],
                               capture_output=True, text=True, env=env)
            assert p.returncode == code, (extra, path, p.stdout, p.stderr)
            assert p.stdout.startswith(start) and p.stdout.count("\n") == 1


def test_cli_names_a_missing_file(tmp_path):
    from netkv.lincheck.__main__ import main

    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([str(tmp_path / "nope.jsonl")]) == 2
    line = out.getvalue()
    assert line == (f"error: {tmp_path / 'nope.jsonl'}: No such file or directory "
                    "(allowed: a history.jsonl that netkv wrote)\n"), line


def test_porcupine_missing_binary_is_a_clear_error(tmp_path):
    from netkv.lincheck import PorcupineUnavailable
    f = write_history(tmp_path / "h.jsonl", [])
    with pytest.raises(PorcupineUnavailable, match="go build"):
        check_file_porcupine(f, binary=tmp_path / "nope")


# ---------------------------------------------------------------- randomized cross-check


def random_history(rng: random.Random, corrupt: bool, max_ops: int = 9, max_proc: int = 4,
                   values=("a", "b", "c")):
    """Events from a real register under random concurrency (coarse integer
    times, so ties happen); `corrupt` then changes one ok read's value."""
    n_proc = rng.randint(1, max_proc)
    keys = ["x", "y"][: rng.randint(1, 2)]
    values = list(values)
    n_ops = rng.randint(1, max_ops)
    per_proc = [[] for _ in range(n_proc)]
    clock = [0] * n_proc
    planned = []
    for _ in range(n_ops):
        p = rng.randrange(n_proc)
        call = clock[p] + rng.randint(0, 3)
        ret = call + rng.randint(0, 6)
        clock[p] = ret
        f = rng.choice(["read", "write"])
        outcome = rng.choices(["ok", "info", "fail", None], [0.75, 0.1, 0.1, 0.05])[0]
        o = {"p": p, "f": f, "key": rng.choice(keys), "value": rng.choice(values),
             "call": call, "ret": ret, "outcome": outcome,
             # the instant it takes effect (ties broken randomly)
             "at": (rng.randint(call, ret), rng.random())}
        planned.append(o)
        per_proc[p].append(o)
    for p in range(n_proc):  # a never-completed op can only be a process's last
        for o in per_proc[p][:-1]:
            if o["outcome"] is None:
                o["outcome"] = "info"
    state = {}
    for o in sorted(planned, key=lambda o: o["at"]):
        applied = o["outcome"] == "ok" or (o["outcome"] in ("info", None) and rng.random() < 0.5)
        if o["f"] == "write" and applied:
            state[o["key"]] = o["value"]
        elif o["f"] == "read":
            o["value"] = state.get(o["key"])
    if corrupt:
        reads = [o for o in planned if o["f"] == "read" and o["outcome"] == "ok"]
        if reads:
            r = rng.choice(reads)
            r["value"] = rng.choice([v for v in values + [None] if v != r["value"]])
    events = []
    for p in range(n_proc):
        for o in per_proc[p]:
            events.append(ev(p, "invoke", o["f"], o["key"],
                             o["value"] if o["f"] == "write" else None, o["call"]))
            if o["outcome"] is not None:
                events.append(ev(p, o["outcome"], o["f"], o["key"],
                                 o["value"] if o["outcome"] == "ok" or o["f"] == "write" else None,
                                 o["ret"]))
    events.sort(key=lambda e: e["time_ns"])  # stable: a process's own order is kept
    return [json.dumps(e) for e in events]


def brute_force_ok(ops: list[Op]) -> bool:
    """Independent oracle: try every real-time-respecting order of the ok ops,
    with each pending write either placed somewhere after its call or never."""
    by_key = {}
    for o in ops:
        by_key.setdefault(o.key, []).append(o)

    def key_ok(kops):
        n = len(kops)
        must = [o.ret != INF for o in kops]

        def dfs(placed: int, state) -> bool:
            if all(placed >> i & 1 or not must[i] for i in range(n)):
                return True
            for i in range(n):
                if placed >> i & 1:
                    continue
                o = kops[i]
                # every op that returned strictly before o's call must already be placed
                if any(not placed >> j & 1 and kops[j].ret < o.call for j in range(n) if j != i):
                    continue
                if o.f == "read" and o.value != state:
                    continue
                if dfs(placed | 1 << i, o.value if o.f == "write" else state):
                    return True
            return False

        return dfs(0, None)

    return all(key_ok(k) for k in by_key.values())


def test_random_histories_python_vs_bruteforce_vs_porcupine(porcupine_bin, tmp_path):
    rng = random.Random(20240611)
    counts = {True: 0, False: 0}
    for i in range(300):
        corrupt = i % 2 == 1
        lines = random_history(rng, corrupt)
        h = parse_lines(lines)
        py = check_history(h).ok
        if not corrupt:
            assert py is True, "\n".join(lines)
        assert py is brute_force_ok(h.ops), "\n".join(lines)
        f = write_history(tmp_path / f"h{i}.jsonl", lines)
        # half of them: porcupine on the raw history, without the pending-write reduction
        pc = check_file_porcupine(f, binary=porcupine_bin, reduce=i % 4 < 2)
        assert pc.ok is py, "\n".join(lines)
        counts[py] += 1
    assert counts[True] > 60 and counts[False] > 60, counts


def test_random_larger_histories_python_vs_porcupine(porcupine_bin, tmp_path):
    """Longer, more concurrent histories (too big for the brute force)."""
    rng = random.Random(99)
    counts = {True: 0, False: 0}
    for i in range(60):
        lines = random_history(rng, corrupt=i % 2 == 1, max_ops=60, max_proc=8,
                               values=("a", "b", "c", "d", "e"))
        f = write_history(tmp_path / f"h{i}.jsonl", lines)
        py = check_file(f).ok
        assert check_file_porcupine(f, binary=porcupine_bin).ok is py, "\n".join(lines)
        counts[py] += 1
    assert counts[True] > 15 and counts[False] > 15, counts


def test_random_histories_python_vs_bruteforce_without_go():
    """The same property without Go, on more histories (the Python half always
    runs), also with the quick checks and the pending-write reduction off."""
    rng = random.Random(7)
    for i in range(600):
        lines = random_history(rng, corrupt=i % 3 == 0)
        h = parse_lines(lines)
        expect = brute_force_ok(h.ops)
        assert check_history(h).ok is expect, "\n".join(lines)
        bare = all(check_register(ops, quick=False, reduce=False).ok
                   for ops in h.by_key().values())
        assert bare is expect, "\n".join(lines)


# ---------------------------------------------------------------- scale


def big_history(n_ops: int, n_keys: int, n_proc: int, seed: int = 1):
    """A long linearizable multi-key history (1 % info writes, half of which
    take effect): each op takes effect at a random instant of its interval."""
    rng = random.Random(seed)
    clock = [0] * n_proc
    ops = []
    for k in range(n_ops):
        p = rng.randrange(n_proc)
        call = clock[p] + rng.randint(0, 50)
        ret = call + rng.randint(1, 400)
        clock[p] = ret
        f = "write" if rng.random() < 0.5 else "read"
        info = f == "write" and rng.random() < 0.01
        ops.append({"p": p, "f": f, "key": f"k{rng.randrange(n_keys)}", "value": f"v{k}",
                    "call": call, "ret": ret, "info": info,
                    "at": rng.uniform(call, ret), "applies": not info or rng.random() < 0.5})
    state = {}
    for o in sorted(ops, key=lambda o: o["at"]):
        if o["f"] == "read":
            o["value"] = state.get(o["key"])
        elif o["applies"]:
            state[o["key"]] = o["value"]
    events = []
    for o in ops:
        events.append(ev(o["p"], "invoke", o["f"], o["key"],
                         o["value"] if o["f"] == "write" else None, o["call"]))
        events.append(ev(o["p"], "info" if o["info"] else "ok", o["f"], o["key"], o["value"],
                         o["ret"]))
    events.sort(key=lambda e: e["time_ns"])
    return [json.dumps(e) for e in events]


def test_scale_multi_key(tmp_path):
    lines = big_history(20_000, 200, 32)
    f = write_history(tmp_path / "history.jsonl", lines)
    t0 = time.perf_counter()
    res = check_file(f)
    dt = time.perf_counter() - t0
    assert res.ok is True and res.ops == 20_000
    assert dt < 10, dt


# ---------------------------------------------------------------- porcupine's memory cap


@pytest.fixture(scope="module")
def hot_history(tmp_path_factory):
    """20,000 ops on one key from 32 clients: Porcupine's search passes 2 GB
    within seconds (uncapped it took the machine's 24 GB on such a history)."""
    return write_history(tmp_path_factory.mktemp("hot") / "history.jsonl",
                         big_history(20_000, 1, 32))


def test_porcupine_out_of_memory_is_a_result_not_a_crash(porcupine_bin, hot_history):
    """The helper had no cap: a large history grew it until the kernel's OOM
    killer fired, machine-wide."""
    res = check_file_porcupine(hot_history, binary=porcupine_bin, max_memory_gb=2)
    assert res.ok is None and res.out_of_memory, res.line()
    pending = check_file(hot_history).pending_writes
    assert res.line() == ("unknown: porcupine: out of memory at 2 GB on 20000 operations; no "
                          f"verdict (20000 ops, 1 keys, {pending} pending writes)")


def test_porcupine_out_of_memory_on_the_command_line(porcupine_bin, hot_history):
    env = dict(os.environ, NETKV_PORCUPINE=str(porcupine_bin))
    p = subprocess.run([sys.executable, "-m", "netkv.lincheck", str(hot_history), "--porcupine",
                        "--max-memory", "2"], capture_output=True, text=True, env=env)
    assert p.returncode == 3 and p.stdout.count("\n") == 1 and not p.stderr, (p.stdout, p.stderr)
    assert p.stdout.startswith("unknown: porcupine: out of memory at 2 GB on 20000 operations"), p.stdout


def test_verdicts_keep_wgl_when_porcupine_runs_out_of_memory(porcupine_bin, hot_history,
                                                             monkeypatch):
    from netkv.lincheck import verdicts

    monkeypatch.setenv("NETKV_PORCUPINE", str(porcupine_bin))
    with pytest.warns(UserWarning, match="porcupine: out of memory at 2 GB on 20000 operations; "
                      "WGL's verdict stands"):
        assert verdicts(hot_history, max_memory_gb=2) == [True]


@pytest.mark.parametrize("gb", [0.5, 1.2])
def test_a_cap_too_small_for_go_to_start_is_out_of_memory(gb, porcupine_bin, tmp_path):
    """Below about 0.75 GB (and at 1.2 GB) the Go runtime cannot reserve its
    start-up address space: it died with 'fatal error: failed to reserve page
    summary memory' (or 'runtime: out of memory ... (0 in use)') and a
    goroutine dump, reported as a malformed history (exit 2)."""
    h = write_history(tmp_path / "h.jsonl", big_history(200, 4, 4))
    res = check_file_porcupine(h, binary=porcupine_bin, max_memory_gb=gb)
    assert res.ok is None and res.out_of_memory, res.line()
    env = dict(os.environ, NETKV_PORCUPINE=str(porcupine_bin))
    p = subprocess.run([sys.executable, "-m", "netkv.lincheck", str(h), "--porcupine",
                        "--max-memory", str(gb)], capture_output=True, text=True, env=env)
    assert p.returncode == 3 and p.stdout.count("\n") == 1 and not p.stderr, (p.stdout, p.stderr)
    assert p.stdout.startswith(f"unknown: porcupine: out of memory at {gb} GB on 200 operations; "
                               "no verdict"), p.stdout


def test_porcupine_runs_under_half_the_physical_memory_by_default(tmp_path):
    """A stand-in helper reports the address-space limit it was given."""
    from netkv.lincheck import default_max_memory_gb

    fake = tmp_path / "porcupine"
    fake.write_text('#!/bin/sh\necho "linearizable (0 ops, 0 keys, 0 pending writes; $(ulimit -v))"\n')
    fake.chmod(0o755)
    h = write_history(tmp_path / "h.jsonl", [])
    phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert default_max_memory_gb() == phys / 2 / 1e9
    assert check_file_porcupine(h, binary=fake).explanation == str(phys // 2 // 1024)
    assert check_file_porcupine(h, binary=fake, max_memory_gb=3).explanation == str(3 * 10**9 // 1024)
    with pytest.raises(ValueError, match=r"max_memory_gb=0 \(allowed: GB, a finite number > 0\)"):
        check_file_porcupine(h, binary=fake, max_memory_gb=0)


def test_without_prlimit_the_cap_is_set_in_the_child(tmp_path, monkeypatch):
    """util-linux's prlimit missing: the cap is set by a preexec_fn in the
    child, and the stand-in helper sees the same limit."""
    import netkv.lincheck as lc

    fake = tmp_path / "porcupine"
    fake.write_text('#!/bin/sh\necho "linearizable (0 ops, 0 keys, 0 pending writes; $(ulimit -v))"\n')
    fake.chmod(0o755)
    h = write_history(tmp_path / "h.jsonl", [])
    real_which = lc.shutil.which
    monkeypatch.setattr(lc.shutil, "which", lambda name: None if name == "prlimit" else real_which(name))
    argv, preexec = lc._capped([str(fake)], 3 * 10**9)
    assert argv == [str(fake)] and preexec is not None
    assert check_file_porcupine(h, binary=fake, max_memory_gb=3).explanation == str(3 * 10**9 // 1024)


@pytest.mark.parametrize("option, bad, allowed", [
    ("--timeout", "-1", "seconds, a finite number > 0"),
    ("--timeout", "nan", "seconds, a finite number > 0"),
    ("--max-states", "x", "an integer >= 0"), ("--max-states", "-5", "an integer >= 0"),
    ("--max-memory", "0", "GB, a finite number > 0"), ("--max-memory", "inf", "GB, a finite number > 0"),
])
def test_cli_says_what_an_option_allows(option, bad, allowed, tmp_path, capsys):
    """`--timeout -1` and `nan` were taken (nan: never timed out), as was
    `--max-states -5`; `--max-states x` printed the usage, then argparse's
    "invalid int value"."""
    from netkv.lincheck.__main__ import main

    path = write_history(tmp_path / "h.jsonl", CLASSIC["stale read after completed write"][0])
    with pytest.raises(SystemExit) as exc:
        main([option, bad, str(path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: argument {option}: {bad!r} (allowed: {allowed}"), err


def test_cli_interrupted_is_one_line(tmp_path, monkeypatch, capsys):
    """Ctrl-C during a long check ended in a KeyboardInterrupt traceback."""
    from netkv.lincheck import __main__ as cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "check_file", interrupted)
    path = write_history(tmp_path / "h.jsonl", CLASSIC["stale read after completed write"][0])
    assert cli.main([str(path)]) == 130
    assert capsys.readouterr().out == "error: interrupted (no verdict)\n"


def test_cli_help_lists_every_exit_code(capsys):
    """--help listed 0-3, not the 130 an interrupted check exits with."""
    from netkv.lincheck import __main__ as cli

    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("3: unknown (timed out, or Porcupine out of memory), 130: interrupted (Ctrl-C; no "
            "verdict)") in text, text
    assert "130 if interrupted" in (cli.__doc__ or "")
