#!/bin/bash
# The PyTorch 2.x checks of python/pulse_runtime, in one command, for a machine that has
# PyTorch 2.6 or later (and, optionally, CUDA):
#
#   scripts/torch2_check.sh OUTDIR            # PYTHON=python3 PULSE_PLAN=build/pulse-plan
#
# Runs, each under a hard timeout (nothing can hang), each recorded even when others fail:
#   1. the adapter on _PipelineScheduleRuntime, gloo CPU ranks (V pp 1/2/4, dp 2, split
#      backward, waves, the planner's waves): tests/torch/test_pipelining.py Torch2
#   2. the adapter's emulated tests under this PyTorch's autograd (Emulated)
#   3. with CUDA: the adapter on one GPU (V pp 1: both stages on one rank) and pulse-run on
#      one GPU with --dtype bfloat16 and float16 (NCCL, one rank), the example models'
#      forward + backward on CUDA
#   4. every other PyTorch test of the suite: ctest -L torch when a build tree is given
#      (BUILD_DIR=build), else the test files one by one
# Writes OUTDIR/<check>.log for each check and OUTDIR/summary.txt (one line per check:
# PASS/FAIL/SKIP/TIMEOUT, seconds, the command), and exits 0 (read the summary).
set -u
OUT=${1:?usage: scripts/torch2_check.sh OUTDIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
BIN=${PULSE_PLAN:-$ROOT/build/pulse-plan}
BUILD=${BUILD_DIR:-}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
cd "$ROOT" || exit 2

check() {  # check NAME SECONDS COMMAND...
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS rc status
  timeout -k 15 "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  case $rc in
    0) status=PASS ;;
    77) status=SKIP ;;
    124|137) status=TIMEOUT ;;
    *) status=FAIL ;;
  esac
  # unittest: every test skipped ("Ran 7 tests" ... "OK (skipped=7)") is a skip, not a pass
  local ran skipped
  ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\}.*/\1/p' "$OUT/$name.log" | tail -1)
  skipped=$(sed -n 's/^OK (skipped=\([0-9]*\)).*/\1/p' "$OUT/$name.log" | tail -1)
  if [ $rc -eq 0 ] && [ -n "$ran" ] && [ "$ran" = "$skipped" ]; then status=SKIP; fi
  printf '%-8s %5ds  %-34s %s\n' "$status" $((SECONDS - start)) "$name" "$*" | tee -a "$SUMMARY"
}

{
  echo "# $(date -u +%FT%TZ) $(uname -n)"
  "$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.device_count())' 2>&1
  "$BIN" --version 2>&1 | head -1
} | tee -a "$SUMMARY"

export GLOO_SOCKET_IFNAME=${GLOO_SOCKET_IFNAME:-lo}
T="tests/torch"
check adapter_runtime_cpu 900 "$PY" $T/test_pipelining.py --binary "$BIN" --device cpu Torch2 -v
check adapter_emulated 600 "$PY" $T/test_pipelining.py --binary "$BIN" Emulated -v

if "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  check adapter_runtime_cuda_pp1 600 "$PY" $T/test_pipelining.py --binary "$BIN" \
    --device cuda Torch2.test_v_pp1_one_rank -v
  check cuda_examples 300 "$PY" scripts/torch2_cuda_examples.py --binary "$BIN" --out "$OUT/cuda"
else
  echo "SKIP     no CUDA device: the CUDA checks did not run" | tee -a "$SUMMARY"
fi

if [ -n "$BUILD" ] && [ -d "$BUILD" ]; then
  check ctest_torch 3000 ctest --test-dir "$BUILD" -L torch --timeout 600 --output-on-failure
else
  for f in test_typing test_profile_torch test_fx_front_end; do
    case $f in
      test_typing) check $f 120 "$PY" $T/$f.py ;;
      test_fx_front_end)
        check ${f}_unet 600 "$PY" $T/$f.py --binary "$BIN" --model unet
        check ${f}_uvit 600 "$PY" $T/$f.py --binary "$BIN" --model uvit ;;
      *) check $f 600 "$PY" $T/$f.py --binary "$BIN" ;;
    esac
  done
  check runtime_pulse_pp2_dp2 600 "$PY" $T/test_runtime.py --binary "$BIN" --strategy pulse \
    --pp 2 --dp 2 --global-batch 8 --microbatch-size 2
  check runtime_pulse_pp4_dp2_split 600 "$PY" $T/test_runtime.py --binary "$BIN" \
    --strategy pulse --pp 4 --dp 2 --global-batch 8 --microbatch-size 1 --split-backward
  check runtime_sequential_pp4 600 "$PY" $T/test_runtime.py --binary "$BIN" \
    --strategy sequential --pp 4 --dp 1 --global-batch 8 --microbatch-size 1
  check runtime_direct_skip 600 "$PY" $T/test_direct_route.py --binary "$BIN"
  check pulse_run_package 1500 "$PY" $T/test_pulse_run.py --binary "$BIN" Train Zero Mismatch \
    Waves Resume
  check pulse_run_trainer 1500 "$PY" $T/test_trainer.py --binary "$BIN"
fi
echo "summary: $SUMMARY"
exit 0
