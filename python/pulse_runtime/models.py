"""`FILE.py:FUNCTION` -> a model the profiler and the runtime can run.

The function is called as `FUNCTION(seed=..., dtype=...)` and returns a block-list model
(`blocks`, `block_names`, `skips`, `carried`, ...; docs/torch.md).
"""

from . import blocklist


class ModelError(TypeError):
    pass


def load(spec, seed=0, dtype=None):
    module, factory = blocklist.load_module(spec)
    kwargs = {"seed": seed} if dtype is None else {"seed": seed, "dtype": dtype}
    model = factory(**kwargs)
    if blocklist.is_block_list(model):
        blocklist.check_protocol(model)
        return model
    raise ModelError(f"{spec} returned a {type(model).__name__}, not a block-list model "
                     f"(docs/torch.md)")
