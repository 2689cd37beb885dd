"""PyTorch pipelining's schedule rules, restated so that an exported CSV can be judged by them.

The installed PyTorch (Debian's 1.13) has no `torch.distributed.pipelining` (it appeared in
2.4), so the rules are re-implemented here from the source, read at:

- pytorch/pytorch torch/distributed/pipelining/schedules.py, commit
  00722e648b740f91d0e71494baa17891749fd291: `_Action.from_str`, `_validate_schedule`,
  `PipelineScheduleMulti._load_csv` and `._step_microbatches` (the lock-step executor),
  `_PipelineScheduleRuntime._load_csv` / `._prepare_schedule_with_comms` with the lowering
  passes `_add_unshard_reshard`, `_add_reduce_grad`, `_add_send_recv`, and its
  `._step_microbatches`; `_PipelineSchedule._maybe_compute_loss` / `._maybe_get_loss`;
- pytorch/pytorch torch/distributed/pipelining/stage.py, commit
  0138610331c90b8053a0bfc6df0175b200a1cad2: a stage's row is `dist.get_rank(group)`
  (`group_rank`), and its peers are found through `stage_index_to_group_rank` and
  `dist.get_global_rank(group, peer)`.

Nothing is copied: the functions below say in their own words what those do, and raise
`ScheduleError` where PyTorch raises (or, where PyTorch silently computes on the wrong
data, where it would). Each function names the PyTorch function it restates.
"""

import csv
import re
from collections import namedtuple

COMPUTE = ("F", "I", "B", "W")
COMMS = ("SEND_F", "RECV_F", "SEND_B", "RECV_B")
# The action grammar of schedules.py (`_action_regex`), applied with re.match as there.
ACTION = re.compile(r"(\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*)")


class ScheduleError(Exception):
    """What PyTorch would raise, or the wrong computation it would silently make."""


class Action(namedtuple("Action", "stage kind mb")):
    __slots__ = ()

    def __str__(self):
        return f"{self.stage}{self.kind}{'' if self.mb is None else self.mb}"


def parse_action(cell):
    """`_Action.from_str`: stripped; empty is an idle step (None)."""
    cell = cell.strip()
    if cell == "":
        return None
    if cell.startswith("("):
        raise ScheduleError(f"{cell}: OVERLAP_F_B sub-actions are not modelled here")
    m = ACTION.match(cell)
    if not m:
        raise ScheduleError(f"Invalid action string: {cell}")
    stage, kind, mb = m.groups()
    return Action(int(stage), kind, int(mb) if mb else None)


def read_csv(path):
    """Row r of the file is the actions of pipeline-group rank r (`_load_csv`)."""
    with open(path, newline="") as f:
        return {rank: [parse_action(c) for c in row] for rank, row in enumerate(csv.reader(f))}


# --- PipelineScheduleMulti._load_csv(format="compute_only") -------------------------------

