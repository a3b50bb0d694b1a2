"""What What if recomputes for a PyTorch run's optimizer (``rules.torch_optimizers``) against a real ``torch.optim``
optimizer's own ``state`` after its first step: every tensor's name, shape and dtype, for each class and flag."""

from __future__ import annotations

import json
import math

import pytest

from tb_modelmem.rules import torch_optimizers
from tb_modelmem.schema.names import OPTIMIZER_SLOT, OTHER

torch = pytest.importorskip("torch")

CASES = [("SGD", {"lr": 0.1}), ("SGD", {"lr": 0.1, "momentum": 0.9}), ("Adam", {}), ("Adam", {"amsgrad": True}),
         ("AdamW", {}), ("Adamax", {}), ("NAdam", {}), ("RAdam", {}), ("Adagrad", {}), ("Adadelta", {}),
         ("RMSprop", {}), ("RMSprop", {"momentum": 0.9, "centered": True}), ("Adafactor", {})]


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(11, 6), torch.nn.Flatten(), torch.nn.Linear(18, 5),
                               torch.nn.LayerNorm(5), torch.nn.Linear(5, 3))


@pytest.mark.parametrize("cls,config", CASES, ids=[f"{c}-{'-'.join(k)}" for c, k in CASES])
def test_the_state_each_class_keeps_is_what_its_first_step_makes(cls, config):
    if not hasattr(torch.optim, cls):
        pytest.skip(f"torch {torch.__version__} has no torch.optim.{cls}")
    model = _model()
    optimizer = getattr(torch.optim, cls)(model.parameters(), **config)
    model(torch.randint(0, 11, (4, 3))).sum().backward()
    optimizer.step()
    truth = {}
    for index, p in enumerate(model.parameters()):
        for key, value in optimizer.state[p].items():
            if torch.is_tensor(value):
                truth[f"optimizer.state.{index}.{key}"] = (tuple(value.shape), str(value.dtype).split(".")[1])
    trainable = [(name, tuple(p.shape), "float32") for name, p in model.named_parameters()]
    entry = {"class_name": cls, "config": dict(optimizer.param_groups[0], params=None)}
    found_cls, flags = torch_optimizers.plan(entry)
    made = torch_optimizers.state_of(found_cls, flags, trainable)
    assert {name: (shape, dtype) for _, name, shape, dtype in made} == truth
    for role, name, shape, _ in made:  # a scalar is a count, every other tensor a slot
        assert role == (OTHER if not shape else OPTIMIZER_SLOT)


SCRATCH_CASES = [("SGD", {"lr": 0.1}), ("SGD", {"lr": 0.1, "momentum": 0.9}),
                 ("SGD", {"lr": 0.1, "weight_decay": 1e-4}), ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
                 ("SGD", {"lr": 0.1, "maximize": True}),
                 ("SGD", {"lr": 0.1, "foreach": True}), ("Adam", {}), ("AdamW", {}), ("RMSprop", {})]


@pytest.mark.parametrize("cls,config", SCRATCH_CASES, ids=[f"{c}-{'-'.join(k)}" for c, k in SCRATCH_CASES])
def test_an_update_said_in_place_allocates_nothing_the_size_of_a_weight(cls, config, tmp_path):
    """``in_place`` against what a real step allocates inside ``Optimizer.step`` (the ``[memory]`` events of
    torch.profiler's trace, read with ``json``, after the first step made the state): none as large as the
    largest weight, or some."""
    model = _model()
    optimizer = getattr(torch.optim, cls)(model.parameters(), **config)
    for _ in range(2):
        model(torch.randint(0, 11, (4, 3))).sum().backward()
        optimizer.step()
    model(torch.randint(0, 11, (4, 3))).sum().backward()
    with torch.profiler.profile(profile_memory=True) as prof:
        optimizer.step()
    prof.export_chrome_trace(str(tmp_path / "step.json"))
    events = json.loads((tmp_path / "step.json").read_text())["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name", "").startswith("Optimizer.step#")]
    made = [e["args"]["Bytes"] for e in events if e.get("name") == "[memory]" and e["args"]["Bytes"] > 0
            and any(start <= e["ts"] <= end for start, end in steps)]
    largest = max(p.numel() * p.element_size() for p in model.parameters())
    entry = {"class_name": cls, "config": dict(optimizer.param_groups[0], params=None)}
    assert torch_optimizers.in_place(*torch_optimizers.plan(entry)) == (max(made, default=0) < largest), made


