"""pulse-profile: measure a PyTorch model into a pulse.model/v1 profile.

    pulse-profile --model examples/small_unet.py:build --sizes 1,2,4,8 \
        -o profiles/models/small-unet-cpu.json

For every block and microbatch size it measures, on CUDA if present and else on the CPU:
forward time, backward time (the block alone, fed the gradient its outputs really get in
training), parameters, the bytes autograd saves for the block's backward, and the bytes of
its main-path output, of the skip tensors it produces and of the carried tensors it makes.
The model is a block-list model or any traceable nn.Module, which the torch.fx front end
splits into layers (models.py, docs/torch.md). scripts/profile_torch.py runs this too.

Timing: every block is warmed up at every microbatch size before anything is timed, and
the timed repeats visit the sizes in a rotating order, so one-time costs (allocator growth,
kernel selection, cold caches) and drift in the machine's load fall on no size in
particular. A block whose per-sample time (forward + backward) at a smaller size is more
than --max-small-batch-ratio times that at the next larger size is flagged in the
profile's provenance (or, with --strict, refused). --concurrent N runs N-1 copies of the
training step beside the measurement, as N ranks per host contend in the run.
"""

import argparse
import json
import math
import multiprocessing
import os
import platform
import statistics
import sys
import time

import torch

from . import blocklist, models

DTYPES = {"float32": (torch.float32, "fp32"), "float64": (torch.float64, "fp64"),
          "bfloat16": (torch.bfloat16, "bf16"), "float16": (torch.float16, "fp16")}


def parse_args(argv):
    p = argparse.ArgumentParser(prog="pulse-profile", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="FILE.py:FUNCTION that builds the model")
    p.add_argument("--sizes", default="1,2,4,8", help="microbatch sizes, increasing")
    p.add_argument("--warmup", type=int, default=2,
                   help="untimed runs of every block at every size before any timing")
    p.add_argument("--repeats", type=int, default=5,
                   help="timed runs per block and size, sizes interleaved; the median is kept")
    p.add_argument("--min-run-ms", type=float, default=2.0,
                   help="repeat a short block back to back within one timed run until the "
                   "run's forward + backward lasts about this long (default 2 ms)")
    p.add_argument("--concurrent", type=int, default=1, metavar="N",
                   help="measure while N-1 other processes run the same training step (N ranks "
                   "per host; default 1: alone)")
    p.add_argument("--max-small-batch-ratio", type=float, default=1.2,
                   help="flag a block whose per-sample time at a microbatch size exceeds this "
                   "times its per-sample time at the next larger size (default 1.2)")
    p.add_argument("--strict", action="store_true",
                   help="refuse (exit 1, write nothing) instead of flagging such a block, or a "
                   "block whose time at a size exceeds that ratio times its time at the next")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--device-type", help="device type name in the profile (default: CPU, "
                   "or the CUDA device name)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: one core per pipeline rank)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--name", help="profile name (default: from the model file name)")
    p.add_argument("-o", "--output", help="write here instead of stdout")
    args = p.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if any(b < 1 for b in args.sizes) or args.sizes != sorted(set(args.sizes)):
        p.error("--sizes must be strictly increasing positive integers")
    if args.repeats < 1 or args.warmup < 0:
        p.error("--repeats must be >= 1 and --warmup >= 0")
    if args.concurrent < 1:
        p.error("--concurrent must be >= 1")
    if args.max_small_batch_ratio < 1:
        p.error("--max-small-batch-ratio must be >= 1")
    return args


def pick_device(choice):
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("pulse-profile: --device cuda but CUDA is not available")
    return torch.device(choice)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def device_description(device):
    if device.type == "cuda":
        return "CUDA", torch.cuda.get_device_name(device)
    return "CPU", f"{cpu_model()}, {torch.get_num_threads()} torch thread(s)"


def storage_key(t):
    # untyped_storage() exists from PyTorch 2.0; 1.13 has storage() with the same data_ptr.
    storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return storage.data_ptr(), storage.nbytes()


