"""pulse-profile: measure a PyTorch model into a pulse.model/v1 profile.

    pulse-profile --model examples/small_unet.py:build --sizes 1,2,4,8 \
        -o profiles/models/small-unet-cpu.json

For every block and microbatch size it measures, on CUDA if present and else on the CPU:
forward time, backward time (the block alone, fed the gradient its outputs really get in
training), parameters, the bytes autograd saves for the block's backward, and the bytes of
its main-path output, of the skip tensors it produces and of the carried tensors it makes.
The model is a block-list model or any traceable nn.Module, which the torch.fx front end
splits into layers (models.py, docs/torch.md). scripts/profile_torch.py runs this too.
"""

import argparse
import json
import math
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
    p.add_argument("--warmup", type=int, default=2, help="untimed runs before measuring")
    p.add_argument("--repeats", type=int, default=5, help="timed runs; the median is kept")
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


def median_time(fn, sync, warmup, repeats, setup=None):
    times = []
    for k in range(warmup + repeats):
        arg = setup() if setup else None
        sync()
        start = time.perf_counter()
        fn(arg)
        sync()
        if k >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


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


def measure_size(model, size, args, device, sync):
    batch = model.make_batch(size, seed=args.seed + size, device=device)
    records, loss = chain_pass(model, batch, size)
    param_keys = {storage_key(p)[0] for p in model.parameters()}
    rows = []
    for rec in records:
        fwd = median_time(lambda _: rec.run_forward(), sync, args.warmup, args.repeats)

        def backward(fwd_out, rec=rec):
            torch.autograd.backward(*rec.backward_pairs(*fwd_out))

        bwd = median_time(backward, sync, args.warmup, args.repeats, setup=rec.run_forward)
        rows.append({
            "forward_s": fwd, "backward_s": bwd,
            "saved": saved_bytes(rec, param_keys),
            "output": blocklist.tensor_bytes(rec.out_h),
            "skips": {k: blocklist.tensor_bytes(rec.outputs[k]) for k in rec.unit.skips_out},
            "carried": {k: blocklist.tensor_bytes(rec.outputs[k]) for k in rec.unit.carried_out},
        })
    # Carried tensors that come with the batch (producer null) are measured there.
    rows[0]["carried"].update({c["name"]: blocklist.tensor_bytes(batch[c["name"]])
                               for c in model.carried if c["producer"] is None})
    print(f"pulse-profile: microbatch {size}: loss {loss:.6f}, "
          f"step {sum(r['forward_s'] + r['backward_s'] for r in rows):.4f} s", file=sys.stderr)
    return rows


def exact_per_sample(values_by_size, what):
    """Bytes of a tensor per sample: must divide exactly and agree at every size."""
    per = {v // b for b, v in values_by_size.items()}
    if len(per) != 1 or any(v % b for b, v in values_by_size.items()):
        raise SystemExit(f"pulse-profile: {what} is not proportional to the microbatch "
                         f"size: {values_by_size}")
    return per.pop()


def round_s(x):
    return max(round(x, 9), 1e-9)  # nanosecond quantum, like the planner; never 0


def build_profile(model, by_size, args, device_type, device_desc, dtype_label):
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
        "provenance": provenance(args, device_desc),
        "dtype": dtype_label,
        "timing": {"microbatch_sizes": sizes, "device_types": [device_type]},
        "layers": layers,
        "skips": [{"name": s["name"], "producer": s["producer"], "consumer": s["consumer"],
                   "bytes_per_sample": skip_bytes[s["name"]]} for s in model.skips],
        "carried": [{"name": c["name"], "producer": c["producer"],
                     "bytes_per_sample": carried_bytes[c["name"]],
                     "needs_gradient": bool(c["needs_gradient"])} for c in model.carried],
    }


def provenance(args, device_desc):
    return {
        "method": "measured",
        "source": (f"pulse-profile --model {args.model} on host "
                   f"{platform.node()} ({device_desc[0]}: {device_desc[1]}), PyTorch "
                   f"{torch.__version__}, Python {platform.python_version()}, dtype "
                   f"{args.dtype}, seed {args.seed}; median of {args.repeats} runs after "
                   f"{args.warmup} warm-up runs"),
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
        ],
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
    by_size = {b: measure_size(model, b, args, device, sync) for b in args.sizes}
    profile = build_profile(model, by_size, args, device_type, (kind, desc), dtype_label)
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
