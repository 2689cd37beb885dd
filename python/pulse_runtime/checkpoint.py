"""Checkpoints that survive a kill at any moment.

After iteration n (counted from 1) every rank writes DIR/iter-<n>/rank<R>.pt: its stages'
parameters, its optimizer state (its shard under ZeRO-1), the RNG state, and what the run
was (plan sha256, world size, dtype, optimizer). The file is written under a temporary name
and renamed, so it is either complete or absent. After a barrier (every rank holds n) each
rank deletes its own older files. To resume, the ranks exchange the iterations they hold and
continue from the newest one all of them have: a kill during a save leaves the previous
checkpoint, which is still complete everywhere. DIR may be local to each host.
"""

from __future__ import annotations

import os
import re
from typing import Any

import torch
import torch.distributed as dist

ITER = re.compile(r"iter-(\d+)$")


def _dir(root: str, iteration: int) -> str:
    return os.path.join(root, f"iter-{iteration:06d}")


def _held(root: str, rank: int) -> set[int]:
    """Iterations for which this rank's file exists."""
    if not os.path.isdir(root):
        return set()
    out = set()
    for name in os.listdir(root):
        m = ITER.match(name)
        if m and os.path.exists(os.path.join(root, name, f"rank{rank}.pt")):
            out.add(int(m.group(1)))
    return out


def save(root: str, iteration: int, rank: int, state: dict[str, Any]) -> None:
    path = os.path.join(_dir(root, iteration), f"rank{rank}.pt")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    state = dict(state, iteration=iteration, rng=torch.get_rng_state())
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)
    dist.barrier()
    for old in _held(root, rank):
        if old < iteration:
            os.remove(os.path.join(_dir(root, old), f"rank{rank}.pt"))
            try:
                os.rmdir(_dir(root, old))  # the last rank to leave removes the folder
            except OSError:
                pass


def resume_point(root: str, rank: int, world_size: int) -> int:
    """The newest iteration every rank holds (0: none); collective over all ranks."""
    held: list[Any] = [None] * world_size
    dist.all_gather_object(held, sorted(_held(root, rank)))
    common = set(held[0]).intersection(*map(set, held[1:]))
    return max(common, default=0)


def load(root: str, iteration: int, rank: int, expect: dict[str, Any]) -> dict[str, Any]:
    """This rank's checkpoint of `iteration`; ValueError when it is from another run
    (`expect`: the keys that must match)."""
    state = torch.load(os.path.join(_dir(root, iteration), f"rank{rank}.pt"))
    for key, want in expect.items():
        if state.get(key) != want:
            raise ValueError(f"checkpoint {_dir(root, iteration)} rank {rank}: {key} is "
                             f"{state.get(key)!r}, this run has {want!r}")
    torch.set_rng_state(state["rng"])
    return state


def existing(root: str) -> bool:
    """Whether DIR already holds checkpoints (a fresh run refuses to mix with them)."""
    return os.path.isdir(root) and any(ITER.match(n) for n in os.listdir(root))
