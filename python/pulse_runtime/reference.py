"""Single-process training on the same batches: the ground truth the runtime is checked
against (same loss, same gradient for every parameter, same parameters after the steps)."""

from __future__ import annotations

from typing import Any

import torch

from . import blocklist, optim


def reference_step(model: Any, global_batch: int, seed: int, lr: float) -> dict[str, Any]:
    """One SGD step on the batch of `seed` (the runtime's first iteration with --seed
    seed - 1)."""
    return reference_train(model, global_batch, seed - 1, 1, optim.Config("sgd", lr))


def reference_train(model: Any, global_batch: int, seed: int, iterations: int,
                    config: optim.Config, shapes: list[dict[str, int]] | None = None
                    ) -> dict[str, Any]:
    """`iterations` steps on one process, iteration i on the batch of seed + 1 + i as the
    runtime takes it (`shapes[i]`: make_batch's shape keywords then, a plan's bucket);
    returns the losses, the last step's gradients and the parameters after the last step."""
    optimizer = config.make(list(model.parameters()))
    losses = []
    for it in range(iterations):
        batch = model.make_batch(global_batch, seed=seed + 1 + it,
                                 **(shapes[it] if shapes else {}))
        optimizer.zero_grad(set_to_none=True)
        loss = model.loss_sum(model(batch), batch) / global_batch
        loss.backward()
        losses.append(loss.item())
        grads = {n: p.grad.detach().clone() for n, p in blocklist.named_parameters(model)}
        optimizer.step()
    params = {n: p.detach().clone() for n, p in blocklist.named_parameters(model)}
    return {"loss": losses[0], "losses": losses, "grads": grads, "params": params}


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """||a - b|| / ||b||, with 0/0 = 0 (a parameter whose gradient is exactly zero)."""
    diff = (a - b).norm().item()
    ref = b.norm().item()
    return diff / ref if ref > 0 else diff


def compare(named_a: dict[str, torch.Tensor], named_b: dict[str, torch.Tensor]
            ) -> tuple[float, str]:
    """Largest relative error over parameters, and the parameter it occurs at; fails when
    the two sets of names differ."""
    if set(named_a) != set(named_b):
        missing = sorted(set(named_b) - set(named_a))
        extra = sorted(set(named_a) - set(named_b))
        raise AssertionError(f"parameter sets differ: missing {missing[:5]}, extra {extra[:5]}")
    worst = max(named_b, key=lambda n: relative_error(named_a[n], named_b[n]))
    return relative_error(named_a[worst], named_b[worst]), worst