DECAY = {"weight_decay": 0.01}
COUNT_CASES = [("SGD", {"lr": 0.1}), ("SGD", {"lr": 0.1, "momentum": 0.9}), ("SGD", {"lr": 0.1, "weight_decay": 1e-4}),
               ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}), ("SGD", {"lr": 0.1, "maximize": True}),
               ("Adam", {}), ("Adam", {"amsgrad": True}), ("Adam", DECAY), ("Adam", {"maximize": True}),
               ("Adam", {**DECAY, "decoupled_weight_decay": True}), ("AdamW", {}), ("Adamax", {}), ("Adamax", DECAY),
               ("NAdam", {}), ("NAdam", DECAY), ("RAdam", {}), ("RAdam", DECAY), ("Adagrad", {}), ("Adagrad", DECAY),
               ("Adadelta", {}), ("Adadelta", DECAY), ("RMSprop", {}), ("RMSprop", DECAY),
               ("RMSprop", {"momentum": 0.9, "centered": True}), ("Adafactor", {}), ("Adafactor", DECAY)]
MAXIMIZE = {"maximize": True}
COUNT_CASES += [  # maximize beside each class, and beside the flags that also copy the gradient
    ("SGD", {"lr": 0.1, **MAXIMIZE, **DECAY}), ("SGD", {"lr": 0.1, "momentum": 0.9, **MAXIMIZE}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, **MAXIMIZE}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, **MAXIMIZE, **DECAY}), ("Adam", {**MAXIMIZE, **DECAY}),
    ("Adam", {**MAXIMIZE, **DECAY, "decoupled_weight_decay": True}), ("AdamW", {**MAXIMIZE, **DECAY}),
    ("Adamax", MAXIMIZE), ("Adamax", {**MAXIMIZE, **DECAY}), ("NAdam", MAXIMIZE), ("NAdam", {**MAXIMIZE, **DECAY}),
    ("NAdam", {**MAXIMIZE, **DECAY, "decoupled_weight_decay": True}), ("RAdam", MAXIMIZE),
    ("RAdam", {**MAXIMIZE, **DECAY}), ("RAdam", {**MAXIMIZE, **DECAY, "decoupled_weight_decay": True}),
    ("Adagrad", MAXIMIZE), ("Adagrad", {**MAXIMIZE, **DECAY}), ("Adadelta", MAXIMIZE),
    ("Adadelta", {**MAXIMIZE, **DECAY}), ("RMSprop", MAXIMIZE), ("RMSprop", {"momentum": 0.9, **MAXIMIZE}),
    ("RMSprop", {**MAXIMIZE, **DECAY}), ("Adafactor", MAXIMIZE), ("Adafactor", {**MAXIMIZE, **DECAY})]


