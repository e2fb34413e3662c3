# netkv tasks. Everything runs from the project's own venv (.venv), which
# `setup` creates and fills; system packages come from `system-deps`.

set shell := ["bash", "-euo", "pipefail", "-c"]

venv := ".venv"
# The README installs rust-just into .venv, not on PATH: recipes call the
# `just` that runs them.
just := quote(just_executable())
python := venv / "bin/python"
asan_build := "build/asan"
fuzz_build := "build/fuzz"

# List the recipes.
default:
    @{{just}} --list

# Debian packages that netkv and its tests use (root; idempotent).
system-deps:
    #!/usr/bin/env bash
    set -euo pipefail
    # chromium: tests/test_report.py renders `netkv report` pages headless;
    # clang and its runtime (libFuzzer): just fuzz
    pkgs="cmake gcc make clang libclang-rt-14-dev pkg-config ethtool iproute2 mininet tcpdump openssh-client openssh-server tshark libdpdk-dev chromium"
    missing=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' $pkgs 2>/dev/null | awk '$1!="ii"{print $2}' || true)
    for p in $pkgs; do dpkg-query -W "$p" >/dev/null 2>&1 || missing="$missing $p"; done
    if [ -n "${missing// /}" ]; then
        echo "installing:$missing"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
    fi

# Everything: Debian packages, .venv with netkv (CMake build), Porcupine helper.
setup: system-deps install porcupine

# .venv with netkv installed in editable mode.
install:
    test -x {{python}} || python3 -m venv {{venv}}
    {{python}} -m pip install -q --upgrade pip
    {{python}} -m pip install -q -e '.[dev]'

# The Porcupine linearizability checker's Go helper (tools/porcupine).
porcupine:
    #!/usr/bin/env bash
    set -euo pipefail
    if ! command -v go >/dev/null; then echo "go not found: the Porcupine cross-checks will skip"; exit 0; fi
    cd tools/porcupine && GOFLAGS=-mod=mod go build -o bin/porcupine .

# Regenerate the shared constants (C header, P4 include, Python module) from spec/constants.toml.
constants:
    {{python}} tools/gen_constants.py

# Sets up only what is missing or stale (a C source newer than the build rebuilds it).
# Positional: a value with spaces, such as a value-size mix, stays one argument.
# Run an experiment, set up first if needed: `just run protocol=pegasus alpha=1.2` (`netkv run`'s arguments).
[positional-arguments]
run *ARGS:
    #!/usr/bin/env bash
    set -euo pipefail
    if ! {{python}} -c 'from netkv.results.provenance import check_fresh; check_fresh()' 2>/dev/null; then
        {{just}} setup
    fi
    {{python}} -m netkv run "$@"

# The command line's start-up time (`--help`, `list`): mean of 10 runs each, goal <= 0.5 s (`--runs N`).
[positional-arguments]
bench-cli *ARGS:
    {{python}} benchmarks/bench_cli.py "$@"

# C unit tests under ASan+UBSan, then the Python tests, then a short fuzz.
test: setup test-c test-py test-fuzz

# C unit tests (ctest) in the sanitizer build.
test-c:
    cmake -S . -B {{asan_build}} -DNETKV_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
    cmake --build {{asan_build}} -j2 >/dev/null
    ctest --test-dir {{asan_build}}/hostapps --output-on-failure

# The libFuzzer harnesses (clang, ASan+UBSan): hostapps/fuzz/fuzz_<protocol>.c.
fuzz-build:
    CC=clang cmake -S . -B {{fuzz_build}} -DNETKV_FUZZ=ON -DNETKV_TESTS=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
    cmake --build {{fuzz_build}} -j2 >/dev/null

# Fuzz every protocol's packet path for SECONDS each (regressions replayed first).
fuzz SECONDS="600" *PROTOCOLS: fuzz-build
    {{python}} tools/fuzz.py --seconds {{SECONDS}} {{PROTOCOLS}}

# CI: the regression inputs, then 10 s of fuzzing per protocol.
test-fuzz: (fuzz "10")

# Python tests (pytest).
[positional-arguments]
test-py *ARGS:
    {{python}} -m pytest -q "$@"

# Simulator speed: simulated requests/s and a skew sweep's wall time (`--no-save`: keep the .last.json).
[positional-arguments]
bench-sim *ARGS: setup
    {{python}} benchmarks/bench_sim.py "$@"

# Emulation speed: direct veth vs netkv-switch, kvserver vs a UDP echo, kernel vs DPDK pair (root; `--help`).
[positional-arguments]
bench-emu *ARGS: setup
    {{python}} benchmarks/bench_emu.py "$@"

# Remove build outputs (not runs/).
clean-build:
    rm -rf build {{venv}}
