"""Single-process training on the same batch: the ground truth the runtime is checked
against (same loss, same gradient for every parameter, same parameters after the step)."""

import torch

import blocklist


def reference_step(model, global_batch, seed, lr):
    batch = model.make_batch(global_batch, seed=seed)
    model.zero_grad(set_to_none=True)
    loss = model.loss_sum(model(batch), batch) / global_batch
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in blocklist.named_parameters(model)}
    torch.optim.SGD(model.parameters(), lr=lr).step()
    params = {n: p.detach().clone() for n, p in blocklist.named_parameters(model)}
    return {"loss": loss.item(), "grads": grads, "params": params}


def relative_error(a, b):
    """||a - b|| / ||b||, with 0/0 = 0 (a parameter whose gradient is exactly zero)."""
    diff = (a - b).norm().item()
    ref = b.norm().item()
    return diff / ref if ref > 0 else diff


def compare(named_a, named_b):
    """Largest relative error over parameters, and the parameter it occurs at; fails when
    the two sets of names differ."""
    if set(named_a) != set(named_b):
        missing = sorted(set(named_b) - set(named_a))
        extra = sorted(set(named_a) - set(named_b))
        raise AssertionError(f"parameter sets differ: missing {missing[:5]}, extra {extra[:5]}")
    worst = max(named_b, key=lambda n: relative_error(named_a[n], named_b[n]))
    return relative_error(named_a[worst], named_b[worst]), worst
