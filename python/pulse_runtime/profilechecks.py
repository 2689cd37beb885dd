"""pulse-profile's checks on a measured profile, and the provenance lines that state them
(profiler.py writes them; tests/test_measured_profiles.py reads them back)."""

from __future__ import annotations

import argparse
from typing import Any, Optional

Row = dict  # one block: bytes and times (steptimer.Row)


def step_totals(by_size: dict[int, list[Row]], sizes: list[int]) -> list[float]:
    return [sum(r["forward_s"] + r["backward_s"] for r in by_size[b]) for b in sizes]


def small_batch_findings(model: Any, by_size: dict[int, list[Row]], sizes: list[int],
                         limit: float, inversion_limit: Optional[float] = None
                         ) -> tuple[list[str], list[str]]:
    """Two checks on every block's forward + backward time between neighbouring sizes b < b':

    per-sample   time(b)/b over time(b')/b' more than limit x the same ratio of the sum over
                 all blocks: the block loses more to a small microbatch than the model does.
                 A launch-bound model (on a GPU at small microbatches every block costs
                 about the same at b as at b') is not flagged block by block; the
                 provenance's whole-step line shows its times at every size.
    inversion    time(b) > inversion_limit x time(b') (default: limit): a smaller microbatch
                 takes longer than a larger one, which no correct measurement of a sane
                 kernel should show (the work could be padded to b'); a warm-up artifact,
                 the machine's load, or a pathological code path.
    """
    inversion_limit = limit if inversion_limit is None else inversion_limit
    per_sample, inversions = [], []
    steps = step_totals(by_size, sizes)
    for i, name in enumerate(model.block_names):
        total = [by_size[b][i]["forward_s"] + by_size[b][i]["backward_s"] for b in sizes]
        for k in range(len(sizes) - 1):
            (b0, t0), (b1, t1) = (sizes[k], total[k]), (sizes[k + 1], total[k + 1])
            ratio = (t0 / b0) / (t1 / b1)
            model_ratio = (steps[k] / b0) / (steps[k + 1] / b1)
            if ratio > limit * model_ratio:
                per_sample.append(f"{name}: per-sample time at microbatch {b0} is "
                                  f"{ratio:.2f}x that at {b1} (all blocks: {model_ratio:.2f}x)")
            if t0 > inversion_limit * t1:
                inversions.append(f"{name}: microbatch {b0} takes {t0 / t1:.2f}x as long as "
                                  f"microbatch {b1}")
    return per_sample, inversions


def step_findings(summaries: list[dict], key: str, limit: float) -> list[str]:
    """Sizes whose blocks' sum (``key`` "deviation": as written; "stamp_overhead": as
    stamped) is off the plain whole step by more than the limit."""
    return [f"microbatch {s['microbatch']}: {100 * s[key]:+.1f}%" for s in summaries
            if abs(s[key]) > limit]


# --- the provenance's lines -------------------------------------------------------------------

SMALL_BATCH_LINE = "Small-batch check"
INVERSION_LINE = "Inversion check"
STEP_SUM_LINE = "Step-sum check"
STAMP_LINE = "Stamp-overhead check"
# The phrase that tells tests/test_measured_profiles.py which small-batch rule a line used.
RELATIVE_RULE = "beyond the same ratio of the sum over all blocks"


def method_lines() -> list[str]:
    return [
        "Timing method: each timed run is one whole training step (every block's forward "
        "in one autograd graph, the loss, one backward), stamped without host "
        "synchronisation inside the step (CUDA events on the GPU, the host clock on the "
        "CPU): a stamp after each block's forward, and one from a gradient hook on each "
        "block's outputs when its backward starts. The time between two stamps belongs to "
        "the block that ran then, so a block's time includes the host's launch time where "
        "the GPU waits for it, and the blocks add up to the stamped step.",
        "forward_s / backward_s: whole-step attribution. Each block's median over the timed "
        "stamped steps, times one factor per microbatch size (the median plain step, "
        "without stamps or hooks, over the sum of the block medians), so the blocks add up "
        "to the plain step: the stamps' own host time, which lengthens the stamped step "
        "where the GPU waits for the host, is shared out in proportion to the blocks' "
        "times. The stamped sums and the factors are in the whole-step line below; a "
        "block's stamped median is its time here divided by its size's factor. The loss "
        "and its gradient count to the last block; parameter gradients accumulate into "
        "existing .grad, as from the second microbatch of an iteration on.",
        "activation_bytes_per_sample: storages saved by autograd for the block "
        "(saved_tensors_hooks, each storage once, parameters excluded), the largest "
        "per-sample value over the profiled sizes; a tensor saved by two neighbouring "
        "blocks is counted in both.",
        "Skip and carried tensors are the ones the model's block list names; their "
        "bytes and the output bytes are exact sizes in the profiled dtype.",
    ]