class BlockRecord:
    """One block's real inputs and output gradients from a chained forward/backward."""

    def __init__(self, unit, h_in, env_in):
        self.unit, self.h_in, self.env_in = unit, h_in, env_in
        self.out_h, self.outputs, self.grads = None, None, None

    def fresh_inputs(self):
        h = self.h_in if not self.h_in.requires_grad else blocklist.detached_leaf(self.h_in)
        env = {k: (blocklist.detached_leaf(v) if v.requires_grad else v)
               for k, v in self.env_in.items()}
        return h, env

    def run_forward(self):
        return self.unit.forward(*self.fresh_inputs())

    def backward_pairs(self, out_h, outputs):
        tensors, grads = [], []
        for key, grad in self.grads.items():
            if grad is not None:
                tensors.append(out_h if key is None else outputs[key])
                grads.append(grad)
        return tensors, grads


def chain_pass(model, batch, size):
    """Run the blocks one by one, each on detached copies of its inputs, then backward in
    reverse order; record every block's inputs and the gradients of its outputs."""
    records, carried, skips = [], {}, {}
    h = model.first_input(batch)
    for i in range(len(model.blocks)):
        unit = blocklist.BlockRange(model, i, i)
        env = dict(batch)
        env.update({k: blocklist.detached_leaf(v) for k, v in carried.items()})
        env.update({k: blocklist.detached_leaf(skips[k]) for k in unit.skips_in})
        rec = BlockRecord(unit, h if i == 0 else blocklist.detached_leaf(h), env)
        rec.out_h, rec.outputs = unit.forward(rec.h_in, rec.env_in)
        for name in unit.carried_out:
            carried[name] = rec.outputs[name]
        for name in unit.skips_out:
            skips[name] = rec.outputs[name]
        h = rec.out_h
        records.append(rec)
    loss = model.loss_sum(records[-1].out_h, batch) / size
    records[-1].grads = {None: torch.autograd.grad(loss, records[-1].out_h)[0]}
    for i in reversed(range(len(records))):
        rec = records[i]
        if i + 1 < len(records):
            rec.grads = output_grads(rec, records)
        tensors, grads = rec.backward_pairs(rec.out_h, rec.outputs)
        torch.autograd.backward(tensors, grads)
    return records, loss.item()


def output_grads(rec, records):
    """Gradient of each output of rec: from the next block (main path), from the consumer
    of each skip, and summed over every later block for carried tensors."""
    nxt = records[records.index(rec) + 1]
    grads = {None: nxt.h_in.grad}
    later = records[records.index(rec) + 1:]
    for skip in rec.unit.skips_out:
        grads[skip] = next(r.env_in[skip].grad for r in later if skip in r.unit.skips_in)
    for name in rec.unit.carried_out:
        parts = [r.env_in[name].grad for r in later
                 if name in r.env_in and r.env_in[name].grad is not None]
        grads[name] = torch.stack(parts).sum(0) if parts else None
    return grads


def timed(fn, sync, arg=None):
    sync()
    start = time.perf_counter()
    fn(arg)
    sync()
    return time.perf_counter() - start


class SizeRun:
    """One microbatch size: its batch, its chained pass, and the timing of every block.

    A timed run of a short block repeats it `inner[i]` times back to back (forwards in a
    row; backwards in a row over graphs built untimed beforehand) and keeps the mean, so
    that one run lasts at least --min-run-ms: a sub-millisecond op timed alone is at the
    mercy of one context switch on a shared machine."""

    def __init__(self, model, size, args, device):
        self.size = size
        self.batch = model.make_batch(size, seed=args.seed + size, device=device)
        self.records, self.loss = chain_pass(model, self.batch, size)
        self.forward = [[] for _ in self.records]
        self.backward = [[] for _ in self.records]
        self.inner = [1 for _ in self.records]

    def run_block(self, i, sync, keep):
        rec, n = self.records[i], self.inner[i]

        def forwards(_):
            for _ in range(n):
                rec.run_forward()

        def backwards(outs):
            for out in outs:
                torch.autograd.backward(*rec.backward_pairs(*out))

        fwd = timed(forwards, sync) / n
        outs = [rec.run_forward() for _ in range(n)]  # the backward needs fresh graphs
        bwd = timed(backwards, sync, outs) / n
        if keep:
            self.forward[i].append(fwd)
            self.backward[i].append(bwd)
        return fwd + bwd

    def set_inner(self, i, last_s, min_run_s):
        self.inner[i] = max(1, min(64, math.ceil(min_run_s / max(last_s, 1e-9))))


