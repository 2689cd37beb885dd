#!/usr/bin/env bash
# Runs the libFuzzer targets (tests/fuzz), building them first if needed:
#   scripts/fuzz.sh                      every target for 60 seconds
#   scripts/fuzz.sh --seconds 600 plan_reader_fuzz
# Options: --seconds N (per target, default 60), --build-dir DIR (default build-fuzz),
#          --jobs N (build jobs and targets fuzzed at once, default: all cores).
# Targets: model_profile_fuzz cluster_profile_fuzz plan_reader_fuzz plan_roundtrip_fuzz.
#
# Needs clang and its sanitizer/fuzzer runtimes (Debian: clang libclang-rt-14-dev; the
# script names them if missing). Each target starts from its seeds (scripts/fuzz_corpus.py:
# the shipped profiles and test plans, the golden cases' files, tests/fuzz/regressions) and
# from what earlier runs found (DIR/corpus/<target>, kept between runs). Any finding (a
# crash, a sanitizer report, a broken check, a leak, an input slower than 10 s, or 30 s
# for plan_roundtrip_fuzz, which plans a whole job; more than 2 GiB) stops that target and
# makes the script exit 1; the input is saved as DIR/findings/<target>/crash-* (or leak-,
# timeout-, oom-), and rerunning the target on that file alone reproduces it:
# DIR/tests/fuzz/<target> DIR/findings/<target>/crash-...
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build="$here/build-fuzz"
seconds=60
jobs=$(nproc 2>/dev/null || echo 2)
all_targets=(model_profile_fuzz cluster_profile_fuzz plan_reader_fuzz plan_roundtrip_fuzz)
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift ;;
    --build-dir) build=$(realpath -m "$2"); shift ;;
    --jobs) jobs="$2"; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *)
      if [[ " ${all_targets[*]} " != *" $1 "* ]]; then
        echo "fuzz.sh: unknown target $1; the targets are ${all_targets[*]}" >&2
        exit 2
      fi
      targets+=("$1") ;;
  esac
  shift
done
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")

if ! command -v clang++ >/dev/null ||
   ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz.sh: needs clang with libFuzzer: apt-get install clang libclang-rt-14-dev" >&2
  exit 2
fi

# -O1 and line tables: fast enough to fuzz, and every report has file:line; a unity build,
# to compile quickly in CI. No unit tests here (BUILD_TESTING off): this build is
# instrumented for coverage and is only for fuzzing.
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$here" -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only" -DCMAKE_UNITY_BUILD=ON \
    -DPULSE_FUZZ=ON -DBUILD_TESTING=OFF >&2
fi
cmake --build "$build" -j "$jobs" --target "${targets[@]}" >&2
/usr/bin/python3 "$here/scripts/fuzz_corpus.py" --out "$build/seeds"

# Every sanitizer report ends the run with a stack trace; UBSan's too (the build has
# -fno-sanitize-recover, these only add the trace).
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# One target: its log, and 0, or 1 with the finding saved.
fuzz_one() {
  local target=$1 corpus="$build/corpus/$1" findings="$build/findings/$1" timeout=10
  mkdir -p "$corpus" "$findings"
  # The profile and plan readers answer in milliseconds; a whole plan, with its sharded
  # alternatives, takes up to about 4 s per seed here (tests/fuzz/plan_roundtrip_fuzz.cpp).
  [ "$target" = plan_roundtrip_fuzz ] && timeout=30
  # The first folder is the one libFuzzer adds new inputs to; the seeds are only read.
  "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 \
    -dict="$build/seeds/$target.dict" -artifact_prefix="$findings/" -print_final_stats=1 \
    "$corpus" "$build/seeds/$target" >"$build/$target.log" 2>&1
}

# Each libFuzzer process uses one core: the targets run --jobs at a time (each for --seconds),
# and their reports are printed in the targets' order once they are all done.
failed=()
declare -A pid_of
running=()
for target in "${targets[@]}"; do
  while [ ${#running[@]} -ge "$jobs" ]; do
    wait -n || true
    alive=()
    for t in "${running[@]}"; do kill -0 "${pid_of[$t]}" 2>/dev/null && alive+=("$t"); done
    running=("${alive[@]}")
  done
  echo "fuzz.sh: $target for ${seconds}s" >&2
  fuzz_one "$target" &
  pid_of[$target]=$!
  running+=("$target")
done
for target in "${targets[@]}"; do
  if wait "${pid_of[$target]}"; then
    grep -E "^#[0-9]+.*(DONE|INITED)|^stat::(number_of_executed_units|peak_rss)" \
      "$build/$target.log" | sed "s/^/$target: /" >&2 || true
  else
    tail -n 60 "$build/$target.log" >&2
    echo "fuzz.sh: $target: FINDING, saved in $build/findings/$target/ (log: $build/$target.log)" >&2
    failed+=("$target")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: no findings in ${targets[*]} (${seconds}s each)" >&2
