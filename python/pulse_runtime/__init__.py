"""pulse_runtime: execute pulse-plan plans with torch.distributed.

- `pulse-run` (cli.py): train a model by a plan, on one host or under torchrun;
- `pulse-profile` (profiler.py): measure a model into a pulse.model/v1 profile;
- models.load: `FILE.py:FUNCTION` -> a block-list model; any traceable nn.Module is split
  into layers by the torch.fx front end (fx_split.py);
- reference.reference_train: the same training on one process, to compare with.

docs/torch.md in the pulse-plan repository describes all of it.
"""

__version__ = "0.1.0"