def rotation(sizes, k):
    """The order in which repeat k visits the sizes: rotated by one each repeat, so every
    size comes first, last and in between equally often."""
    k %= len(sizes)
    return sizes[k:] + sizes[:k]


def measure_all(model, args, device, sync):
    """Warm every block up at every size, then time the sizes interleaved."""
    runs = {b: SizeRun(model, b, args, device) for b in args.sizes}
    for _ in range(max(args.warmup, 1)):
        for b in args.sizes:
            for i in range(len(runs[b].records)):
                last = runs[b].run_block(i, sync, keep=False)
                runs[b].set_inner(i, last, args.min_run_ms / 1e3)
    for k in range(args.repeats):
        for b in rotation(args.sizes, k):
            for i in range(len(runs[b].records)):
                runs[b].run_block(i, sync, keep=True)
    return {b: rows_of(model, run) for b, run in runs.items()}


def rows_of(model, run):
    param_keys = {storage_key(p)[0] for p in model.parameters()}
    rows = []
    for i, rec in enumerate(run.records):
        rows.append({
            "forward_s": statistics.median(run.forward[i]),
            "backward_s": statistics.median(run.backward[i]),
            "saved": saved_bytes(rec, param_keys),
            "output": blocklist.tensor_bytes(rec.out_h),
            "skips": {k: blocklist.tensor_bytes(rec.outputs[k]) for k in rec.unit.skips_out},
            "carried": {k: blocklist.tensor_bytes(rec.outputs[k]) for k in rec.unit.carried_out},
        })
    # Carried tensors that come with the batch (producer null) are measured there.
    rows[0]["carried"].update({c["name"]: blocklist.tensor_bytes(run.batch[c["name"]])
                               for c in model.carried if c["producer"] is None})
    print(f"pulse-profile: microbatch {run.size}: loss {run.loss:.6f}, "
          f"step {sum(r['forward_s'] + r['backward_s'] for r in rows):.4f} s", file=sys.stderr)
    return rows


def small_batch_findings(model, by_size, sizes, limit):
    """Two checks on every block's forward + backward time between neighbouring sizes b < b':

    per-sample   time(b)/b > limit x time(b')/b': small microbatches cost more per sample.
                 Often real (fixed per-op costs of a small block), but a plan at b pays it.
    inversion    time(b) > limit x time(b'): a smaller microbatch takes longer than a larger
                 one, which no correct measurement of a sane kernel should show (the work
                 could be padded to b'); a warm-up artifact or a pathological code path.
    """
    per_sample, inversions = [], []
    for i, name in enumerate(model.block_names):
        total = [by_size[b][i]["forward_s"] + by_size[b][i]["backward_s"] for b in sizes]
        for k in range(len(sizes) - 1):
            (b0, t0), (b1, t1) = (sizes[k], total[k]), (sizes[k + 1], total[k + 1])
            ratio = (t0 / b0) / (t1 / b1)
            if ratio > limit:
                per_sample.append(f"{name}: per-sample time at microbatch {b0} is "
                                  f"{ratio:.2f}x that at {b1}")
            if t0 > limit * t1:
                inversions.append(f"{name}: microbatch {b0} takes {t0 / t1:.2f}x as long as "
                                  f"microbatch {b1}")
    return per_sample, inversions


def _contender(model_spec, dtype_name, device_name, threads, seed, sizes, ready, stop):
    """A rank's worth of load: the whole training step, over and over, until told to stop."""
    blocklist.keep_freed_memory()
    torch.set_num_threads(threads)
    device = torch.device(device_name)
    model = models.load(model_spec, seed=seed, dtype=DTYPES[dtype_name][0]).to(device)
    model.train()
    batches = [model.make_batch(b, seed=seed + b, device=device) for b in sizes]
    ready.set()
    k = 0
    while not stop.is_set():
        b = sizes[k % len(sizes)]
        chain_pass(model, batches[k % len(sizes)], b)
        model.zero_grad(set_to_none=True)
        k += 1