def validate_schedule(actions, pp_group_size, num_stages, num_microbatches):
    """`_validate_schedule`: returns the stage -> group rank map inferred from the rows."""
    if len(actions) != pp_group_size:
        raise ScheduleError(f"Schedule has incorrect number of ranks - expected {pp_group_size}, "
                            f"actual {len(actions)}")
    for rank in range(pp_group_size):
        if rank not in actions:
            raise ScheduleError(f"Schedule is missing actions for rank {rank}")
    seen = {s: {k: set() for k in COMPUTE} for s in range(num_stages)}
    stage_to_rank = {}
    names = {"B": "Full Backward", "I": "Backward Input"}
    for rank, row in actions.items():
        for step, a in enumerate(row):
            if a is None:
                continue
            if a.stage not in seen:  # a KeyError in PyTorch
                raise ScheduleError(f"Rank {rank}, step {step}: stage {a.stage} out of range")
            if a.kind in ("B", "I") and a.mb not in seen[a.stage]["F"]:
                raise ScheduleError(f"Rank {rank}, step {step}: Running {names[a.kind]} for "
                                    f"stage {a.stage}, microbatch {a.mb} without first running "
                                    f"Forward")
            if a.kind == "W" and a.mb not in seen[a.stage]["I"]:
                raise ScheduleError(f"Rank {rank}, step {step}: Running Backward Weight for "
                                    f"stage {a.stage}, microbatch {a.mb} without first running "
                                    f"Backward Input")
            if a.kind in COMPUTE:
                seen[a.stage][a.kind].add(a.mb)
            if stage_to_rank.setdefault(a.stage, rank) != rank:
                raise ScheduleError(f"Rank {rank}, step {step}: Stage {a.stage} is assigned to "
                                    f"both rank {rank} and rank {stage_to_rank[a.stage]}")
    for s, kinds in seen.items():
        f, b, i, w = (len(kinds[k]) for k in "FBIW")
        if f != num_microbatches:
            raise ScheduleError(f"Got {f} F microbatches for stage {s}, expected "
                                f"{num_microbatches}")
        if i != w:
            raise ScheduleError(f"Invalid backward microbatches for stage {s}: I and W must "
                                f"have equal counts, but got I={i}, W={w}")
        if b + (i + w) // 2 != num_microbatches:
            raise ScheduleError(f"Invalid backward microbatches for stage {s}: expected "
                                f"{num_microbatches} total backwards, but got B={b}, I={i}, "
                                f"W={w}")
    return stage_to_rank


def load_compute_only(path, pp_group_size, num_stages, num_microbatches):
    """`PipelineScheduleMulti._load_csv(path)`: (rows, stage -> group rank)."""
    actions = read_csv(path)
    return actions, validate_schedule(actions, pp_group_size, num_stages, num_microbatches)


# --- the loss of the last stage (both executors) -------------------------------------------

class Losses:
    """`_maybe_compute_loss` appends the last stage's loss in the order its forwards run;
    `_maybe_get_loss(stage, mb)` then takes entry `mb` of that list. A backward of the last
    stage for microbatch m therefore needs the m-th forward to have been microbatch m:
    otherwise PyTorch raises (`Loss for microbatch m is not available`) or backpropagates
    another microbatch's loss through microbatch m's stage (whose input gradients are then
    missing, and `get_bwd_send_ops` raises). Both are rejected here."""

    def __init__(self):
        self.order = []

    def forward(self, mb):
        self.order.append(mb)

    def backward(self, mb, where):
        if not 0 <= mb < len(self.order):
            raise ScheduleError(f"{where}: Loss for microbatch {mb} is not available "
                                f"(the last stage has run the forwards of {self.order})")
        if self.order[mb] != mb:
            raise ScheduleError(f"{where}: the backward of microbatch {mb} would use the loss "
                                f"of microbatch {self.order[mb]}: the last stage runs its "
                                f"forwards in the order {self.order}, not in microbatch order")


# --- PipelineScheduleMulti._step_microbatches: the lock-step executor ----------------------

