#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a working pulse-plan:
#   scripts/setup.sh          install what is missing, make the PyTorch environment of the
#                             runtime (build-venv/), build the Release binary (build/), plan
#                             the shipped default model
#   scripts/setup.sh --test   the same, then build everything again under ASan + UBSan
#                             (build-asan/) and run the whole test suite on that build, the
#                             torch tests on build-venv's PyTorch
# Options: --build-dir DIR (default build), --asan-dir DIR (default build-asan),
#          --venv DIR (default build-venv), --jobs N (default: all cores).
# PULSE_TORCH_SPEC names the PyTorch pip installs (default torch==2.13.0; 2.6 or later).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build="$here/build"
asan="$here/build-asan"
venv="$here/build-venv"
jobs=$(nproc 2>/dev/null || echo 2)
run_tests=0
while [ $# -gt 0 ]; do
  case "$1" in
    --test) run_tests=1 ;;
    --build-dir) build=$(realpath -m "$2"); shift ;;
    --asan-dir) asan=$(realpath -m "$2"); shift ;;
    --venv) venv=$(realpath -m "$2"); shift ;;
    --jobs) jobs="$2"; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# Debian packages the build and the tests need. Each is installed only if missing.
packages=(
  build-essential cmake pkg-config
  coinor-libcbc-dev coinor-libclp-dev
  libboost-program-options-dev libboost-graph-dev
  nlohmann-json3-dev libfmt-dev libssl-dev
  libgtest-dev libgmock-dev
  python3 python3-jsonschema
  # build-venv/ (PyTorch from pip) and pip install ./python (tests/torch). Debian's own
  # python3-torch (1.13) is not used: the runtime needs PyTorch 2.6 or later.
  python3-venv python3-pip python3-setuptools python3-wheel
  chromium  # headless, for the HTML report test (tests/html): renders and screenshots it
)
# The sanitized build (and scripts/fuzz.sh): clang, its ASan/UBSan/libFuzzer runtimes (only
# recommended by clang, hence named), llvm-symbolizer for file:line in reports.
# clang-format: the CTest `format` (tests/layers/check_format.py) holds every C++ file to
# .clang-format.
if [ "$run_tests" -eq 1 ]; then packages+=(clang libclang-rt-14-dev llvm clang-format); fi
# Runs a step and says how long it took (CI's log reads as the list of steps with times).
timed() {
  local step=$1 start=$SECONDS
  shift
  "$@"
  echo "setup.sh: $step: $((SECONDS - start)) s" >&2
}

# The PyTorch the runtime and its tests use: a virtual environment from Debian's python3 with
# PyTorch from pip (2.13.0, a CPU wheel, unless PULSE_TORCH_SPEC says otherwise) and what the
# runtime and its tests import: jsonschema (pulse-run validates plans against the schema),
# numpy, hypothesis (the plan reader's fuzz test, tests/torch/test_plan_reader.py). Kept when
# it already holds all of them with PyTorch 2.6+; made again otherwise.
torch_venv() {
  local check='import sys, torch, jsonschema, numpy, hypothesis
v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
sys.exit(0 if v >= (2, 6) else 1)'
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then return; fi
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  # --no-compile: no .pyc for torch's ~10k files up front (Python writes those it imports).
  "$venv/bin/pip" install --quiet --no-compile --disable-pip-version-check \
    "${PULSE_TORCH_SPEC:-torch==2.13.0}" numpy jsonschema hypothesis >&2
  "$venv/bin/python" -c "$check"
  echo "setup.sh: $("$venv/bin/python" -c 'import torch; print("PyTorch", torch.__version__)') in $venv" >&2
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  timed install "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}" >&2
fi

timed "PyTorch environment" torch_venv

# The binary users run: GCC, Release. Only pulse-plan: the tests run on the sanitized build
# below (`cmake --build build` makes the unit tests and benchmarks here too).
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPULSE_TORCH_PYTHON="$venv/bin/python" >&2
timed "Release build" cmake --build "$build" -j "$jobs" --target pulse-plan >&2

# The main job: the shipped default model (Stable Diffusion 2 UNet, 512 px) planned for one
# V100 DGX-1 node and one Ascend 910A server.
mkdir -p "$here/out"
for cluster in dgx1-v100-32gb-1n atlas800-910a-1n; do
  "$build/pulse-plan" plan --model "$here/profiles/models/sd2-unet-512.json" \
    --cluster "$here/profiles/clusters/$cluster.json" -o "$here/out/sd2-unet-512.$cluster.json"
done
echo "setup.sh: plans written to out/" >&2

if [ "$run_tests" -eq 1 ]; then
  # Everything again under AddressSanitizer + UndefinedBehaviorSanitizer, and the whole
  # suite (unit, golden CLI, Python and torch tests) on it: any report aborts the program
  # and fails its test (tests/support/sanitizer_defaults.cpp). Chosen to fit CI's budget on
  # two cores: clang (faster to compile than GCC), a unity build (each batch of sources
  # parses the heavy headers once), -O2 (the suite runs about 20% faster than at -O1, for
  # the same build time) with line tables only, for file:line in reports.
  cmake -S "$here" -B "$asan" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O2 -gline-tables-only" -DCMAKE_UNITY_BUILD=ON \
    -DPULSE_SANITIZE=ON -DPULSE_TORCH_PYTHON="$venv/bin/python" -DPULSE_REQUIRE_TORCH=ON >&2
  timed "sanitized build" cmake --build "$asan" -j "$jobs" >&2
  # The planner is about seven times slower under the sanitizers: the never-worse property
  # test plans 16 of its 200 random models here (tests/compile/never_worse_test.cpp).
  log="$asan/ctest.log"
  timed "sanitized tests" env PULSE_NEVER_WORSE_MODELS="${PULSE_NEVER_WORSE_MODELS:-2}" \
    ctest --test-dir "$asan" --output-on-failure -j "$jobs" 2>&1 | tee "$log"
  # Belt and braces: no torch test may be reported skipped (each fails without PyTorch
  # 2.6+ already, tests/torch/common.py); CTest counts a skip as no failure.
  skipped=$(ctest --test-dir "$asan" -N -L torch | sed -n 's/^ *Test *#[0-9]*: //p' |
    while read -r name; do grep -E "Test +#[0-9]+: $name \.+\*+Skipped" "$log" || true; done)
  if [ -n "$skipped" ]; then
    echo "setup.sh: torch tests skipped (PyTorch 2.6+ must run them all):" >&2
    echo "$skipped" >&2
    exit 1
  fi
fi