class Contention:
    """N-1 processes running the training step while the profiler measures."""

    def __init__(self, args, device):
        self.procs, self.stop = [], None
        if args.concurrent <= 1:
            return
        ctx = multiprocessing.get_context("spawn")
        self.stop = ctx.Event()
        readies = []
        for n in range(args.concurrent - 1):
            ready = ctx.Event()
            proc = ctx.Process(target=_contender, daemon=True,
                               args=(args.model, args.dtype, str(device), args.threads,
                                     args.seed + 1000 * (n + 1), args.sizes, ready, self.stop))
            proc.start()
            self.procs.append(proc)
            readies.append(ready)
        for ready, proc in zip(readies, self.procs):
            while not ready.wait(1.0):
                if not proc.is_alive():
                    self.close()
                    raise SystemExit(f"pulse-profile: a --concurrent copy exited "
                                     f"({proc.exitcode}) before it started")

    def close(self):
        if self.stop is not None:
            self.stop.set()
        for proc in self.procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.terminate()
                proc.join()
        self.procs = []


def saved_bytes(rec, param_keys):
    """Bytes autograd keeps for this block's backward: every saved tensor's storage once,
    parameters excluded (they are weights, not activations)."""
    seen = {}

    def pack(t):
        key = storage_key(t)
        if key[0] not in param_keys:
            seen[key[0]] = max(seen.get(key[0], 0), key[1])
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        rec.run_forward()
    return sum(seen.values())