def check_lines(args: argparse.Namespace, summaries: list[dict],
                findings: tuple[list[str], ...]) -> list[str]:
    per_sample, inversions, steps, stamps = findings
    limit, dev = f"{args.max_small_batch_ratio:g}", f"{100 * args.max_step_deviation:g}%"
    whole = "; ".join(f"microbatch {s['microbatch']}: {1e3 * s['whole_step_s']:.3f} ms, "
                      f"blocks {1e3 * s['blocks_sum_s']:.3f} ms, stamped "
                      f"{1e3 * s['stamped_blocks_sum_s']:.3f} ms "
                      f"({100 * s['stamp_overhead']:+.1f}%, factor {s['scale']:.4f})"
                      for s in summaries)
    return [
        f"Whole step (forward + backward without stamps or hooks, median of {args.repeats}) "
        f"against the blocks' sum as written and the stamped blocks' sum (of the per-block "
        f"medians) with the attribution factor: {whole}.",
        f"{STEP_SUM_LINE} (the blocks' sum as written within {dev} of the whole step): "
        + ("within at every size." if not steps else
           f"OUTSIDE at {len(steps)} size(s): " + "; ".join(steps) + "."),
        f"{STAMP_LINE} (the stamped blocks' sum within "
        f"{100 * args.max_stamp_overhead:g}% of the whole step; beyond, the block times "
        f"rest mostly on the attribution): "
        + ("within at every size." if not stamps else
           f"OUTSIDE at {len(stamps)} size(s): " + "; ".join(stamps) + "."),
        f"{SMALL_BATCH_LINE} (per-sample forward + backward time at a microbatch size more "
        f"than {limit}x that at the next larger size, {RELATIVE_RULE}): "
        + ("no block flagged." if not per_sample else
           f"FLAGGED {len(per_sample)}: " + "; ".join(per_sample)
           + ". Plans at the smaller size pay for it."),
        f"{INVERSION_LINE} (a microbatch size taking more than {args.max_inversion:g}x as "
        "long as the next larger one): " + ("no block flagged." if not inversions else
                           f"FLAGGED {len(inversions)}: " + "; ".join(inversions)
                           + ". Likely an artifact; re-measure before planning on it."),
    ]


# --- the verdict ------------------------------------------------------------------------------

# The checks whose failure says the times are not the model's (the measurement, not the
# model): a profile failing one is not written unless asked (--keep-failed). The small-batch
# check describes the model (a small microbatch costs a block more per sample) and is stated,
# not failed.
FAILING_CHECKS = ("step-sum", "stamp-overhead", "inversion")


def verdict(failed: dict[str, list[str]], flagged: int, *, cuda: bool, thread_clock: bool,
            keep: bool) -> tuple[str, bool]:
    """pulse-profile's closing line and whether the profile is written: ``failed`` maps each
    of FAILING_CHECKS to its findings, ``flagged`` counts the small-batch check's."""
    stated = (f"; the small-batch check flags {flagged} block(s) at a small microbatch, stated "
              "in provenance.assumptions" if flagged else "")
    count = sum(len(failed.get(c, [])) for c in FAILING_CHECKS)
    if count == 0:
        return f"pulse-profile: the {', '.join(FAILING_CHECKS)} checks passed{stated}", True
    which = ", ".join(f"{c} {len(failed[c])}" for c in FAILING_CHECKS if failed.get(c))
    ways = (["fewer jobs beside it on the GPU and its host"] if cuda else
            ([] if thread_clock else ["--clock thread (the profiling thread's CPU time)"])
            + ["fewer concurrent jobs on the machine"])
    todo = "measure again with " + ", ".join(ways + ["more --repeats"])
    outcome = ("written anyway (--keep-failed), the failures stated in its "
               "provenance.assumptions" if keep else
               "nothing written (--keep-failed writes it anyway)")
    return (f"pulse-profile: {count} check(s) failed ({which}): the block times are the "
            f"machine's load as much as the model's; {todo}; {outcome}{stated}"), keep
