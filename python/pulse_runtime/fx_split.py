"""Any traceable nn.Module as a block-list model: the torch.fx front end.

`split(module, make_batch, loss_sum)` traces the module with torch.fx and cuts the graph into
layers, one per call of an outermost non-container submodule (a direct child, or an element
of a ModuleList / ModuleDict / Sequential child, recursively through containers). Every other
graph node (torch functions, tensor methods, parameter reads) joins the layer of its first
consumer, so `torch.cat([h, skips.pop()])` runs in the decoder layer that uses it; nodes
only the output uses join the last layer. A UNet that pushes encoder outputs on a list and
pops them in its decoder traces to plain data flow (the list exists only while tracing), as
long as control flow does not depend on tensor values.

Values that cross layers are classified from the graph:

- the main path: layer j's output (its module call's result; for the last layer, the
  model's output) is the main input of layer j+1;
- a skip: layer j's output used by exactly one later layer k > j+1 (one skip j -> k); this
  is what a skip list gives;
- a carried tensor: layer j's output used by two or more layers after j+1 (a timestep
  embedding every block reads), or any other value of layer j used by a later layer;
- batch fields (the forward's arguments, taken by name from the batch) are on every rank
  and never cross.

The result follows the block-list protocol (blocklist.py), so the profiler and the runtime
take it unchanged; parameter names are the original module's. Refused with a clear
message: a submodule called twice or a parameter read by two layers (shared weights cannot
be split), a non-tensor value crossing layers, a model output that is not the last layer's.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Iterator

import torch
import torch.fx as fx
from torch import nn

Batch = dict[str, Any]

CONTAINERS = (nn.ModuleList, nn.ModuleDict, nn.Sequential)


class SplitError(TypeError):
    pass


def outermost_modules(root: nn.Module) -> list[str]:
    """Qualified names of the first non-container module on every path from the root."""
    out = []

    def walk(module: nn.Module, prefix: str) -> None:
        for name, child in module.named_children():
            qualified = f"{prefix}.{name}" if prefix else name
            if isinstance(child, CONTAINERS):
                walk(child, qualified)
            else:
                out.append(qualified)
    walk(root, "")
    return out


class _LayerTracer(fx.Tracer):
    def __init__(self, leaves: list[str]) -> None:
        super().__init__()
        self.leaves = set(leaves)

    def is_leaf_module(self, m: nn.Module, qualified_name: str) -> bool:
        return qualified_name in self.leaves or super().is_leaf_module(m, qualified_name)


def _attr(root: nn.Module, target: str) -> Any:
    value = root
    for part in target.split("."):
        value = getattr(value, part)
    return value


class FxLayer(nn.Module):
    """The nodes of one layer, run on the values it receives."""

    def __init__(self, root: nn.Module, nodes: list[fx.Node],
                 inputs: dict[str, tuple[str, Any]]) -> None:
        super().__init__()
        self.root_ref = [root]  # a plain list: not a registered submodule
        self.nodes = nodes
        self.inputs = inputs  # node name -> ("main", None) | ("skip", name) | ("carried", name)
        #                       | ("batch", field)
        self.mods = nn.ModuleDict()
        for node in nodes:
            if node.op == "call_module":
                module = root.get_submodule(node.target)
                self.mods[node.target.replace(".", "__")] = module
            elif node.op == "get_attr":
                value = _attr(root, node.target)
                if isinstance(value, nn.Parameter):
                    self.register_parameter(node.target.replace(".", "__"), value)
        self.main_out = None
        self.carried_out = {}  # carried name -> node name
        self.defaults = {}  # forward argument -> default, for arguments no batch has

    @property
    def owned(self) -> list[tuple[str, nn.Parameter]]:
        """(original name, parameter) of the layer, in a fixed order: read from the modules
        each time, so a wrapper that replaces parameters (FSDP's fully_shard) is seen."""
        out = []
        for node in self.nodes:
            key = node.target.replace(".", "__") if isinstance(node.target, str) else None
            if node.op == "call_module":
                out += [(f"{node.target}.{n}", p) for n, p in self.mods[key].named_parameters()]
            elif node.op == "get_attr" and key in self._parameters:
                out.append((node.target, self._parameters[key]))
        return out

    def forward(self, h: torch.Tensor, env: dict[str, Any]
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        root = self.root_ref[0]
        values = {}
        for node_name, (kind, name) in self.inputs.items():
            if kind == "main":
                values[node_name] = h
            elif kind == "batch" and name not in env:  # an argument left at its default
                values[node_name] = self.defaults[name]
            else:
                values[node_name] = env[name]
        for node in self.nodes:
            args = fx.node.map_arg(node.args, lambda n: values[n.name])
            kwargs = fx.node.map_arg(node.kwargs, lambda n: values[n.name])
            if node.op == "call_module":
                values[node.name] = self.mods[node.target.replace(".", "__")](*args, **kwargs)
            elif node.op == "call_function":
                values[node.name] = node.target(*args, **kwargs)
            elif node.op == "call_method":
                values[node.name] = getattr(args[0], node.target)(*args[1:], **kwargs)
            elif node.op == "get_attr":  # the layer's own parameter, as registered now
                key = node.target.replace(".", "__")
                values[node.name] = (getattr(self, key) if key in self._parameters
                                     else _attr(root, node.target))
        return values[self.main_out], {c: values[n] for c, n in self.carried_out.items()}


class FxModel(nn.Module):
    """A traced module in the block-list protocol (see the module docstring)."""

    def __init__(self, module: nn.Module, make_batch: Callable[..., Batch],
                 loss_sum: Callable[[torch.Tensor, Batch], torch.Tensor],
                 layers: list[FxLayer], names: list[str], kinds: list[str],
                 skips: list[dict[str, Any]], carried: list[dict[str, Any]],
                 fields: list[tuple[str, Any]]) -> None:
        super().__init__()
        self.module = module
        self.blocks = nn.ModuleList(layers)
        self.block_names, self.block_kinds = names, kinds
        self.skips, self.carried = skips, carried
        self.fields = fields  # (argument name, default or inspect.Parameter.empty)
        self._make_batch, self._loss_sum = make_batch, loss_sum

    def make_batch(self, n: int, seed: int, dtype: torch.dtype | None = None,
                   device: Any = "cpu") -> Batch:
        if dtype is None:  # the model's, as block-list models do
            dtype = next((p.dtype for p in self.module.parameters()), None)
        return self._make_batch(n, seed, dtype=dtype, device=device)

    def loss_sum(self, out: torch.Tensor, batch: Batch) -> torch.Tensor:
        return self._loss_sum(out, batch)

    def first_input(self, batch: Batch) -> torch.Tensor:
        # Layer 0 has no main input: this is passed and ignored.
        return next(batch[n] for n, _ in self.fields if n in batch)

    def named_block_parameters(self, i: int) -> Iterator[tuple[str, nn.Parameter]]:
        return iter(self.blocks[i].owned)

    def forward(self, batch: Batch) -> torch.Tensor:
        """The original module on the whole batch: the one-device reference."""
        return self.module(*self.arguments(batch))

    def arguments(self, batch: Batch) -> list[Any]:
        args = []
        for name, default in self.fields:
            if name in batch:
                args.append(batch[name])
            elif default is not inspect.Parameter.empty:
                args.append(default)
            else:
                raise SplitError(f"the batch has no field {name!r} for {type(self.module).__name__}"
                                 f".forward")
        return args


def split(module: nn.Module, make_batch: Callable[..., Batch],
          loss_sum: Callable[[torch.Tensor, Batch], torch.Tensor]) -> FxModel:
    """Traces `module` and returns its FxModel (module docstring)."""
    signature = inspect.signature(module.forward)
    fields = [(n, p.default) for n, p in signature.parameters.items()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    dtype = next((p.dtype for p in module.parameters()), torch.float32)
    example = make_batch(2, seed=0, dtype=dtype)
    concrete = {n: d for n, d in fields if n not in example and d is not inspect.Parameter.empty}
    try:
        graph = _LayerTracer(outermost_modules(module)).trace(module,
                                                              concrete_args=concrete or None)
    except Exception as e:  # fx raises TraceError, TypeError, ... from inside user code
        raise SplitError(f"torch.fx cannot trace {type(module).__name__}.forward: {e} (control "
                         f"flow must not depend on tensor values; see docs/torch.md)") from e
    nodes = list(graph.nodes)
    anchors = [n for n in nodes if n.op == "call_module"]
    if not anchors:
        raise SplitError(f"{type(module).__name__}: forward calls no submodule to make layers of")
    targets = [n.target for n in anchors]
    twice = sorted({t for t in targets if targets.count(t) > 1})
    if twice:
        raise SplitError(f"submodule(s) {twice} are called more than once in forward: shared "
                         f"weights cannot be split across layers")
    layer_of = _assign_layers(nodes, anchors)
    output = next(n for n in nodes if n.op == "output")
    main = [a for a in anchors[:-1]] + [output.args[0]]
    if not isinstance(main[-1], fx.Node) or layer_of.get(main[-1]) != len(anchors) - 1:
        raise SplitError("the model's output must be one tensor computed by its last layer")
    names = list(targets)
    layers = [FxLayer(module, [n for n in nodes if layer_of.get(n) == j], {})
              for j in range(len(anchors))]
    for j, layer in enumerate(layers):
        layer.main_out = main[j].name
        layer.defaults = dict(concrete)
    skips, carried = _cross_layer_values(nodes, layer_of, main, names, layers)
    _check_parameters(layers)
    kinds = [type(module.get_submodule(t)).__name__ for t in targets]
    model = FxModel(module, make_batch, loss_sum, layers, names, kinds, skips, carried, fields)
    _mark_gradients(model, example)
    return model


def _assign_layers(nodes: list[fx.Node], anchors: list[fx.Node]) -> dict[fx.Node, int]:
    """Anchors are layers 0..n-1; other nodes join their first consumer's layer."""
    layer_of = {a: j for j, a in enumerate(anchors)}
    last = len(anchors) - 1
    for node in reversed(nodes):
        if node in layer_of or node.op in ("placeholder", "output"):
            continue
        users = [last if u.op == "output" else layer_of.get(u) for u in node.users]
        users = [u for u in users if u is not None]
        if users:  # a node nothing uses is dead code: not run
            layer_of[node] = min(users)
    return layer_of


def _cross_layer_values(nodes: list[fx.Node], layer_of: dict[fx.Node, int], main: list[Any],
                        names: list[str], layers: list[FxLayer]
                        ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Fills each layer's inputs and carried outputs; returns (skips, carried)."""
    skips, carried = [], []
    main_of = {m: j for j, m in enumerate(main)}
    for node in nodes:
        if node.op == "placeholder":
            for u in node.users:
                if u in layer_of:
                    layers[layer_of[u]].inputs[node.name] = ("batch", node.target)
            continue
        if node not in layer_of:
            continue
        j = layer_of[node]
        consumers = sorted({layer_of[u] for u in node.users if u in layer_of} - {j})
        if not consumers:
            continue
        later = [k for k in consumers if k != j + 1] if node in main_of else consumers
        if node in main_of and j + 1 in consumers:
            layers[j + 1].inputs[node.name] = ("main", None)
        if not later:
            continue
        if node in main_of and len(later) == 1:
            skip = f"{names[j]}->{names[later[0]]}"
            skips.append({"name": skip, "producer": names[j], "consumer": names[later[0]]})
            layers[later[0]].inputs[node.name] = ("skip", skip)
            continue
        name = names[j] if node in main_of else f"{names[j]}:{node.name}"
        carried.append({"name": name, "producer": names[j], "needs_gradient": True})
        layers[j].carried_out[name] = node.name
        for k in later:
            layers[k].inputs[node.name] = ("carried", name)
    return skips, carried


def _check_parameters(layers: list[FxLayer]) -> None:
    owner = {}
    for j, layer in enumerate(layers):
        for name, p in layer.owned:
            if id(p) in owner and owner[id(p)] != j:
                raise SplitError(f"parameter {name} is used by two layers: shared weights "
                                 f"cannot be split across layers")
            owner[id(p)] = j


def _mark_gradients(model: FxModel, batch: Batch) -> None:
    """A dry run: crossing values must be tensors with the batch first; a carried tensor
    needs its gradient sent back only when it depends on parameters."""
    env, h = dict(batch), model.first_input(batch)
    n = next(iter(batch.values())).shape[0]
    by_name = {c["name"]: c for c in model.carried}
    producers = {}
    for s in model.skips:
        producers.setdefault(s["producer"], []).append(s["name"])
    with torch.enable_grad():
        for name, block in zip(model.block_names, model.blocks):
            h, produced = block(h, env)
            for what, value in [("main path after", h)] + \
                    [(f"carried {k} from", v) for k, v in produced.items()]:
                if not isinstance(value, torch.Tensor) or value.dim() == 0 or \
                        value.shape[0] != n:
                    raise SplitError(f"{what} layer {name} is not a tensor with the batch as its "
                                     f"first dimension: pipeline stages can only send those")
            for k, v in produced.items():
                by_name[k]["needs_gradient"] = bool(v.requires_grad and v.is_floating_point())
            env.update(produced)
            for skip in producers.get(name, ()):
                env[skip] = h
