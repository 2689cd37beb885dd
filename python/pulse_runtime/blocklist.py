"""The block-list model protocol, shared by the profiler and the runtime.

A model is an ordered list of named blocks plus a skip specification and carried tensors
(docs/torch.md and examples/small_unet.py document the protocol; the fx front end,
fx_split.py, turns an ordinary nn.Module into one). ``BlockRange`` runs any contiguous range
of blocks given its inputs: that is a pipeline stage for the runtime and one block for the
profiler. Nothing here knows about a particular model.
"""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType
from typing import Any, Callable, Iterable, Iterator

import torch
from torch.utils.checkpoint import checkpoint


def load_factory(spec: str) -> Callable[..., Any]:
    """``path/to/file.py:function`` -> the function (it builds the model)."""
    return load_module(spec)[1]


def load_module(spec: str) -> tuple[ModuleType, Callable[..., Any]]:
    """``path/to/file.py:function`` -> (the loaded Python module, the function)."""
    path, sep, func = spec.rpartition(":")
    if not sep or not path.endswith(".py"):
        raise ValueError(f"model spec {spec!r}: expected FILE.py:FUNCTION")
    name = "blocklist_model_" + os.path.splitext(os.path.basename(path))[0]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None:
        raise ValueError(f"model spec {spec!r}: cannot load {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not hasattr(module, func):
        raise ValueError(f"model spec {spec!r}: {path} has no function {func}")
    return module, getattr(module, func)


def is_block_list(model: Any) -> bool:
    return all(hasattr(model, a) for a in ("blocks", "block_names", "skips", "carried"))


def check_protocol(model: Any) -> None:
    """Fail early with a clear message when a model does not follow the protocol."""
    for attr in ("blocks", "block_names", "skips", "carried", "make_batch", "first_input",
                 "loss_sum"):
        if not hasattr(model, attr):
            raise TypeError(f"{type(model).__name__} lacks '{attr}' (block-list protocol)")
    names = list(model.block_names)
    if len(names) != len(model.blocks) or len(set(names)) != len(names):
        raise TypeError("block_names must name every block once")
    index = {n: i for i, n in enumerate(names)}
    for s in model.skips:
        if index.get(s["producer"], len(names)) >= index.get(s["consumer"], -1):
            raise TypeError(f"skip {s['name']}: producer must come before consumer")
    for c in model.carried:
        if c["producer"] is not None and c["producer"] not in index:
            raise TypeError(f"carried {c['name']}: unknown producer {c['producer']}")


def block_index(model: Any) -> dict[str, int]:
    return {name: i for i, name in enumerate(model.block_names)}


class BlockRange:
    """Blocks first..last (inclusive) of a block-list model, run as one unit.

    Inputs: the main-path tensor, and an env with the batch fields, carried tensors and the
    skip tensors consumed here but produced before ``first``. Outputs: the main-path tensor
    and a dict with the skip tensors produced here and consumed after ``last`` plus the
    carried tensors made here. Skips with both ends inside stay inside the autograd graph.
    The blocks named in ``recomputed`` run under torch.utils.checkpoint: each keeps only its
    inputs and runs its forward again in the backward (``plan --recompute``).
    """

    def __init__(self, model: Any, first: int, last: int,
                 recomputed: Iterable[str] = ()) -> None:
        self.model, self.first, self.last = model, first, last
        self.recomputed = frozenset(recomputed)
        idx = block_index(model)
        def inside(name: str) -> bool:
            return first <= idx[name] <= last

        self.names = list(model.block_names[first:last + 1])
        self.skips_in = [s["name"] for s in model.skips
                         if inside(s["consumer"]) and idx[s["producer"]] < first]
        self.skips_out = [s["name"] for s in model.skips
                          if inside(s["producer"]) and idx[s["consumer"]] > last]
        self.carried_out = [c["name"] for c in model.carried
                            if c["producer"] is not None and inside(c["producer"])]
        self._pushes = {}
        for s in model.skips:
            if inside(s["producer"]):
                self._pushes.setdefault(s["producer"], []).append(s["name"])

    def parameters(self) -> Iterator[torch.nn.Parameter]:
        for block in self.model.blocks[self.first:self.last + 1]:
            yield from block.parameters()

    def named_parameters(self) -> Iterator[tuple[str, torch.nn.Parameter]]:
        for i in range(self.first, self.last + 1):
            yield from block_named_parameters(self.model, i)

    def forward(self, h: torch.Tensor, env: dict[str, Any]
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        env = dict(env)
        outputs = {}
        for i in range(self.first, self.last + 1):
            name = self.model.block_names[i]
            if name in self.recomputed:
                # A copy: the recomputation must see env as this block saw it.
                h, produced = checkpoint(self.model.blocks[i], h, dict(env),
                                         use_reentrant=False)
            else:
                h, produced = self.model.blocks[i](h, env)
            env.update(produced)
            outputs.update((k, v) for k, v in produced.items() if k in self.carried_out)
            for skip in self._pushes.get(name, ()):
                env[skip] = h  # the skip tensor is the producer's output
                if skip in self.skips_out:
                    outputs[skip] = h
        return h, outputs


class StageModule(torch.nn.Module):
    """A BlockRange as one nn.Module (its blocks registered as children): the unit a stage's
    hooks attach to, FSDP's root for the stage under ZeRO-2/3 (sharding.py)."""

    def __init__(self, blocks: BlockRange) -> None:
        super().__init__()
        self.range = blocks
        self.blocks = torch.nn.ModuleList(blocks.model.blocks[blocks.first:blocks.last + 1])

    def forward(self, h: torch.Tensor, env: dict[str, Any]
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return self.range.forward(h, env)


def detached_leaf(t: torch.Tensor) -> torch.Tensor:
    """A stage-boundary copy: shares memory, starts a new autograd graph, collects the
    gradient in .grad (floating-point tensors only)."""
    leaf = t.detach()
    if leaf.is_floating_point():
        leaf.requires_grad_(True)
    return leaf


def tensor_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def block_named_parameters(model: Any, i: int) -> Iterator[tuple[str, torch.nn.Parameter]]:
    """Block i's parameters with names stable across stage splits: the model's own names
    when it defines ``named_block_parameters(i)`` (the fx front end: the original module's
    names), else ``<block name>.<parameter path>``."""
    hook = getattr(model, "named_block_parameters", None)
    if hook is not None:
        yield from hook(i)
        return
    for pname, p in model.blocks[i].named_parameters():
        yield f"{model.block_names[i]}.{pname}", p


def named_parameters(model: Any) -> Iterator[tuple[str, torch.nn.Parameter]]:
    """Every parameter of the model, named as block_named_parameters does."""
    for i in range(len(model.blocks)):
        yield from block_named_parameters(model, i)


def keep_freed_memory() -> None:
    """Ask glibc to keep freed memory instead of returning it to the OS.

    By default glibc serves large blocks with mmap and unmaps them on free, so each
    microbatch's activations page-fault afresh on first touch; under the gVisor sandbox this
    project's CI runs in, that tripled op times in the runtime (measured, docs/fidelity.md).
    The profiler and the runtime both call this, so profiled and executed ops see the same
    allocator. No-op where glibc's mallopt is unavailable."""
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
        libc.mallopt(m_mmap_threshold, 32 << 20)  # glibc's maximum: 32 MiB on 64-bit
        libc.mallopt(m_trim_threshold, 1 << 30)
        libc.mallopt(m_top_pad, 64 << 20)
    except (OSError, AttributeError):
        pass
