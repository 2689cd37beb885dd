#!/bin/sh
# The GPU check (issue 27): the SD2 UNet's whole-step times at microbatch 1-32, its block
# profile with pulse-profile, and one-stage pulse-runs, on one CUDA GPU, each step in a
# process of its own, in under three minutes (--budget-s, default 170). Four files go to
# OUT: gpu_check.json, gpu_check.log and one profile per image size.
#
#   scripts/gpu_check.sh OUT                 # on the GPU machine, from the repository root
#   scripts/gpu_check.sh OUT --dry-run       # tiny sizes on the CPU, under a minute
#
# PYTHON picks the interpreter (default python3); other options go to scripts/gpu_check.py
# (--help). docs/fidelity.md, "The GPU check", says how to read the results.
set -eu
if [ $# -lt 1 ]; then
  echo "usage: $0 OUT [--dry-run] [gpu_check.py options]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
exec "${PYTHON:-python3}" "$here/gpu_check.py" "$@"