def _step_scratch(cls, config, layers, tmp_path, last=512):
    """The most a real third ``step()`` holds at once beyond what it began with (``_profiled_step``), over
    ``layers`` 512 x 512 weights, the last ``last`` x 512."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(512, 512 if i < layers - 1 else last, bias=False)
                                  for i in range(layers)])
    optimizer = getattr(torch.optim, cls)(model.parameters(), **config)
    x = torch.randn(8, 512)
    for _ in range(2):
        model(x).sum().backward()
        optimizer.step()
    model(x).sum().backward()
    return _profiled_step(optimizer, tmp_path), optimizer


def _profiled_step(optimizer, tmp_path):
    """The most one real ``step()`` holds at once beyond what it began with: torch.profiler's ``[memory]`` events
    inside ``Optimizer.step``, read with ``json``."""
    with torch.profiler.profile(profile_memory=True) as prof:
        optimizer.step()
    prof.export_chrome_trace(str(tmp_path / "step.json"))
    events = json.loads((tmp_path / "step.json").read_text())["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name", "").startswith("Optimizer.step#")]
    memory = sorted((e for e in events if e.get("name") == "[memory]" and any(a <= e["ts"] <= b for a, b in steps)),
                    key=lambda e: e["ts"])
    if not memory:
        return 0
    start = memory[0]["args"]["Total Allocated"] - memory[0]["args"]["Bytes"]
    return max(e["args"]["Total Allocated"] for e in memory) - start


@pytest.mark.parametrize("cls,config", COUNT_CASES, ids=[f"{c}-{'-'.join(k)}" for c, k in COUNT_CASES])
def test_the_scratch_each_step_holds_at_once(cls, config, tmp_path):
    """``scratch_counts`` against real steps: over one weight, the tensors of its size held at once; over two equal
    ones, that and what the first one's loop still holds (a name rebound only when the next is made). Within the
    steps' own scalars (``step`` counts) and Adafactor's row and column factors: under 0.5% of a weight."""
    weight = 512 * 512 * 4
    one, optimizer = _step_scratch(cls, config, 1, tmp_path)
    two, _ = _step_scratch(cls, config, 2, tmp_path)
    entry = {"class_name": cls, "config": dict(optimizer.param_groups[0], params=None)}
    within, held = torch_optimizers.scratch_counts(*torch_optimizers.plan(entry))
    assert abs(one - within * weight) < 0.005 * weight, (one / weight, within)
    assert abs(two - one - held * weight) < 0.005 * weight, ((two - one) / weight, held)
    assert torch_optimizers.scratch_peak(*torch_optimizers.plan(entry), [weight, weight]) == (within + held) * weight


PATH_CASES = [(cls, config, path) for cls, config in COUNT_CASES for path in ("foreach", "fused")
              if path == "foreach" or cls in torch_optimizers.FUSED_CLASSES]


@pytest.mark.parametrize("cls,config,path", PATH_CASES,
                         ids=[f"{c}-{'-'.join(k)}-{p}" for c, k, p in PATH_CASES])
def test_the_foreach_and_fused_steps_hold_their_own_scratch(cls, config, path, tmp_path):
    """``scratch_peak`` on torch's other implementations against real steps made with ``foreach=True`` or
    ``fused=True``: over one weight, and over two unequal ones (the foreach path's lists hold every parameter's
    at once, so its scratch is a count x their total; a fused kernel makes none)."""
    weight = 512 * 512 * 4
    one, optimizer = _step_scratch(cls, {**config, path: True}, 1, tmp_path)
    two, _ = _step_scratch(cls, {**config, path: True}, 2, tmp_path, last=256)
    entry = {"class_name": cls, "config": dict(optimizer.param_groups[0], params=None)}
    found, flags = torch_optimizers.plan(entry)
    assert abs(one - torch_optimizers.scratch_peak(found, flags, [weight], path)) < 0.005 * weight, one / weight
    assert abs(two - torch_optimizers.scratch_peak(found, flags, [weight, weight // 2], path)) < 0.005 * weight, (
        two / weight)
    assert torch_optimizers.in_place(found, flags, path) == (one < 0.005 * weight)


def _mixed_step_scratch(cls, config, dtypes, tmp_path):
    """``_step_scratch`` over 512 x 512 weights of ``dtypes``, in that order."""
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(512, 512).to(getattr(torch, dtype))) for dtype in dtypes]
    optimizer = getattr(torch.optim, cls)(params, **config)
    for step in range(3):
        for p in params:
            p.grad = torch.randn_like(p)
        if step < 2:
            optimizer.step()
    return _profiled_step(optimizer, tmp_path), optimizer


MIXED = (("float32", "bfloat16"), ("bfloat16", "float32", "float32"), ("float16", "float32"))


@pytest.mark.parametrize("cls,config", COUNT_CASES, ids=[f"{c}-{'-'.join(k)}" for c, k in COUNT_CASES])
def test_the_foreach_lists_of_several_dtypes_hold_part_of_each_other(cls, config, tmp_path):
    """On the foreach path torch makes one group of lists per dtype (two in the reverse of their first parameters'
    order), and a group's lists bound to a name are freed only as the next group's are made (``FOREACH_MOMENTS``):
    over float32 and bfloat16 weights in both orders and float16 beside float32, against real
    ``step(foreach=True)``s. Counted as one list over all of them, Adagrad read 6 halves of a float32 weight for 5
    real; RMSprop with weight decay 6 for 4 in one order, 5 in the other. Within Adafactor's row and column
    factors: under 0.3 of a half-precision weight. Three dtypes come in the order their hashes fall: not said."""
    for dtypes in MIXED:
        real, optimizer = _mixed_step_scratch(cls, {**config, "foreach": True}, dtypes, tmp_path)
        entry = {"class_name": cls, "config": dict(optimizer.param_groups[0], params=None)}
        sizes = [512 * 512 * torch.tensor([], dtype=getattr(torch, dtype)).element_size() for dtype in dtypes]
        said = torch_optimizers.scratch_peak(*torch_optimizers.plan(entry), sizes, "foreach", dtypes)
        assert abs(real - said) < 0.3 * 512 * 512 * 2, (dtypes, real, said)
    three = ("bfloat16", "float16", "float32")
    assert torch_optimizers.scratch_peak(*torch_optimizers.plan(entry), [512] * 3, "foreach", three) is None


def test_each_param_group_is_recorded_as_torch_holds_it():
    """Trainer's grouping (decay for weights, none for biases and norms) on a real module: the breakdown records
    each group's parameters by their state_dict names and the settings that differ from the first group's, as
    ``optimizer.param_groups`` holds them, and Storage's optimizer line says so."""
    import torch

    from tb_modelmem import pytorch
    from tb_modelmem.plugin.views.breakdown import optimizer_summary

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 4))
    decay = [p for name, p in model.named_parameters() if name.endswith("weight") and p.dim() > 1]
    rest = [p for p in model.parameters() if all(p is not d for d in decay)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}])
    named = {id(p): name for name, p in model.named_parameters()}
    recorded = pytorch.breakdown(model, optimizer).optimizer
    assert recorded["config"]["weight_decay"] == optimizer.param_groups[0]["weight_decay"]
    assert recorded["groups"] == [{"params": [named[id(p)] for p in group["params"]], "config": own}
                                  for group, own in zip(optimizer.param_groups, ({}, {"weight_decay": 0.0}))]
    assert [len(g["params"]) for g in recorded["groups"]] == [2, 4]
    assert optimizer_summary(recorded)["text"].endswith(
        "; 2 param groups: 2 parameters as above, 4 parameters with weight_decay=0")


