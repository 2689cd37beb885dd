#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a working pulse-plan:
#   scripts/setup.sh          install what is missing, build, plan the shipped default model
#   scripts/setup.sh --test   the same, then run the whole test suite
# Options: --build-dir DIR (default build), --jobs N (default: all cores).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build="$here/build"
jobs=$(nproc 2>/dev/null || echo 2)
run_tests=0
while [ $# -gt 0 ]; do
  case "$1" in
    --test) run_tests=1 ;;
    --build-dir) build=$(realpath -m "$2"); shift ;;
    --jobs) jobs="$2"; shift ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
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
  python3 python3-jsonschema python3-torch
  python3-venv python3-pip python3-setuptools python3-wheel  # pip install ./python (tests/torch)
  chromium  # headless, for the HTML report test (tests/html): renders and screenshots it
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >&2
fi

cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release >&2
cmake --build "$build" -j "$jobs" >&2

# The main job: the shipped default model (Stable Diffusion 2 UNet, 512 px) planned for one
# V100 DGX-1 node and one Ascend 910A server.
mkdir -p "$here/out"
for cluster in dgx1-v100-32gb-1n atlas800-910a-1n; do
  "$build/pulse-plan" plan --model "$here/profiles/models/sd2-unet-512.json" \
    --cluster "$here/profiles/clusters/$cluster.json" -o "$here/out/sd2-unet-512.$cluster.json"
done
echo "setup.sh: plans written to out/" >&2

if [ "$run_tests" -eq 1 ]; then
  ctest --test-dir "$build" --output-on-failure -j "$jobs"
fi
