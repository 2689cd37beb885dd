#!/usr/bin/env bash
# Planning time of two pulse-plan binaries on the same commands, run alternately (3 rounds)
# so machine load falls on both alike; prints the mean of each and their ratio:
#   scripts/ab_plan_time.sh OLD_BINARY NEW_BINARY [PLAN ARGS]...
# Without PLAN ARGS: four shipped cases, three where most configurations do not fit (the
# planner then finds the smallest shortfall for each) and the default SD2 plan. A run that
# exits other than 0 (a plan) or 1 (nothing fits) stops the script with its message.
set -euo pipefail
if [ $# -lt 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then sed -n '2,7p' "$0"; exit 2; fi
for bin in "$1" "$2"; do
  [ -x "$bin" ] || { echo "ab_plan_time.sh: $bin is not an executable" >&2; exit 2; }
done
here=$(cd "$(dirname "$0")/.." && pwd)
old=$(realpath "$1") new=$(realpath "$2")
shift 2
m="$here/profiles/models" c="$here/profiles/clusters"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Times one case (its plan arguments as words) with both binaries; prints a table row.
one_case() {
  local label=$1 round who bin start code
  shift
  local -A total=([old]=0 [new]=0)
  for round in 1 2 3; do
    for who in old new; do
      bin=$old; [ "$who" = new ] && bin=$new
      start=$(date +%s%N)
      code=0
      "$bin" plan --quiet -o "$out/plan.json" "$@" >/dev/null 2>"$out/stderr" || code=$?
      total[$who]=$(( total[$who] + $(date +%s%N) - start ))
      if [ "$code" -gt 1 ]; then
        echo "ab_plan_time.sh: $bin exited $code on: $*" >&2
        cat "$out/stderr" >&2
        exit 2
      fi
    done
  done
  awk -v l="$label" -v o="${total[old]}" -v n="${total[new]}" \
    'BEGIN {printf "%-48s %7.2f s %7.2f s %6.1fx\n", l, o / 3e9, n / 3e9, o / n}'
}

printf "%-48s %9s %9s %7s\n" case old new ratio
if [ $# -gt 0 ]; then
  one_case "the given arguments" "$@"
  exit 0
fi
one_case "flux1-dev-1024 on dgx1-v100-16gb-1n" \
  --model "$m/flux1-dev-1024.json" --cluster "$c/dgx1-v100-16gb-1n.json"
one_case "svd-xt-unet-576x1024 on dgx1-v100-16gb-2n" \
  --model "$m/svd-xt-unet-576x1024.json" --cluster "$c/dgx1-v100-16gb-2n.json"
one_case "flux1-dev-1024 on atlas800-910a-1n --pp 4" \
  --model "$m/flux1-dev-1024.json" --cluster "$c/atlas800-910a-1n.json" --pp 4
one_case "sd2-unet-512 on dgx1-v100-32gb-1n" \
  --model "$m/sd2-unet-512.json" --cluster "$c/dgx1-v100-32gb-1n.json"