def test_lbfgs_history_is_counted_as_its_state_holds_it():
    """LBFGS keeps its history as lists of flat tensors (``old_dirs``, ``old_stps``: one copy of every parameter per
    iteration, up to ``history_size``), keyed by the first parameter. Storage read tensors only: 2 of the 30 flat
    copies three steps left here (``d``, ``prev_flat_grad``), none of the 28 in the lists. Each member is counted
    now, and none is charged to the first parameter's layer. Truth: every tensor in ``optimizer.state``, lists
    walked, read here with torch."""
    from tb_modelmem import pytorch

    model = _model()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5, history_size=20)
    x = torch.randint(0, 11, (4, 3))

    def closure():
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        return loss

    for _ in range(3):
        optimizer.step(closure)
    (state,) = optimizer.state.values()
    tensors = [v for value in state.values() for v in (value if isinstance(value, list) else [value])
               if torch.is_tensor(value) or torch.is_tensor(v)]
    assert len(state["old_dirs"]) > 2  # a history of several iterations
    recorded = pytorch.breakdown(model, optimizer)
    rows = [v for v in recorded.variables.records() if v.name.startswith("optimizer.")]
    assert sum(v.bytes for v in rows) == sum(t.numel() * t.element_size() for t in tensors)
    assert len(rows) == len(tensors)
    flat = sum(p.numel() for p in model.parameters())
    assert {v.layer for v in rows if math.prod(v.shape) == flat} == {""}  # the optimizer's, no layer's