def run_lock_step(actions, stage_to_rank, num_stages):
    """Every rank walks its own row step by step. At step t a rank computes its action
    (a forward reads the buffer its input was received into; a backward reads its received
    gradient), queues the sends of that action, and queues a receive for each neighbour
    whose action at the same step t produces its input: a forward of stage s on the rank of
    stage s-1 of one of its stages, an I or B of stage s on the rank of stage s+1. Then it
    waits for all of them. So data produced at step t is available from step t+1; a consumer
    at step t or earlier reads an unfilled buffer, with no error. That is what is rejected
    here (the first such op, and how many more). Returns {(stage, kind, mb): step}."""
    mine = {}
    for s, r in stage_to_rank.items():
        mine.setdefault(r, set()).add(s)
    arrived = {}  # (direction, consumer stage, mb) -> step the receive completed
    for q, row in actions.items():
        prev_ranks = {stage_to_rank[s - 1] for s in mine.get(q, ()) if s > 0}
        next_ranks = {stage_to_rank[s + 1] for s in mine.get(q, ()) if s < num_stages - 1}
        for t in range(len(row)):
            for r in prev_ranks:
                a = actions[r][t] if t < len(actions[r]) else None
                if a is not None and a.kind == "F" and a.stage + 1 in mine[q]:
                    arrived[("F", a.stage + 1, a.mb)] = t
            for r in next_ranks:
                a = actions[r][t] if t < len(actions[r]) else None
                if a is not None and a.kind in ("I", "B") and a.stage - 1 in mine[q]:
                    arrived[("B", a.stage - 1, a.mb)] = t
    steps, losses, late = {}, Losses(), []
    for q, row in sorted(actions.items()):
        for t, a in enumerate(row):
            if a is None:
                continue
            where = f"rank {q} step {t} ({a})"
            steps[(a.stage, a.kind, a.mb)] = t
            if a.kind == "F" and a.stage > 0:
                _need(arrived, ("F", a.stage, a.mb), t, where, late,
                      f"its input from stage {a.stage - 1} (rank {stage_to_rank[a.stage - 1]})")
            if a.kind in ("I", "B") and a.stage < num_stages - 1:
                _need(arrived, ("B", a.stage, a.mb), t, where, late,
                      f"its gradient from stage {a.stage + 1} "
                      f"(rank {stage_to_rank[a.stage + 1]})")
            if a.stage == num_stages - 1 and a.kind == "F":
                losses.forward(a.mb)
            if a.stage == num_stages - 1 and a.kind in ("I", "B"):
                losses.backward(a.mb, where)
    if late:
        raise ScheduleError(late[0] + (f" (and {len(late) - 1} more ops)" if len(late) > 1
                                       else ""))
    return steps


def _need(arrived, key, t, where, late, what):
    got = arrived.get(key)
    if got is None:
        late.append(f"{where}: {what} is never received under lock-step execution")
    elif got >= t:
        late.append(f"{where}: {what} is received at step {got}, not before step {t}: "
                    f"PipelineScheduleMulti would compute on an unfilled buffer")


# --- _PipelineScheduleRuntime._load_csv(format="compute_only"): the lowering ---------------

def add_unshard_reshard(row, max_active_stages=3):
    """`_add_unshard_reshard`: drops idle steps; before each action, UNSHARD the next
    `max_active_stages` distinct stages the row will compute and RESHARD the others."""
    compute = [a for a in row if a is not None]
    active, out = [], []
    for i, a in enumerate(compute):
        upcoming = []
        for b in compute[i:]:
            if b.stage not in upcoming:
                upcoming.append(b.stage)
                if len(upcoming) == max_active_stages:
                    break
        for s in [s for s in active if s not in upcoming]:
            active.remove(s)
            out.append(Action(s, "RESHARD", None))
        for s in [s for s in upcoming if s not in active]:
            active.append(s)
            out.append(Action(s, "UNSHARD", None))
        out.append(a)
    out.extend(Action(s, "RESHARD", None) for s in list(active))
    return out


def add_reduce_grad(row, num_microbatches):
    """`_add_reduce_grad`: REDUCE_GRAD right after a stage's last W or B."""
    out, count = [], {}
    for a in row:
        if a is None:
            continue
        out.append(a)
        if a.kind in ("W", "B"):
            count[a.stage] = count.get(a.stage, 0) + 1
            if count[a.stage] == num_microbatches:
                out.append(Action(a.stage, "REDUCE_GRAD", None))
    return out


