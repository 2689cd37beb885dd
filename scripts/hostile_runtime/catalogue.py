"""The cases, by class (cases.py has the helpers). Indices refer to the base plans as the
planner writes them: "v" is W2-placed, 8 stages on devices [0, 1, 1, 0, 0, 1, 1, 0] with
main transfers 0-3 and skip transfers from 4 on, 2 microbatches per replica, 8 ranks; the
catalogue's main checks that the planner still writes them so before any case runs."""
import os
import re

from .cases import (MAIN, DELETE, Case, Sparse, at, each, literal, nested, path, raw, swap_ops,
                    twice, widened)

HUGE = 10 ** 30


def file_cases():
    c = "file"
    yield Case(c, "dev-zero", plan="/dev/zero", message=r"/dev/zero: not JSON: byte 0x00")
    yield Case(c, "dev-urandom", plan="/dev/urandom", message=r"/dev/urandom: not JSON")
    yield Case(c, "missing-file", plan="nope.json", message=r"nope\.json: cannot read")
    yield Case(c, "a-directory", plan=".", message=r"\.: cannot read")
    yield Case(c, "empty", plan=raw(lambda t: b""), message=r"bad\.json: not JSON")
    yield Case(c, "truncated", plan=raw(lambda t: t[:len(t) // 2]),
               message=r"bad\.json: not JSON: .* at line \d+ column \d+")
    yield Case(c, "trailing-garbage", plan=raw(lambda t: t + b"\n}"),
               message=r"bad\.json: not JSON: Extra data")
    yield Case(c, "not-utf8", plan=raw(lambda t: t.replace(b'"pulse"', b'"\xff\xfe"', 1)),
               message=r"bad\.json: not JSON: not UTF-8 at byte offset \d+")
    yield Case(c, "utf16", plan=raw(lambda t: t.decode().encode("utf-16")),
               message=r"bad\.json: not JSON: byte 0x00")
    yield Case(c, "control-byte-in-string", plan=raw(lambda t: t.replace(b'"pulse"',
                                                                       b'"pu\x01se"', 1)),
               message=r"bad\.json: not JSON: byte 0x01")
    yield Case(c, "top-level-array", plan=raw(lambda t: b"[" + t + b"]"),
               message=r"bad\.json: not a pulse\.plan/v2 or pulse\.plan/v1 plan \(\$\.schema\)")
    yield Case(c, "schema-v0", plan=at("schema", "pulse.plan/v0"),
               message=r"bad\.json: not a pulse\.plan/v2 or pulse\.plan/v1 plan \(\$\.schema\)")
    # A 129 MiB file refused by its size, unread; a 129 MiB stream after 128 MiB of it.
    yield Case(c, "over-the-size-limit", plan=Sparse(129 << 20),
               message=r"bad\.json: the file has 135266304 bytes; a plan pulse-run reads has "
                       r"at most 134217728 \(128 MiB\)")
    yield Case(c, "stream-over-the-size-limit", plan="/dev/stdin", stdin=b" " * (129 << 20),
               message=r"/dev/stdin: more than 134217728 bytes")


def syntax_cases():
    c = "syntax"
    for token in ("NaN", "Infinity", "-Infinity", "1e999", "-1e999"):
        yield Case(c, f"{token}-iteration", plan=literal("predicted.iteration_s", token),
                   message=path("$.predicted.iteration_s"))
    yield Case(c, "NaN-op-start", plan=literal("schedule.0.ops.3.start_s", "NaN"),
               message=path("$.schedule[0].ops[3].start_s"))
    yield Case(c, "Infinity-world", plan=literal("rank_map.world_size", "Infinity"),
               message=path("$.rank_map.world_size"))
    yield Case(c, "int-beyond-2^53", plan=at("transfers.0.forward_bytes_per_microbatch."
                                             "activation", 2 ** 53 + 1),
               message=path("$.transfers[0].forward_bytes_per_microbatch.activation"))
    yield Case(c, "int-of-30-digits", plan=literal("parallelism.pp", str(HUGE)),
               message=path("$.parallelism.pp"))
    yield Case(c, "int-of-5000-digits", plan=literal("rank_map.world_size", "9" * 5000),
               message=path("$.rank_map.world_size"))
    yield Case(c, "key-twice", plan=twice("parallelism", "pp", 4),
               message=path("$.parallelism.pp") + ".*twice")
    yield Case(c, "nested-100-deep", plan=nested("comm", 100),
               message=path("$.comm[0][0]") + ".*nested more than 64 deep")
    yield Case(c, "nested-100000-deep", plan=nested("options.memory", 100000),
               message=path("$.options.memory[0]") + ".*nested more than 64 deep")
    yield Case(c, "bomb-alone", plan=raw(lambda t: b"[" * 200000 + b"]" * 200000),
               message=r"bad\.json: \$\[0\]\[0\].*nested more than 64 deep")


def type_cases():
    c = "type"
    for where, value, p in (
            ("stages.1.layers", "enc0", "$.stages[1].layers"),
            ("stages.0.layers", [], "$.stages[0].layers"),
            ("stages.0.layers", [1, 2], "$.stages[0].layers[0]"),
            ("stages.2", "stage", "$.stages[2]"),
            ("stages", {}, "$.stages"),
            ("rank_map.pipeline_groups", "0,1", "$.rank_map.pipeline_groups"),
            ("rank_map.pipeline_groups.0", "01", "$.rank_map.pipeline_groups[0]"),
            ("rank_map.pipeline_groups.0.0", "0", "$.rank_map.pipeline_groups[0][0]"),
            ("rank_map.pipeline_groups.0.0", -1, "$.rank_map.pipeline_groups[0][0]"),
            ("rank_map.pipeline_groups.0.0", 0.5, "$.rank_map.pipeline_groups[0][0]"),
            ("rank_map.data_parallel_groups.1", {}, "$.rank_map.data_parallel_groups[1]"),
            ("rank_map.ranks", {}, "$.rank_map.ranks"),
            ("rank_map.ranks.3", 3, "$.rank_map.ranks[3]"),
            ("rank_map.ranks.3.rank", True, "$.rank_map.ranks[3].rank"),
            ("rank_map.world_size", "8", "$.rank_map.world_size"),
            ("rank_map.world_size", None, "$.rank_map.world_size"),
            ("rank_map", [], "$.rank_map"),
            ("parallelism", [], "$.parallelism"),
            ("parallelism.pp", "2", "$.parallelism.pp"),
            ("parallelism.pp", 2.5, "$.parallelism.pp"),
            ("parallelism.pp", True, "$.parallelism.pp"),
            ("parallelism.pp", None, "$.parallelism.pp"),
            ("parallelism.num_microbatches", -3, "$.parallelism.num_microbatches"),
            ("schedule", {}, "$.schedule"),
            ("schedule.0.ops", "FB", "$.schedule[0].ops"),
            ("schedule.0.ops.0", [], "$.schedule[0].ops[0]"),
            ("schedule.0.ops.0.op", "X", "$.schedule[0].ops[0].op"),
            ("schedule.0.ops.0.stage", "0", "$.schedule[0].ops[0].stage"),
            ("schedule.0.ops.0.mb", -1, "$.schedule[0].ops[0].mb"),
            ("schedule.1.device", "1", "$.schedule[1].device"),
            ("transfers.0.from_stage", "0", "$.transfers[0].from_stage"),
            ("transfers.0.forward_bytes_per_microbatch.activation", -1,
             "$.transfers[0].forward_bytes_per_microbatch.activation"),
            ("transfers.4.skips", "down2_res->up2_res0", "$.transfers[4].skips"),
            ("transfers.0.carried", "temb", "$.transfers[0].carried"),
            ("skips.0.bytes_per_sample", 0, "$.skips[0].bytes_per_sample"),
            ("skips.0.producer", 5, "$.skips[0].producer"),
            ("carried.0.needs_gradient", "yes", "$.carried[0].needs_gradient"),
            ("options", None, "$.options"),
            ("options.memory.zero_stage", 7, "$.options.memory.zero_stage"),
            ("options.memory.precision", "fp8", "$.options.memory.precision"),
            ("options.split_backward", "no", "$.options.split_backward"),
            ("predicted.iteration_s", 0, "$.predicted.iteration_s"),
            ("predicted.iteration_s", "fast", "$.predicted.iteration_s")):
        yield Case(c, f"{where}={value!r}"[:60], plan=at(where, value), message=path(p))
    for where in ("schedule", "rank_map", "stages", "parallelism", "predicted", "options",
                  "rank_map.world_size", "rank_map.ranks", "rank_map.pipeline_groups",
                  "stages.0.layers", "skips.0.route", "schedule.0.ops.0.mb",
                  "parallelism.num_stages"):
        p = "$." + where.replace(".0.", "[0].").replace(".0", "[0]")
        yield Case(c, f"missing-{where}", plan=at(where, DELETE), message=path(p) + ".*missing")


def semantic_cases():
    c = "semantic"
    for where, value, p, why in (
            ("rank_map.world_size", 0, "$.rank_map.world_size", ">= 1"),
            ("rank_map.world_size", -1, "$.rank_map.world_size", ">= 1"),
            ("rank_map.world_size", 728, "$.rank_map.world_size", "pp 2 x dp 4 = 8"),
            ("rank_map.world_size", 10 ** 9, "$.rank_map.world_size", "pp 2 x dp 4 = 8"),
            ("parallelism.pp", 0, "$.parallelism.pp", ">= 1"),
            ("parallelism.pp", 5000, "$.parallelism.pp", "1 to 1024"),
            ("parallelism.num_microbatches", 10 ** 6, "$.parallelism.num_microbatches",
             "1 to 4096"),
            ("parallelism.global_batch", 7, "$.parallelism.global_batch", "= 8"),
            ("parallelism.num_stages", 6, "$.stages", "num_stages = 6"),
            ("stages.1.id", 0, "$.stages[1].id", "expected 1"),
            ("stages.0.device", 2, "$.stages[0].device", "0 to 1"),
            ("stages.3.layers.0", "embed", "$.stages[3].layers[0]", "in stage 0 too"),
            ("stages.1.recomputed", ["head"], "$.stages[1].recomputed", "layers of the stage"),
            ("skips.0.producer", "nope", "$.skips[0].producer", "a layer of the plan"),
            ("skips.0.producer_stage", 1, "$.skips[0].producer_stage", "expected 0"),
            ("skips.1.name", "down2_res->up2_res0", "$.skips[1].name", "too"),
            ("skips.0.route", "teleport", "$.skips[0].route", "one of"),
            ("skips.0.route", "local", "$.skips[0].route", "a local skip"),
            ("carried.0.producer", "nope", "$.carried[0].producer", "a layer"),
            ("transfers.0.from_stage", 99, "$.transfers[0].from_stage", "0 to 7"),
            ("transfers.0.to_device", 0, "$.transfers[0].to_device", "expected 1"),
            ("transfers.1.to_stage", 4, "$.transfers[1].to_stage", "expected 3"),
            ("transfers.4.skips", ["nope"], "$.transfers[4].skips[0]", "a name of $.skips"),
            ("transfers.0.carried", ["nope"], "$.transfers[0].carried[0]", "$.carried"),
            ("transfers.1", DELETE, "$.transfers", "no main transfer after stage 2"),
            ("transfers.4", DELETE, "$.skips[0]", "no transfer to device 1 lists it"),
            ("schedule.1", DELETE, "$.schedule", "pp = 2 devices"),
            ("schedule.1.device", 0, "$.schedule[1].device", "expected 1"),
            ("schedule.0.ops.0.stage", 1, "$.schedule[0].ops[0]", "runs on device 1"),
            ("schedule.0.ops.0.stage", 8, "$.schedule[0].ops[0].stage", "0 to 7"),
            ("schedule.0.ops.1.mb", 0, "$.schedule[0].ops[1]", "listed twice"),
            ("schedule.0.ops.0.mb", 2, "$.schedule[0].ops[0].mb", "0 to 1"),
            ("schedule.0.ops.7.op", "I", "$.schedule[0].ops[7].op", "does not split"),
            ("schedule.0.ops.15", DELETE, "$.schedule[0].ops", "B(stage 0, mb 1) is missing"),
            ("rank_map.ranks.7.rank", 8, "$.rank_map.ranks[7].rank", "0 to 7"),
            ("rank_map.ranks.7.rank", 0, "$.rank_map.ranks[7].rank", "too"),
            ("rank_map.ranks.7.dp_index", 4, "$.rank_map.ranks[7].dp_index", "0 to 3"),
            ("rank_map.ranks.7.pipeline_device", 0, "$.rank_map.ranks[7]", "too"),
            ("rank_map.ranks.7", DELETE, "$.rank_map.ranks", "8 ranks"),
            ("rank_map.pipeline_groups.0", [1, 0], "$.rank_map.pipeline_groups[0]",
             "expected [0, 1]"),
            ("rank_map.pipeline_groups.0", [0, 0], "$.rank_map.pipeline_groups[0]",
             "expected [0, 1]"),
            ("rank_map.pipeline_groups.0", [0, 1, 2], "$.rank_map.pipeline_groups[0]",
             "expected [0, 1]"),
            ("rank_map.data_parallel_groups.1", DELETE, "$.rank_map.data_parallel_groups",
             "2 groups"),
            ("rank_map.data_parallel_groups.0", list(range(100000)),
             "$.rank_map.data_parallel_groups[0]", "expected [0, 2, 4, 6]")):
        yield Case(c, f"{where}={value!r}"[:60] if value is not DELETE else f"drop-{where}",
                   plan=at(where, value), message=path(p) + ".*" + re.escape(why))
    yield Case(c, "main-transfer-twice", plan=each(
        at("transfers.1.from_stage", 0), at("transfers.1.to_stage", 1),
        at("transfers.1.from_device", 0), at("transfers.1.to_device", 1)),
        message=path("$.transfers[1]") + ".*second main transfer after stage 0")
    yield Case(c, "stages-all-on-device-0",
               plan=each(*(at(f"stages.{s}.device", 0) for s in range(8))),
               message=path("$.stages") + ".*device 1 runs no stage")
    yield Case(c, "pp-times-dp-beyond-2^20", plan=at("parallelism.dp", 600000),
               message=path("$.parallelism.dp") + ".*at most 1048576")
    yield Case(c, "backward-before-forward", plan=swap_ops(0, 6, 7),
               message=path("$.schedule[0].ops[6]") + ".*listed after it on this device")
    yield Case(c, "devices-wait-for-each-other", plan=swap_ops(0, 0, 2),
               message=path("$.schedule[0].ops[0]") + ".*would wait forever")
    yield Case(c, "weight-before-input-gradient", base="split", plan=swap_ops(0, 7, 8),
               message=path("$.schedule[0].ops[7]") + r".*needs I\(stage 7, mb 0\)")
    yield Case(c, "direct-skip-without-transfer", base="direct", plan=at("transfers.1", DELETE),
               message=path("$.skips[2]") + ".*no transfer")


def launch_cases():
    """The plan is fine; the launch is not (or is too large for one host)."""
    c = "launch"
    yield Case(c, "control-v-reaches-the-launch-check", args=["--nproc", "1"], fresh=True,
               message=path("$.rank_map.world_size") + ".*8 ranks, --nproc 1")
    for base in ("direct", "split", "dp1"):
        yield Case(c, f"control-{base}-reaches-the-launch-check", base=base, fresh=True,
                   args=["--nproc", "1"], message=path("$.rank_map.world_size") + ".*--nproc 1")
    yield Case(c, "4096-consistent-ranks", plan=widened(2048),
               message=path("$.rank_map.world_size") + ".*4096 ranks; pulse-run starts at most")
    yield Case(c, "torchrun-world-differs", env={"RANK": "0", "WORLD_SIZE": "4"}, unset_env=(),
               message=path("$.rank_map.world_size") + ".*WORLD_SIZE=4")
    yield Case(c, "torchrun-rank-not-a-number", env={"RANK": "x", "WORLD_SIZE": "8"},
               unset_env=(), message=r"environment RANK='x'")
    yield Case(c, "torchrun-rank-beyond-world", env={"RANK": "8", "WORLD_SIZE": "8"},
               unset_env=(), message=r"environment RANK=8: expected an integer from 0 to 7")
    yield Case(c, "torchrun-world-0", env={"RANK": "0", "WORLD_SIZE": "0"}, unset_env=(),
               message=r"environment WORLD_SIZE=0")
    yield Case(c, "rank-beyond-world", args=["--rank", "8", "--master-port", "29500"],
               message=r"--rank 8: the plan's ranks are 0 to 7")
    yield Case(c, "nproc-differs", args=["--nproc", "3"],
               message=path("$.rank_map.world_size") + ".*--nproc 3")
    # The whole run within --timeout: the ranks start and are killed at 5 s (or, on a slow
    # machine, PyTorch's import alone outlasts it and none start); exit 1, one line.
    yield Case(c, "own-timeout", base="dp1", args=["--timeout", "5", "--iterations",
                                                    "1000000", "--quiet"],
               expect=1, message=r"^pulse-run: timed out after 5 s \(--timeout\)",
               max_processes=3, fresh=True)


def option_cases():
    c = "options"
    for args, msg in (
            (["--threads", "0"], "--threads: expected an integer from 1 to"),
            (["--threads", "-1"], "--threads"), (["--threads", str(HUGE)], "--threads"),
            (["--threads", "x"], "--threads"),
            (["--iterations", "0"], "--iterations"), (["--iterations", "-5"], "--iterations"),
            (["--iterations", str(HUGE)], "--iterations"),
            (["--timeout", "0"], "--timeout"), (["--timeout", "-1"], "--timeout"),
            (["--timeout", "nan"], "--timeout"), (["--timeout", "inf"], "--timeout"),
            (["--timeout", "1e300"], "--timeout"),
            (["--seed", "-1"], "--seed"), (["--seed", str(2 ** 64)], "--seed"),
            (["--lr", "nan"], "--lr"), (["--lr", "-1"], "--lr"), (["--momentum", "2"], "--momentum"),
            (["--checkpoint-every", "0"], "--checkpoint-every"),
            (["--master-port", "0"], "--master-port"), (["--master-port", "70000"], "--master-port"),
            (["--master-addr", ""], "--master-addr"),
            (["--rank", "-1"], "--rank"), (["--rank", "0"], "--rank needs --master-port"),
            (["--nproc", "0"], "--nproc"), (["--nproc", str(10 ** 6)], "--nproc"),
            (["--rank", "0", "--master-port", "1", "--nproc", "2"], "--nproc"),
            (["--resume"], "--resume needs --checkpoint-dir"),
            (["--precision", "fp8"], "--precision"), (["--dtype", "int8"], "--dtype"),
            (["--precision", "fp64", "--dtype", "float64"], "give one"),
            (["--zero", "9"], "--zero"), (["--optimizer", "lion"], "--optimizer"),
            (["--bogus"], "unrecognized arguments: --bogus"),
            (["--model", "nofile.py:build"], "--model 'nofile.py:build': no file"),
            (["--model", "examples/small_unet.py"], "expected FILE.py:FUNCTION"),
            (["--data", "data.txt:batches"], "--data")):
        yield Case(c, " ".join(args)[:60], args=args, message=f"^pulse-run: .*{msg}")
    yield Case(c, "no-plan-option", plan="", message=r"^pulse-run: .*--plan")


def profile_cases():
    c = "pulse-profile"
    for args, msg in (
            (["--sizes", "1,a"], "--sizes"), (["--sizes", "2,1"], "--sizes"),
            (["--sizes", "0"], "--sizes"), (["--sizes", "1,,2"], "--sizes"),
            (["--sizes", str(2 ** 21)], "--sizes"),
            (["--sizes", ",".join(str(i) for i in range(1, 100))], "--sizes"),
            (["--threads", "0"], "--threads"), (["--concurrent", "0"], "--concurrent"),
            (["--concurrent", str(10 ** 6)], "--concurrent"), (["--repeats", "0"], "--repeats"),
            (["--warmup", "-1"], "--warmup"), (["--max-step-deviation", "1"], "deviation"),
            (["--max-step-deviation", "nan"], "deviation"),
            (["--max-small-batch-ratio", "0.5"], "ratio"),
            (["--max-stamp-overhead", "0"], "overhead"), (["--seed", "-1"], "--seed"),
            (["-o", "nodir/p.json"], "-o"), (["-o", "."], "-o"), (["--name", ""], "--name"),
            (["--device-type", "a\nb"], "--device-type"),
            (["--clock", "thread", "--threads", "2"], "--clock thread"),
            (["--model", "nofile.py:build"], "no file"),
            (["--precision", "fp64", "--dtype", "float64"], "give one"),
            (["--max-inversion", "0.9"], "--max-inversion"),
            (["--strict", "--keep-failed"], "--keep-failed")):
        yield Case(c, " ".join(args)[:60], command="profile", args=args,
                   message=f"^pulse-profile: .*{msg}")


def export_cases():
    c = "torchtitan"
    yield Case(c, "plan-dev-zero", command="torchtitan", plan="/dev/zero",
               message=r"^pulse-torchtitan: /dev/zero: not JSON")
    yield Case(c, "world-size-0", command="torchtitan", plan=at("rank_map.world_size", 0),
               message=r"^pulse-torchtitan: " + path("$.rank_map.world_size"))
    yield Case(c, "csv-dev-zero", command="torchtitan", base="direct", args=["--csv", "/dev/zero"],
               message=r"^pulse-torchtitan: /dev/zero: not CSV")
    yield Case(c, "csv-not-actions", command="torchtitan", base="direct", args=["--csv", "bad.csv"],
               files={"bad.csv": b"x,y\nzz\n"},
               message=r"^pulse-torchtitan: the CSV holds")
    yield Case(c, "no-out-option", command="torchtitan", args=["-o"],
               message=r"^pulse-torchtitan: .*-o")
    c = "adapter"
    # examples/torch_pipelining.py imports PyTorch first: one case, the host limit it shares.
    yield Case(c, "4096-consistent-ranks", command="adapter", plan=widened(2048),
               message=r"^torch_pipelining: " + path("$.rank_map.world_size") +
               ".*pulse-run starts at most")


# A model of the DiT whose heads (3) the plan's Ulysses degree (2) does not divide; its blocks
# and their names are the example's.
DIT3 = b"""import sys
sys.path.insert(0, "%s")
import torch
from small_dit import SmallDiT
def build(seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    return SmallDiT(size=8, width=24, heads=3).to(dtype)
""" % os.path.join(MAIN, "examples").encode()


def sequence_cases():
    """Sequence-parallel plans (base "seq": Ulysses 2, 1 rank of 2 processes) that do not
    hold together, and models that cannot run them; the runtimes that run none."""
    c = "sequence"
    yield Case(c, "control-seq-reaches-the-launch-check", base="seq", fresh=True,
               args=["--nproc", "1"], message=path("$.rank_map.world_size x "
                                                   "$.parallelism.sequence.degree")
               + ".*the plan has 2 ranks, --nproc 1")
    yield Case(c, "torchrun-world-is-the-rank-map's", base="seq", unset_env=(),
               env={"RANK": "0", "WORLD_SIZE": "1"}, message=r"the plan has 2 ranks, "
               r"torchrun started WORLD_SIZE=1")
    for name, value, p in (
            ("group-of-one", [[0]], "$.rank_map.sequence_groups[0]"),
            ("group-reordered", [[1, 0]], "$.rank_map.sequence_groups[0]"),
            ("group-elsewhere", [[2, 3]], "$.rank_map.sequence_groups[0]"),
            ("groups-beyond-world-size", [[0, 1], [2, 3]], "$.rank_map.sequence_groups")):
        yield Case(c, name, base="seq", plan=at("rank_map.sequence_groups", value),
                   message=path(p) + r".*expected")
    yield Case(c, "groups-missing", base="seq", plan=at("rank_map.sequence_groups", DELETE),
               message=path("$.rank_map") + ".*expected sequence_groups")
    yield Case(c, "groups-without-a-layout", plan=at("rank_map.sequence_groups",
                                                       [[r] for r in range(8)]),
               message=path("$.rank_map.sequence_groups") + ".*expected none")
    yield Case(c, "degree-not-ulysses-x-ring", base="seq",
               plan=at("parallelism.sequence.degree", 3),
               message=path("$.parallelism.sequence") + ".*degree = ulysses x ring")
    yield Case(c, "ring-layout-in-ulysses-groups", base="seq",
               plan=at("parallelism.sequence", {"ulysses": 2, "ring": 2, "degree": 4}),
               message=path("$.rank_map.sequence_groups[0]") + r".*expected \[0, 1, 2, 3\]")
    yield Case(c, "control-seqpp2-reaches-the-launch-check", base="seqpp2", fresh=True,
               args=["--nproc", "2"], message=path("$.rank_map.world_size x "
                                                   "$.parallelism.sequence.degree")
               + ".*the plan has 4 ranks, --nproc 2")
    yield Case(c, "model-without-the-protocol", base="seq",
               message=r"--model .*small_unet\.py:build_test: SmallUNet has no "
               r"set_sequence_parallel\(\)")
    yield Case(c, "heads-not-divided", base="seq", files={"dit3.py": DIT3},
               args=["--model", "dit3.py:build"],
               message=r"--model dit3\.py:build: Ulysses degree 2 does not divide the 3 heads "
               r"of block 'block0'")
    dit = ["--model", os.path.join(MAIN, "examples", "small_dit.py") + ":build_test"]
    yield Case(c, "adapter-runs-no-sequence", command="adapter", base="seq", args=dit,
               message=r"^torch_pipelining: bad\.json: \$\.parallelism\.sequence: the "
               r"pipelining adapter runs no sequence parallelism")
    yield Case(c, "torchtitan-exports-no-sequence", command="torchtitan", base="seq", args=dit,
               message=path("$.parallelism.sequence") + ".*not exported to torchtitan")


def frozen_cases():
    """Plans of the example with frozen encoders (base "frozen": pp 2, encoded before the
    step; "buckets": two buckets) whose frozen or buckets section the model cannot run."""
    c = "frozen"
    frozen = ["--model", os.path.join(MAIN, "examples", "small_frozen.py") + ":build_test"]
    yield Case(c, "component-the-model-lacks", base="frozen", args=frozen,
               plan=at("frozen.components.0", "clip"),
               message=path("$.frozen.components[0]") + ".*'clip' is not one the model provides")
    yield Case(c, "model-without-frozen-parts", base="frozen",
               message=path("$.frozen.components[0]") + ".*'vae' is not one the model "
               r"provides \(none\)")
    yield Case(c, "a-part-the-plan-does-not-list", base="frozen", args=frozen,
               plan=at("frozen.components", ["vae"]),
               message=path("$.frozen.components") + ".*lacks the model's frozen component "
               "'text'")
    yield Case(c, "no-frozen-section", base="frozen", args=frozen, plan=at("frozen", DELETE),
               message=path("$.frozen") + ".*missing, but the model has frozen components")
    yield Case(c, "op-of-a-component-the-model-lacks", base="frozen", args=frozen,
               plan=at("frozen.ops.0.component", "clip"),
               message=path("$.frozen.ops[0].component") + ".*'clip'")
    yield Case(c, "op-on-a-device-beyond-pp", base="frozen", args=frozen,
               plan=at("frozen.ops.0.device", 2),
               message=path("$.frozen.ops[0].device") + ".*below 2, got 2")
    yield Case(c, "op-beyond-the-samples", base="frozen", args=frozen,
               plan=at("frozen.ops.0.samples", 5),
               message=path("$.frozen.ops[0]") + ".*exceed the pipeline's 4")
    yield Case(c, "cached-without-a-data-hook", base="frozen", args=frozen,
               plan=at("frozen.placement", "cached"),
               message=path("$.frozen.placement") + ".*give a --data hook")
    yield Case(c, "adapter-runs-no-frozen-encoders", command="adapter", base="frozen",
               args=frozen, message=r"^torch_pipelining: bad\.json: \$\.frozen: the pipelining "
               r"adapter runs no frozen encoders")
    yield Case(c, "adapter-runs-no-buckets", command="adapter", base="buckets", args=frozen,
               plan=at("frozen", DELETE), message=r"^torch_pipelining: bad\.json: "
               r"\$\.buckets: the pipelining adapter runs one shape")
    yield Case(c, "bucket-microbatching-not-the-global-batch", base="buckets", args=frozen,
               plan=at("buckets.rows.1.num_microbatches", 3),
               message=path("$.buckets.rows[1]") + ".*is not the global batch 8")


PARTS = (file_cases, syntax_cases, type_cases, semantic_cases, launch_cases, option_cases,
         profile_cases, export_cases, sequence_cases, frozen_cases)


def all_cases():
    return [case for part in PARTS for case in part()]
