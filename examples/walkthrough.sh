#!/usr/bin/env bash
# A walk-through of pulse-plan's plan -> diff -> validate -> export cycle on Stable
# Diffusion 2 (UNet, 512 px): plan it for a V100 DGX-1 node and for an Ascend 910A server,
# see what changes between the two, check both plans independently, and hand them on as a
# PyTorch schedule CSV, a Graphviz graph and an HTML report. Every command is printed
# before it runs. From a fresh build:
#
#   cmake -S . -B build && cmake --build build -j2
#   examples/walkthrough.sh                 # writes out/walkthrough/
#   examples/walkthrough.sh --binary build/pulse-plan --out /tmp/w --model sd2-unet-768
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
binary="$root/build/pulse-plan"
out="$root/out/walkthrough"
model=sd2-unet-512
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=$(realpath -m "$2"); shift ;;
    --out) out=$(realpath -m "$2"); shift ;;
    --model) model="$2"; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "walkthrough.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ ! -x "$binary" ]; then
  echo "walkthrough.sh: no pulse-plan at $binary; build it first:" >&2
  echo "  cmake -S . -B build && cmake --build build -j2" >&2
  exit 2
fi
mkdir -p "$out"
profiles="$root/profiles"
model_file="$profiles/models/$model.json"
v100="$profiles/clusters/dgx1-v100-32gb-1n.json"
a910="$profiles/clusters/atlas800-910a-1n.json"

step() { printf '\n== %s\n' "$*"; }
# run [> FILE] WANT ARGS...: prints the command (paths shortened) and runs it, stdout to
# FILE if given; its exit code must be WANT.
run() {
  local to=""
  if [ "$1" = ">" ]; then
    to=$2
    shift 2
  fi
  local want=$1
  shift
  { printf '$ pulse-plan'; printf ' %s' "${@/#$root\//}"; [ -z "$to" ] || printf ' > %s' "$to"; } |
    sed "s|$out/|\$OUT/|g"
  printf '\n'
  local got=0
  if [ -n "$to" ]; then
    "$binary" "$@" >"$to" || got=$?
  else
    "$binary" "$@" || got=$?
  fi
  if [ "$got" -ne "$want" ]; then
    echo "walkthrough.sh: expected exit $want, got $got" >&2
    exit 1
  fi
}

echo "pulse-plan walk-through: $model on a V100 node and on a 910A server; files in \$OUT=$out"

step "1. Plan for one DGX-1 (8 x V100, NVLink) and one Atlas 800 (8 x Ascend 910A, HCCS)"
run 0 plan --model "$model_file" --cluster "$v100" -o "$out/v100.json"
run 0 plan --model "$model_file" --cluster "$a910" -o "$out/910a.json"
echo "   ... and the conventional baseline on the V100 node: P stages in a row, skips relayed"
run 0 plan --model "$model_file" --cluster "$v100" --strategy sequential --quiet \
  -o "$out/v100-sequential.json"

step "2. What changes between the two clusters: degrees, placement, moved layers, time, traffic"
run 0 diff "$out/v100.json" "$out/910a.json"
run ">" "$out/diff.json" 0 diff "$out/v100.json" "$out/910a.json" --json

step "3. A CI gate: the baseline moves skip tensors between devices, so --fail-if-more-traffic trips (exit 4)"
run ">" /dev/null 4 diff "$out/v100.json" "$out/v100-sequential.json" --fail-if-more-traffic 10

step "4. Check each plan independently against the profiles it was made from"
run 0 validate "$out/v100.json" --model "$model_file" --cluster "$v100"
run 0 validate "$out/910a.json" --model "$model_file" --cluster "$a910"
echo "   ... a plan checked against the wrong cluster is rejected (exit 1), each problem named:"
run 1 validate "$out/v100.json" --model "$model_file" --cluster "$a910"

step "5. Hand the V100 plan on: PyTorch schedule CSV (+ stage map and skip caches), Graphviz, HTML"
run 0 export "$out/v100.json" --format torch-csv -o "$out/v100.csv"
echo "   rank 0's first actions: $(head -1 "$out/v100.csv" | cut -d, -f1-8)..."
run 0 export "$out/v100.json" --format dot --model "$model_file" -o "$out/v100.dot"
run 0 export "$out/v100.json" --format html --compare "$out/v100-sequential.json" \
  -o "$out/v100.html"

step "Done. Files:"
(cd "$out" && ls -1 | sed 's/^/   /')
echo "Open \$OUT/v100.html in a browser; render the graph with: dot -Tsvg \$OUT/v100.dot -o v100.svg"