def exact_per_sample(values_by_size, what):
    """Bytes of a tensor per sample: must divide exactly and agree at every size."""
    per = {v // b for b, v in values_by_size.items()}
    if len(per) != 1 or any(v % b for b, v in values_by_size.items()):
        raise SystemExit(f"pulse-profile: {what} is not proportional to the microbatch "
                         f"size: {values_by_size}")
    return per.pop()


def round_s(x):
    return max(round(x, 9), 1e-9)  # nanosecond quantum, like the planner; never 0


def build_profile(model, by_size, args, device_type, device_desc, dtype_label, findings):
    sizes = args.sizes
    layers, skip_bytes, carried_bytes = [], {}, {}
    kinds = getattr(model, "block_kinds", ["block"] * len(model.blocks))
    for i, name in enumerate(model.block_names):
        per = [by_size[b][i] for b in sizes]
        layers.append({
            "name": name,
            "kind": kinds[i],
            "params": sum(p.numel() for _, p in blocklist.block_named_parameters(model, i)),
            "forward_s": {device_type: [round_s(r["forward_s"]) for r in per]},
            "backward_s": {device_type: [round_s(r["backward_s"]) for r in per]},
            "activation_bytes_per_sample": max(math.ceil(r["saved"] / b)
                                               for r, b in zip(per, sizes)),
            "output_bytes_per_sample": exact_per_sample(
                {b: r["output"] for r, b in zip(per, sizes)}, f"{name} output"),
        })
        for key, target in (("skips", skip_bytes), ("carried", carried_bytes)):
            for tname in per[0][key]:
                target[tname] = exact_per_sample(
                    {b: r[key][tname] for r, b in zip(per, sizes)}, f"{key} {tname}")
    return {
        "schema": "pulse.model/v1",
        "name": args.name,
        "description": f"{args.model} measured block by block with PyTorch.",
        "provenance": provenance(args, device_desc, findings),
        "dtype": dtype_label,
        "timing": {"microbatch_sizes": sizes, "device_types": [device_type]},
        "layers": layers,
        "skips": [{"name": s["name"], "producer": s["producer"], "consumer": s["consumer"],
                   "bytes_per_sample": skip_bytes[s["name"]]} for s in model.skips],
        "carried": [{"name": c["name"], "producer": c["producer"],
                     "bytes_per_sample": carried_bytes[c["name"]],
                     "needs_gradient": bool(c["needs_gradient"])} for c in model.carried],
    }


SMALL_BATCH_LINE = "Small-batch check"
INVERSION_LINE = "Inversion check"


def provenance(args, device_desc, findings):
    alone = ("alone" if args.concurrent == 1 else
             f"with {args.concurrent - 1} other process(es) running the same training step "
             f"(--concurrent {args.concurrent})")
    per_sample, inversions = findings
    limit = f"{args.max_small_batch_ratio:g}"
    flagged = [
        f"{SMALL_BATCH_LINE} (per-sample forward + backward time at a microbatch size more than "
        f"{limit}x that at the next larger size): "
        + ("no block flagged." if not per_sample else
           f"FLAGGED {len(per_sample)}: " + "; ".join(per_sample)
           + ". Plans at the smaller size pay for it."),
        f"{INVERSION_LINE} (a microbatch size taking more than {limit}x as long as the next "
        "larger one): " + ("no block flagged." if not inversions else
                           f"FLAGGED {len(inversions)}: " + "; ".join(inversions)
                           + ". Likely an artifact; re-measure before planning on it."),
    ]
    return {
        "method": "measured",
        "source": (f"pulse-profile --model {args.model} on host "
                   f"{platform.node()} ({device_desc[0]}: {device_desc[1]}), PyTorch "
                   f"{torch.__version__}, Python {platform.python_version()}, dtype "
                   f"{args.dtype}, seed {args.seed}; every block warmed up {max(args.warmup, 1)} "
                   f"time(s) at every size, then the median of {args.repeats} runs (each "
                   f"repeating a short block to last about {args.min_run_ms:g} ms) with the "
                   f"sizes interleaved; measured {alone}"),
        "generator": "pulse-profile (python/pulse_runtime/profiler.py)",
        "assumptions": [
            "Each block is timed alone on detached copies of its real inputs; cache effects "
            "between neighbouring blocks are not captured.",
            "backward_s is the block's own backward fed the gradient its outputs receive in "
            "a real training step (main path, skip consumers and carried-tensor users), "
            "parameter gradients accumulating as in the second and later microbatches.",
            "activation_bytes_per_sample: storages saved by autograd for the block "
            "(saved_tensors_hooks, each storage once, parameters excluded), the largest "
            "per-sample value over the profiled sizes; a tensor saved by two neighbouring "
            "blocks is counted in both.",
            "Skip and carried tensors are the ones the model's block list names; their "
            "bytes and the output bytes are exact sizes in the profiled dtype.",
        ] + flagged,
    }


def main(argv=None):
    args = parse_args(argv)
    blocklist.keep_freed_memory()
    torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    dtype, dtype_label = DTYPES[args.dtype]
    try:
        model = models.load(args.model, seed=args.seed, dtype=dtype).to(device)
    except (ValueError, TypeError, OSError) as e:
        raise SystemExit(f"pulse-profile: {e}") from None
    model.train()
    kind, desc = device_description(device)
    device_type = args.device_type or (desc if kind == "CUDA" else "CPU")
    if args.name is None:
        stem = os.path.splitext(os.path.basename(args.model.rpartition(":")[0]))[0]
        args.name = f"{stem.replace('_', '-')}-{device.type}"
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    contention = Contention(args, device)
    try:
        by_size = measure_all(model, args, device, sync)
    finally:
        contention.close()
    findings = small_batch_findings(model, by_size, args.sizes, args.max_small_batch_ratio)
    for check, lines in zip(("small-batch", "inversion"), findings):
        for line in lines:
            print(f"pulse-profile: {check} check: {line}", file=sys.stderr)
    count = sum(len(lines) for lines in findings)
    if count and args.strict:
        raise SystemExit(f"pulse-profile: {count} finding(s) over --max-small-batch-ratio "
                         f"{args.max_small_batch_ratio:g}; nothing written (--strict)")
    profile = build_profile(model, by_size, args, device_type, (kind, desc), dtype_label,
                            findings)
    text = json.dumps(profile, indent=2) + "\n"
    if args.output:
        tmp = args.output + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.output)  # appears complete or not at all
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