def add_send_recv(rows, stage_to_rank, num_stages):
    """`_add_send_recv`: visits the ranks in order, round after round; a rank's next action
    is placed once its input is on that rank (received, or made by the neighbouring stage on
    the same rank), then the action's SEND goes on its rank and the matching RECV on the
    receiver's, at that moment. A round in which no rank moves is PyTorch's
    `Malformed compute schedule, can't schedule sends/recvs` (the order deadlocks)."""
    for rank, row in rows.items():
        if not row:  # PyTorch asserts on a rank with nothing to do
            raise ScheduleError(f"rank={rank}, len(compute_actions[rank])=0")
    todo = {r: list(row) for r, row in rows.items()}
    out = {r: [] for r in rows}
    done = {r: set() for r in rows}

    def has_comms(a):
        if a.kind == "F":
            return a.stage != num_stages - 1 and \
                stage_to_rank[a.stage + 1] != stage_to_rank[a.stage]
        if a.kind in ("I", "B"):
            return a.stage != 0 and stage_to_rank[a.stage - 1] != stage_to_rank[a.stage]
        return False

    def ready(a, prev):
        if a.kind == "F" and a.stage != 0:
            return Action(a.stage, "RECV_F", a.mb) in prev or \
                Action(a.stage - 1, "F", a.mb) in prev
        if a.kind in ("I", "B") and a.stage != num_stages - 1:
            return any(x in prev for x in (Action(a.stage, "RECV_B", a.mb),
                                           Action(a.stage + 1, "I", a.mb),
                                           Action(a.stage + 1, "B", a.mb)))
        return True

    while todo:
        progress = False
        for rank in sorted(todo):
            a = todo[rank][0]
            if not ready(a, done[rank]):
                continue
            out[rank].append(a)
            done[rank].add(a)
            if has_comms(a):
                forward = a.kind == "F"
                send = Action(a.stage, "SEND_F" if forward else "SEND_B", a.mb)
                recv = Action(a.stage + 1 if forward else a.stage - 1,
                              "RECV_F" if forward else "RECV_B", a.mb)
                out[rank].append(send)
                done[rank].add(send)
                peer = stage_to_rank[recv.stage]
                out[peer].append(recv)
                done[peer].add(recv)
            todo[rank].pop(0)
            if not todo[rank]:
                del todo[rank]
            progress = True
        if not progress:
            stuck = ", ".join(f"rank {r} at {todo[r][0]}" for r in sorted(todo))
            raise ScheduleError(f"Malformed compute schedule, can't schedule sends/recvs "
                                f"({stuck})")
    return out


def lower_compute_only(actions, stage_to_rank, num_stages, num_microbatches):
    """`_prepare_schedule_with_comms(actions, format="compute_only")` after validation."""
    for rank, row in actions.items():
        for i, a in enumerate(row):
            if a is not None and a.kind not in COMPUTE:
                raise ScheduleError(f"Expected compute-only schedule but found communication "
                                    f"action '{a}' at rank {rank}, position {i}.")
    rows = {r: add_reduce_grad(add_unshard_reshard(row), num_microbatches)
            for r, row in actions.items()}
    return add_send_recv(rows, stage_to_rank, num_stages)


# --- _PipelineScheduleRuntime._step_microbatches -------------------------------------------

