#!/usr/bin/env bash
# Planning time of two pulse-plan binaries on the same commands, run alternately (3 rounds)
# so machine load falls on both alike; prints the mean of each and their ratio:
#   scripts/ab_plan_time.sh OLD_BINARY NEW_BINARY [PLAN ARGS]...
# Without PLAN ARGS: four shipped cases, three where most configurations do not fit (the
# planner then finds the smallest shortfall for each) and the default SD2 plan.
set -euo pipefail
if [ $# -lt 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then sed -n '2,6p' "$0"; exit 2; fi
here=$(cd "$(dirname "$0")/.." && pwd)
old=$(realpath "$1") new=$(realpath "$2")
shift 2
m="$here/profiles/models" c="$here/profiles/clusters"
if [ $# -gt 0 ]; then
  cases=("$*")
else
  cases=("--model $m/flux1-dev-1024.json --cluster $c/dgx1-v100-16gb-1n.json"
         "--model $m/svd-xt-unet-576x1024.json --cluster $c/dgx1-v100-16gb-2n.json"
         "--model $m/flux1-dev-1024.json --cluster $c/atlas800-910a-1n.json --pp 4"
         "--model $m/sd2-unet-512.json --cluster $c/dgx1-v100-32gb-1n.json")
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf "%-60s %9s %9s %7s\n" case old new ratio
for args in "${cases[@]}"; do
  declare -A total=([old]=0 [new]=0)
  for round in 1 2 3; do
    for who in old new; do
      bin=$old; [ "$who" = new ] && bin=$new
      start=$(date +%s%N)
      # shellcheck disable=SC2086  # the case is a word list
      "$bin" plan --quiet -o "$out/plan.json" $args >/dev/null 2>&1 || true
      total[$who]=$(( total[$who] + $(date +%s%N) - start ))
    done
  done
  label=$(echo "$args" | sed -E "s|$m/||; s|$c/||; s|\.json||g; s|--model ||; s|--cluster |on |")
  awk -v l="$label" -v o="${total[old]}" -v n="${total[new]}" \
    'BEGIN {printf "%-60s %7.2f s %7.2f s %6.1fx\n", l, o / 3e9, n / 3e9, o / n}'
done
