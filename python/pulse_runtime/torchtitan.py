"""A plan as a torchtitan job: the `[parallelism]` and `[training]` fields of a TOML job config
and the schedule CSV it names.

    pulse-plan export PLAN --format torch-csv -o plan.csv
    python -m pulse_runtime.torchtitan --plan PLAN --csv plan.csv \
        --model examples/small_unet.py:build -o OUT/
    # OUT/job.toml (merge its tables into the job's config), OUT/schedule.csv

What torchtitan does with the fields, as read in pytorch/torchtitan at commit
e347b1e5e6b6941d789d16d340145294d82dc71e (the last release of the TOML job config:
torchtitan/config/job_config.py, class Parallelism and Training; and
torchtitan/distributed/pipeline_parallel.py, `pipeline_llm`, `build_pipeline_schedule`,
`pipeline_module_split`):

- `module_fqns_per_model_part`: one list of module names per stage, in stage order; each
  stage keeps those modules of a deep copy of the model (a `ModuleList`/`ModuleDict` child by
  its `child.index` names) and drops the rest. Here: each stage's layers, by the module the
  layer is (block-list models: its place in the model, e.g. `blocks.3`; the fx front end: the
  layer name, which is the module's qualified name, e.g. `down_blocks.2`).
- `pipeline_parallel_schedule` only decides which stages a pp rank builds: `ZBVZeroBubble` or
  `DualPipeV` give the V (rank d: stages d and 2P-1-d, exactly two per rank), any other the
  loop (rank d: d, d+P, ...). The export names `ZBVZeroBubble` for a V plan, `1F1B` for a
  chain of one stage per rank, `Interleaved1F1B` for a loop; other placements (waves of more
  than two stages per rank in a zig-zag) torchtitan cannot build, and the export refuses them.
- `pipeline_parallel_schedule_csv`: with it torchtitan runs `_PipelineScheduleRuntime` and
  `_load_csv`s the file (compute-only format). Row g is pp rank g, whose stages the style
  above decides, so the rows are the plan's devices in order (pulse-plan's own torch-csv
  export orders them by global rank within each pipeline group: this export permutes them).
- `pipeline_parallel_microbatch_size` with `training.local_batch_size` (the samples per
  data-parallel replica, num_microbatches x microbatch size): torchtitan's microbatch count is
  their quotient.
- Data parallelism: ZeRO-3 is FSDP (`data_parallel_shard_degree` = dp,
  `fsdp_reshard_after_forward = "always"`), ZeRO-2 FSDP without resharding after forward
  (`"never"`), ZeRO-0 DDP (`data_parallel_replicate_degree` = dp). torchtitan has no ZeRO-1
  (optimizer-state sharding alone): such a plan is refused, as is a precision torchtitan does
  not train (`training.mixed_precision_param` is bfloat16 or float32: the plan's `mixed` or
  `fp32`).

The schedule's stage -> rank map is checked against the style torchtitan will use, and the
module names against the model (every name resolves to a module with exactly the layer's
parameters), before anything is written; files appear atomically. Exit 2 with one line on
any refusal.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sys
from typing import Any

from . import options as opt
from .plan_doc import PlanDoc, PlanError, read_plan
from .plan_json import read_bytes

PROG = "pulse-torchtitan"
MAX_CSV_BYTES = 64 << 20  # a torch-csv export is a few bytes an op, its plan about 150

TORCHTITAN_COMMIT = "e347b1e5e6b6941d789d16d340145294d82dc71e"
V_SCHEDULES = ("ZBVZeroBubble", "DualPipeV")


class ExportError(ValueError):
    """A plan torchtitan cannot run as written (exit 2)."""


def placement_style(doc: PlanDoc) -> tuple[str, str]:
    """(torchtitan's style, the schedule name that selects it) for the plan's stage map, or
    ExportError naming the map."""
    pp, devices = doc.parallelism.pp, doc.stage_device
    stages = len(devices)
    loop = [s % pp for s in range(stages)]
    v = [min(s, stages - 1 - s) for s in range(stages)]
    if stages == 2 * pp and devices == v:
        return "v", V_SCHEDULES[0]
    if stages % pp == 0 and devices == loop:
        return "loop", "1F1B" if stages == pp else "Interleaved1F1B"
    raise ExportError(f"{doc.path}: stages on devices {devices}: torchtitan places a loop "
                      f"{loop} or a V {v} (two stages per rank), not this placement")


def module_fqns(model: Any, root: Any) -> list[str]:
    """The qualified name, in `root`, of each layer's module: block-list models' blocks by
    identity; fx layers by their name (the original module's qualified name)."""
    names = {id(m): n for n, m in root.named_modules()}
    out = []
    for i, block in enumerate(model.blocks):
        name = names.get(id(block))
        if name is None:  # an fx layer: the module its name is
            name = model.block_names[i]
            try:
                root.get_submodule(name)
            except AttributeError:
                raise ExportError(f"layer {name!r} is no module of the model: torchtitan "
                                  f"names stages by module") from None
        out.append(name)
    return out


def check_parameters(model: Any, root: Any, fqns: list[str]) -> None:
    """Each named module holds exactly its layer's parameters (so keeping the modules of a
    stage keeps the stage)."""
    from . import blocklist
    for i, fqn in enumerate(fqns):
        have = {id(p) for p in root.get_submodule(fqn).parameters()}
        want = {id(p) for _, p in blocklist.block_named_parameters(model, i)}
        if have != want:
            raise ExportError(f"layer {model.block_names[i]!r}: module {fqn!r} holds "
                              f"{len(have)} parameters, the layer {len(want)}: torchtitan "
                              f"would keep other weights with the stage")


def device_rows(doc: PlanDoc, csv_text: str) -> list[list[str]]:
    """The CSV's rows (one per group rank: new_group sorts each pipeline's global ranks)
    reordered to one per pipeline device, which is torchtitan's pp rank."""
    rows = list(csv.reader(io.StringIO(csv_text)))
    group = doc.rank_map.pipeline_groups[0]
    order = sorted(range(len(group)), key=lambda d: group[d])  # row g -> device order[g]
    if len(rows) != len(group):
        raise ExportError(f"the CSV has {len(rows)} rows, the plan's pipelines {len(group)} "
                          f"ranks (was it exported from this plan?)")
    by_device = [None] * len(group)
    for g, device in enumerate(order):
        by_device[device] = rows[g]
    for d, row in enumerate(by_device):
        stages = {csv_stage(doc, c) for c in row if c}
        wrong = sorted(s for s in stages if doc.stage_device[s] != d)
        if wrong:
            raise ExportError(f"the CSV gives device {d} stages {wrong} the plan puts "
                              f"elsewhere (was it exported from this plan?)")
    return by_device


def csv_stage(doc: PlanDoc, cell: str) -> int:
    """The stage of a torch-csv action ("3F0": stage 3, forward, microbatch 0)."""
    match = re.match(r"\d{1,9}", cell)
    if match is None or int(match.group()) >= len(doc.stage_device):
        raise ExportError(f"the CSV holds {cell[:40]!r}, not an action on one of the plan's "
                          f"{len(doc.stage_device)} stages (was it exported from this plan?)")
    return int(match.group())


def data_parallel(doc: PlanDoc) -> dict[str, Any]:
    dp, zero = doc.parallelism.dp, doc.zero_stage
    if doc.parallelism.sequence is not None:
        raise ExportError(f"{doc.path}: $.parallelism.sequence: a sequence-parallel layout is "
                          f"not exported to torchtitan (its context parallelism is another "
                          f"scheme); pulse-run runs the plan's Ulysses groups")
    if dp == 1:
        return {"data_parallel_shard_degree": 1, "data_parallel_replicate_degree": 1}
    if zero == 1:
        raise ExportError(f"{doc.path}: ZeRO-1 ({doc.modes_path[2:]}.memory.zero_stage): torchtitan shards "
                          f"optimizer state only together with gradients (FSDP); plan with "
                          f"--zero 0, 2 or 3")
    if zero == 0:
        return {"data_parallel_shard_degree": 1, "data_parallel_replicate_degree": dp}
    return {"data_parallel_shard_degree": dp, "data_parallel_replicate_degree": 1,
            "fsdp_reshard_after_forward": "always" if zero >= 3 else "never"}


def training(doc: PlanDoc) -> dict[str, Any]:
    par = doc.parallelism
    param = {"mixed": "bfloat16", "fp32": "float32"}.get(doc.precision)
    if param is None:
        raise ExportError(f"{doc.path}: precision {doc.precision} "
                          f"({doc.modes_path[2:]}.memory.precision): torchtitan trains mixed (bf16 with "
                          f"fp32 master weights) or fp32")
    return {"local_batch_size": par.num_microbatches * par.microbatch_size,
            "global_batch_size": par.global_batch, "mixed_precision_param": param,
            "mixed_precision_reduce": "float32"}


def toml_value(v: Any) -> str:
    return json.dumps(v)  # strings, integers and lists of strings: TOML's syntax is JSON's


def job_toml(doc: PlanDoc, schedule: str, fqns: list[list[str]], csv_path: str) -> str:
    par = doc.parallelism
    parallelism = {"pipeline_parallel_degree": par.pp,
                   "pipeline_parallel_schedule": schedule,
                   "pipeline_parallel_schedule_csv": csv_path,
                   "pipeline_parallel_microbatch_size": par.microbatch_size,
                   "module_fqns_per_model_part": fqns, **data_parallel(doc)}
    lines = [f"# pulse-plan plan {os.path.basename(doc.path)} (sha256 {doc.sha256[:16]}...) as a "
             f"torchtitan job: {par.pp} pipeline ranks x {par.dp} data-parallel, "
             f"{len(doc.stages)} stages, {par.num_microbatches} microbatches of "
             f"{par.microbatch_size}.",
             f"# Fields as torchtitan {TORCHTITAN_COMMIT[:12]} reads them "
             f"(pulse_runtime/torchtitan.py says how). Merge into the job's config.",
             "", "[parallelism]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in parallelism.items()]
    lines += ["", "[training]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in training(doc).items()]
    return "\n".join(lines) + "\n"


def write_atomically(path: str, text: str) -> None:
    with open(path + ".tmp", "w", newline="") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def export(plan_path: str, csv_path: str, model_spec: str, out: str) -> tuple[str, str]:
    """Writes OUT/job.toml and OUT/schedule.csv; returns their paths."""
    doc = read_plan(plan_path)
    _, schedule = placement_style(doc)
    csv_text = read_bytes(csv_path, MAX_CSV_BYTES, "a torch-csv export", "CSV").decode(
        "utf-8", errors="replace")
    rows = device_rows(doc, csv_text)
    data_parallel(doc)
    training(doc)  # every refusal above, before the model is built
    from . import models  # PyTorch from here on
    from .plan import Plan
    try:
        model = models.load(model_spec, seed=0)
    except (SyntaxError, ImportError) as e:
        raise ExportError(f"--model {model_spec}: {type(e).__name__}: {e}") from None
    plan = Plan(doc, model)
    root = getattr(model, "module", model)  # the fx front end's original module
    fqns = module_fqns(model, root)
    check_parameters(model, root, fqns)
    parts = [[fqns[i] for i in range(first, last + 1)] for first, last in plan.stage_range]
    os.makedirs(out, exist_ok=True)
    csv_out = os.path.abspath(os.path.join(out, "schedule.csv"))
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    toml = job_toml(doc, schedule, parts, csv_out)  # everything checked before writing
    write_atomically(csv_out, text.getvalue())
    toml_out = os.path.join(out, "job.toml")
    write_atomically(toml_out, toml)
    return toml_out, csv_out


def main(argv: list[str] | None = None) -> int:
    p = opt.Parser(prog="python -m pulse_runtime.torchtitan", tag=PROG,
                   description=__doc__.split("\n\n")[0])
    p.add_argument("--plan", required=True)
    p.add_argument("--csv", required=True, help="pulse-plan export PLAN --format torch-csv")
    p.add_argument("--model", required=True, help="FILE.py:FUNCTION (the model the plan is of)")
    p.add_argument("-o", "--out", required=True, help="folder for job.toml and schedule.csv")
    args = p.parse_args(argv)
    try:
        for path in export(args.plan, args.csv, args.model, args.out):
            print(path)
    except (ExportError, PlanError, ValueError, TypeError, OSError) as e:
        opt.fail(PROG, str(e))
    except KeyboardInterrupt:
        opt.fail(PROG, "interrupted", code=130)
    except Exception as e:  # noqa: BLE001 - the one top-level handler (exit 3)
        opt.internal_error(PROG, e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