def run_runtime(comm_rows, stage_to_rank, num_stages):
    """Runs the lowered rows of all ranks together. SEND and RECV post non-blocking
    operations; F waits for the RECV_F of its stage and microbatch (unless stage 0 or the
    previous stage is on the same rank), I and B for the RECV_B (unless the last stage or
    the next stage is on the same rank): a missing receive is PyTorch's `Computing ...
    before receiving input`, a second one `Recv twice`. A posted receive completes once the
    peer has posted the matching send; point-to-point messages between two ranks are matched
    in the order they are posted (gloo without tags, NCCL), so both sides must post them in
    the same order. A state where no rank can move is a deadlock."""
    pos = {r: 0 for r in comm_rows}
    posted_recv = {r: {} for r in comm_rows}   # (direction, stage, mb) -> index
    sends, recvs = {}, {}                      # (src, dst) -> [key, ...] in posting order
    losses = Losses()
    while any(pos[r] < len(comm_rows[r]) for r in comm_rows):
        moved = False
        for r in sorted(comm_rows):
            while pos[r] < len(comm_rows[r]):
                a = comm_rows[r][pos[r]]
                where = f"rank {r} action {pos[r]} ({a})"
                if not _runtime_step(a, r, where, stage_to_rank, num_stages, posted_recv,
                                     sends, recvs, losses):
                    break
                pos[r] += 1
                moved = True
        if not moved:
            stuck = ", ".join(f"rank {r} at {comm_rows[r][pos[r]]}" for r in sorted(comm_rows)
                              if pos[r] < len(comm_rows[r]))
            raise ScheduleError(f"deadlock: every rank waits ({stuck})")
    for pair, keys in sends.items():
        if recvs.get(pair, []) != keys:
            raise ScheduleError(f"ranks {pair[0]} -> {pair[1]}: sends {keys} but receives "
                                f"{recvs.get(pair, [])} (in posting order)")
    return True


def _runtime_step(a, r, where, stage_to_rank, num_stages, posted_recv, sends, recvs, losses):
    """One action of one rank; False when it must wait."""
    last = num_stages - 1
    if a.kind in ("SEND_F", "SEND_B"):
        forward = a.kind == "SEND_F"
        key = ("F" if forward else "B", a.stage + 1 if forward else a.stage - 1, a.mb)
        sends.setdefault((r, stage_to_rank[key[1]]), []).append(key)
        return True
    if a.kind in ("RECV_F", "RECV_B"):
        key = (a.kind[-1], a.stage, a.mb)
        if key in posted_recv[r]:
            raise ScheduleError(f"{where}: Recv twice for stage {a.stage} microbatch {a.mb}")
        peer = stage_to_rank[a.stage - 1 if a.kind == "RECV_F" else a.stage + 1]
        posted_recv[r][key] = len(recvs.setdefault((peer, r), []))
        recvs[(peer, r)].append(key)
        return True
    if a.kind == "F" and a.stage > 0 and stage_to_rank[a.stage - 1] != r:
        if not _received(("F", a.stage, a.mb), stage_to_rank[a.stage - 1], r, where,
                         posted_recv, sends):
            return False
    if a.kind in ("I", "B") and a.stage < last and stage_to_rank[a.stage + 1] != r:
        if not _received(("B", a.stage, a.mb), stage_to_rank[a.stage + 1], r, where,
                         posted_recv, sends):
            return False
    if a.stage == last and a.kind == "F":
        losses.forward(a.mb)
    if a.stage == last and a.kind in ("I", "B"):
        losses.backward(a.mb, where)
    return True


def _received(key, peer, r, where, posted_recv, sends):
    if key not in posted_recv[r]:
        raise ScheduleError(f"{where}: Computing {key[0]} of stage {key[1]} microbatch "
                            f"{key[2]} before receiving input")
    return key in sends.get((peer, r), [])


def load_runtime(path, pp_group_size, num_stages, num_microbatches):
    """`_PipelineScheduleRuntime._load_csv(path, format="compute_only")`, then a dry run of
    its executor over all ranks. Returns (rows, stage -> rank, lowered rows)."""
    actions, stage_to_rank = load_compute_only(path, pp_group_size, num_stages,
                                               num_microbatches)
    lowered = lower_compute_only(actions, stage_to_rank, num_stages, num_microbatches)
    run_runtime(lowered, stage_to_rank, num_stages)
    return actions, stage_to_rank, lowered


# --- rank numbering ------------------------------------------------------------------------

def group_rank(global_rank, group_ranks):
    """`dist.get_rank(new_group(ranks))`: new_group sorts its ranks, so a process's rank in
    the group is its position among them in ascending order (checked against real gloo
    processes in tests/test_torch_csv.py)."""
    return sorted(group_ranks).index(global_rank)
