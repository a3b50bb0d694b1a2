"""What if on PyTorch as people train with it (issue 54): a tiny GPT-2 trained by Hugging Face ``Trainer`` and a
Lightning conv net, each traced at one setting and projected to others, against real runs at those settings
(tests/support/torch_whatif_run.py, each in a fresh process with TensorFlow blocked).

Ground truth is the real run's raw trace read with ``json``: torch's CPU count ("Total Allocated") is exact
bytes from 0 in the profiled window, so runs of one setting give the same figure (no median needed). A plain
``torch.profiler`` log dir (no breakdown) projects that count; tb_modelmem's capture adds the state the
live objects held through the window (``model.parameters()``, ``model.buffers()``, ``optimizer.state``).
The GPT-2's MLP is 512 wide, as batch 8 x 64 tokens is: a length told apart from a weight's dimension."""

from __future__ import annotations

import glob
import json
import math
import os
import subprocess
import sys

import pytest

from tb_modelmem import estimate
from tb_modelmem.readers.logdir import read_run
from tb_modelmem.rules.projection import WhatIf, project
from tb_modelmem.schema.names import STEP_ONLY_CATEGORIES
from tests.support.paths import REPO
from tests.support.plugin_harness import Served

pytest.importorskip("transformers")
pytest.importorskip("lightning")

WITHIN = 0.05  # the bound issue 54 asks for
EXACT = 0.005  # torch's CPU count is exact: the float32 figures below read within 0.2%, asserted within 0.5%
BUDGET = 64 * 2**20


SCRATCH_ASKED = ("AdamW", "Adagrad", "RMSprop", "Adadelta", "Adamax", "NAdam", "RAdam", "Adafactor")
# asked of a step traced under Adam made with ``foreach=True`` or ``fused=True``, each run so too (a class with no
# fused kernel takes the CPU's default, one parameter at a time)
GROUPS_ASKED = ("Adagrad", "Adam", "Adadelta")  # the grouped runs' (``mlp``)
MIXED_ASKED = ("Adagrad", "RMSprop", "Adadelta")  # asked of the float32 + bfloat16 MLP's foreach Adam
PATH_ASKED = {"foreach": ("Adam", "Adagrad", "RMSprop", "Adadelta", "Adafactor", "SGD"),
              "fused": ("AdamW", "Adagrad", "SGD", "RMSprop", "Adadelta", "NAdam", "Adafactor")}


def _run(model, logdir, batch, seq=64, optimizer="AdamW", plain=False, bf16=False):
    env = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="", TOKENIZERS_PARALLELISM="false")
    command = [sys.executable, "-m", "tests.support.torch_whatif_run", model, logdir, "--batch", str(batch),
               "--seq", str(seq), "--optimizer", optimizer] + (["--plain"] if plain else []) + (
                   ["--bf16"] if bf16 else [])
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    truth = json.loads(done.stdout.strip().splitlines()[-1])
    truth["total"] = truth["peak"] + truth["params"] + truth["buffers"] + truth["state"]
    return truth


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    root = tmp_path_factory.mktemp("whatif_gpt2")
    traced = {"capture": (str(root / "capture"), _run("gpt2", str(root / "capture"), 8)),
              "plain": (str(root / "plain"), _run("gpt2", str(root / "plain"), 8, plain=True)),
              "fused": (str(root / "fused"), _run("gpt2", str(root / "fused"), 8, optimizer="AdamW_fused"))}
    real = {(16, 64, "AdamW"): None, (32, 64, "AdamW"): None, (8, 128, "AdamW"): None, (8, 64, "SGD"): None,
            (8, 64, "Adafactor"): None}
    for batch, seq, optimizer in real:
        real[(batch, seq, optimizer)] = _run("gpt2", str(root / f"real_{batch}_{seq}_{optimizer}"), batch, seq,
                                             optimizer, plain=True)
    return traced, real, root


def _off(projected, truth):
    return projected / truth - 1


@pytest.mark.parametrize("asked", [dict(batch=16), dict(batch=32), dict(seq=128), dict(optimizer="SGD"),
                                   dict(optimizer="Adafactor")],
                         ids=["batch16", "batch32", "seq128", "sgd", "adafactor"])
def test_trainer_gpt2_projects_within_5_percent_of_real_runs(gpt2, asked):
    traced, real, _ = gpt2
    key = (asked.get("batch", 8), asked.get("seq", 64), asked.get("optimizer", "AdamW"))
    truth = real[key]
    logdir, at_trace = traced["capture"]
    answer = estimate(logdir, run="run", **asked)
    assert answer["traced"]["peak_bytes"] == at_trace["total"]  # the traced figure itself, exactly
    assert abs(_off(answer["peak_bytes"], truth["total"])) <= EXACT, (answer["peak_bytes"], truth)
    if "optimizer" not in asked:  # a plain torch.profiler log dir: no breakdown, the window's count
        plain = estimate(traced["plain"][0], run="run", **asked)
        assert plain["traced"]["peak_bytes"] == traced["plain"][1]["peak"]
        assert abs(_off(plain["peak_bytes"], truth["peak"])) <= EXACT, (plain["peak_bytes"], truth)
        assert "not in this trace's count" in plain["unknown"]["weights"]
    else:  # the optimizer's state recomputed from torch.optim's own rule; Trainer's ``optim="adafactor"`` is
        # transformers' own Adafactor, whose factored rows and columns take torch.optim.Adafactor's bytes
        state = {line["category"]: line["projected_bytes"] for line in answer["basis"]}
        assert state["optimizer_slots"] + state["other_state"] == truth["state"], (state, truth)


@pytest.mark.parametrize("asked", ["SGD", "Adafactor"])
def test_trainers_default_fused_adamw_projects_another_optimizer(gpt2, asked):
    """Trainer's default optimizer on torch >= 2.8 is ``adamw_torch_fused``, whose kernel makes no scratch:
    another class's is added at the update (Adafactor's) or none (SGD's fused), against the real runs."""
    traced, real, _ = gpt2
    truth = real[(8, 64, asked)]
    answer = estimate(traced["fused"][0], run="run", optimizer=asked)
    assert abs(_off(answer["peak_bytes"], truth["total"])) <= EXACT, (answer["peak_bytes"], truth)
    assert not answer["unknown"], answer["unknown"]


def test_trainer_gpt2_reads_the_trace_as_torch_made_it(gpt2):
    traced, _, _ = gpt2
    answer = estimate(traced["plain"][0], run="run", batch=16)
    assert answer["traced"]["batch"] == 8 and answer["traced"]["seq"] == 64
    words = json.dumps(answer["basis"])
    assert "Keras" not in words and "TensorFlow" not in words
    captured = estimate(traced["capture"][0], run="run", optimizer="momentum")
    (slots,) = [line for line in captured["basis"] if line["category"] == "optimizer_slots"]
    assert slots["projected_bytes"] == traced["capture"][1]["params"]  # a momentum buffer per parameter
    assert "first step()" in slots["formula"] and "Keras" not in json.dumps(captured["basis"])


def test_the_largest_batch_under_a_budget_fits_and_ten_percent_more_does_not(gpt2):
    traced, _, root = gpt2
    answer = estimate(traced["capture"][0], run="run", budget=BUDGET)
    largest = answer["largest_batch"]
    assert largest and largest > 8, answer["largest_batch_note"]
    fits = _run("gpt2", str(root / "budget_fits"), largest, plain=True)
    over = _run("gpt2", str(root / "budget_over"), math.ceil(largest * 1.1), plain=True)
    assert fits["total"] <= BUDGET < over["total"], (largest, fits["total"], over["total"])


def test_autocast_is_traced_not_guessed(gpt2, tmp_path):
    """A float32 trace asked for 16-bit is unknown, with why: a real Trainer run under bf16 autocast peaks 0.77x
    its float32 step, not the half that scaling every activation reads. A step traced under autocast projects
    to another batch as any other."""
    traced, _, _ = gpt2
    asked = estimate(traced["plain"][0], run="run", policy="mixed_bfloat16")
    assert asked["peak_bytes"] is None and "autocast" in asked["unknown"]["activations"]
    at_8 = _run("gpt2", str(tmp_path / "bf16_8"), 8, plain=True, bf16=True)
    at_16 = _run("gpt2", str(tmp_path / "bf16_16"), 16, plain=True, bf16=True)
    assert at_8["peak"] < 0.9 * traced["plain"][1]["peak"]  # autocast did lower it, not by half
    answer = estimate(str(tmp_path / "bf16_8"), run="run", batch=16)
    assert abs(_off(answer["peak_bytes"], at_16["peak"])) <= WITHIN, (answer["peak_bytes"], at_16)


def test_onednns_capped_scratch_under_autocast_does_not_carry_the_batch(tmp_path):
    """A new user's plain loop under CPU bfloat16 autocast read +6.1% at 2x the batch: oneDNN's 16-bit matrix
    product packs its operands in scratch no shape fits (476,928 B at batch 512 in the weight gradient), which was
    taken to carry what the product's inputs do. Real runs' raw traces (json) say it is capped: 673,536 B at batch
    2048 and 4096 alike. It carries no batch now; at 4x and 8x the batch the figure is within 1% of real runs (at 2x,
    where the scratch still grows, -4.4%)."""
    traced = _run("autocast_mlp", str(tmp_path / "traced"), 512)
    for batch in (2048, 4096):
        real = _run("autocast_mlp", str(tmp_path / str(batch)), batch, plain=True)
        with open(glob.glob(str(tmp_path / str(batch) / "run" / "*.pt.trace.json"))[0]) as f:
            made = [e["args"]["Bytes"] for e in json.load(f)["traceEvents"] if e.get("name") == "[memory]"]
        assert 673536 in made  # the product's capped scratch, the same at both batches
        answer = estimate(str(tmp_path / "traced"), run="run", batch=batch)
        assert answer["traced"]["policy"] == "bfloat16 autocast" and traced["optimizer"] == "Adam"
        assert abs(_off(answer["peak_bytes"], real["total"])) <= 0.01, (batch, answer["peak_bytes"], real)


def test_a_length_equal_to_the_heads_width_is_unknown_with_why(tmp_path):
    """A new user's GPT-2 (2 heads of 32) traced at 32 tokens read +4.9% at 64, silently: its queries, keys and
    values [batch, heads, 32, 32] have the attention scores' shape, so which buffers hold the length twice cannot be
    told. This GPT-2's config says 4 heads of 24 (n_embd 96): traced at 24 tokens, another length is unknown with
    why; the same model traced at 64 tokens projects (the module's other tests)."""
    _run("gpt2", str(tmp_path / "s24"), 8, seq=24)
    answer = estimate(str(tmp_path / "s24"), run="run", seq=48)
    assert answer["peak_bytes"] is None
    assert "width of the attention heads" in answer["unknown"]["activations"], answer["unknown"]
    assert estimate(str(tmp_path / "s24"), run="run", batch=16)["peak_bytes"] is not None  # the batch still can


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    root = tmp_path_factory.mktemp("whatif_cnn")
    traced = _run("cnn", str(root / "traced"), 32, optimizer="Adam")
    return (str(root / "traced" / "run" / "lightning" / "version_0"), traced), {
        "batch": _run("cnn", str(root / "x4"), 128, optimizer="Adam"),
        "optimizer": _run("cnn", str(root / "sgd"), 32, optimizer="SGD")}


@pytest.mark.parametrize("asked", [dict(batch=128), dict(optimizer="SGD")], ids=["batch_x4", "sgd"])
def test_lightning_cnn_projects_within_5_percent_of_real_runs(cnn, asked):
    (logdir, traced), real = cnn
    truth = real["batch" if "batch" in asked else "optimizer"]
    answer = estimate(logdir, **asked)
    assert answer["traced"]["peak_bytes"] == traced["total"] and answer["traced"]["batch"] == 32
    assert abs(_off(answer["peak_bytes"], truth["total"])) <= EXACT, (answer["peak_bytes"], truth)


def _mlp(*args):
    env = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-m", "tests.support.torch_mlp_run", *map(str, args)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]) if args[0] == "truth" else None


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """A plain loop's MLP traced in one process at batch 512 under Adam, under SGD, compiled by torch.compile
    (Adam), under Adam's foreach and fused steps, under Adam(amsgrad=True), with float32 and bfloat16 layers
    under Adam's foreach step, with two param groups under SGD(momentum), weight decay in one, one at a time
    and foreach, and with a frozen group; and real runs: 2-rank DDP jobs under Adam, one process under each
    class asked (``PATH_ASKED`` on those paths, ``MIXED_ASKED`` of the mixed one, ``GROUPS_ASKED`` of the grouped
    ones, Adam of the frozen one), and compiled at 2048."""
    root = tmp_path_factory.mktemp("whatif_mlp")
    traced = {"Adam": (), "SGD": ("--optimizer", "SGD"), "compiled": ("--compile",),
              "foreach": ("--path", "foreach"), "fused": ("--path", "fused"),
              "Adam_clip": ("--clip",), "SGD_clip": ("--optimizer", "SGD", "--clip"),
              "amsgrad": ("--optimizer", "amsgrad"), "mixed": ("--mixed", "--path", "foreach"),
              "groups": ("--optimizer", "momentum", "--groups", 0.01),
              "groups_foreach": ("--optimizer", "momentum", "--groups", 0.01, "--path", "foreach"),
              "frozen_group": ("--optimizer", "momentum", "--groups", 0, "--frozen")}
    for name, extra in traced.items():
        _mlp("traced", root / name, "--batch", 512, *extra)
    real = {("Adam", per_rank, 2): None for per_rank in (32, 2048)}
    real.update({(optimizer, 512, 1): None for optimizer in ("SGD", "momentum", "Adam") + SCRATCH_ASKED})
    real.update({(optimizer, 512, 1, path): None for path, asked in PATH_ASKED.items() for optimizer in asked})
    real.update({(optimizer, 512, 1, "", "clip"): None for optimizer in ("Adam", "Adagrad")})
    real[("amsgrad", 512, 1, "fused")] = None
    real.update({(optimizer, 512, 1, "foreach", "", "mixed"): None for optimizer in MIXED_ASKED})
    real.update({(optimizer, 512, 1, path, "", "", "groups"): None for optimizer in GROUPS_ASKED
                 for path in ("", "foreach")})
    real[("Adam", 512, 1, "", "", "", "frozen")] = None
    for key in real:
        optimizer, batch, ranks, path, clip, mixed, groups = (key + ("", "", "", ""))[:7]
        real[key] = _mlp("truth", root / "_".join(map(str, key)), "--batch", batch, "--optimizer", optimizer,
                         "--ranks", ranks, "--path", path, *(["--clip"] if clip else []),
                         *(["--mixed"] if mixed else []), *(["--groups", 0] if groups else []),
                         *(["--frozen"] if groups == "frozen" else []))
    real[("compiled", 2048, 1)] = _mlp("truth", root / "compiled_2048", "--batch", 2048, "--compile")
    return {name: str(root / name) for name in traced}, real


@pytest.mark.parametrize("per_rank", [32, 2048])
def test_a_one_process_trace_projects_to_each_ddp_rank(mlp, per_rank):
    """Traced in one process, asked for 2 replicas: each rank of a real 2-rank DDP job (gloo) peaks where the
    projection says, DDP's gradient buckets (a copy of every gradient) included. At 32 per rank Adam's update
    is the peak; at 2048 the activations are."""
    traced, real = mlp
    truth = real[("Adam", per_rank, 2)]
    answer = estimate(traced["Adam"], batch=2 * per_rank, replicas=2)
    for peak in truth["peaks"]:
        assert abs(_off(answer["peak_bytes"], peak)) <= EXACT, (answer["peak_bytes"], truth)
    (gradients,) = [line for line in answer["basis"] if line["category"] == "gradients"]
    assert "DDP's gradient buckets" in gradients["formula"], gradients


@pytest.mark.parametrize("traced_under", ["Adam", "SGD"])
@pytest.mark.parametrize("asked", ["SGD", "momentum"])
def test_sgd_updates_in_place(mlp, traced_under, asked):
    """torch's SGD, with momentum or not, adds into the weights and its buffers: no update scratch, whichever
    optimizer the step was traced under (Adam's update is this MLP's peak: its scratch scaled read +31 to +34%)."""
    traced, real = mlp
    (peak,) = real[(asked, 512, 1)]["peaks"]
    answer = estimate(traced[traced_under], optimizer=asked)
    assert abs(_off(answer["peak_bytes"], peak)) <= EXACT, (answer["peak_bytes"], peak)


@pytest.mark.parametrize("asked", SCRATCH_ASKED)
def test_another_optimizers_scratch_is_its_own(mlp, asked):
    """Traced under Adam, whose update is this MLP's peak, asked for a class whose step makes other scratch: its
    most at once (``torch_optimizers.scratch_peak``: tensors of a parameter's size held at once, and of the
    previous parameter's still held), against a real run. Scaling Adam's by the state's bytes, as before, read
    Adagrad and RMSprop +6.3%, Adamax +15.0%, Adafactor -8.6%."""
    traced, real = mlp
    (peak,) = real[(asked, 512, 1)]["peaks"]
    answer = estimate(traced["Adam"], optimizer=asked)
    assert abs(_off(answer["peak_bytes"], peak)) <= EXACT, (answer["peak_bytes"], peak)


@pytest.mark.parametrize("asked,truth", [("Adam", ("Adam", 512, 1)), ("Adadelta", ("Adadelta", 512, 1)),
                                         ("Adam foreach", ("Adam", 512, 1, "foreach"))])
def test_an_sgd_step_gets_the_asked_scratch_where_its_update_began(mlp, asked, truth):
    """Traced under SGD, whose update allocates nothing, the asked class's scratch is added at the moment the
    update began (``Timeline.update_starts_us``: every gradient live), against a real run of it; a trace that
    does not say when (an older payload) leaves it unknown, said."""
    traced, real = mlp
    (peak,) = real[truth]["peaks"]
    answer = estimate(traced["SGD"], optimizer=asked)
    assert abs(_off(answer["peak_bytes"], peak)) <= EXACT, (answer["peak_bytes"], peak)
    logged = read_run(traced["SGD"])
    logged.trace.timeline.update_starts_us = []
    untold = project(logged.trace, logged.breakdown, WhatIf(optimizer=asked))
    assert untold["peak_bytes"] is None
    assert "no moment of the update" in untold["unknown"]["optimizer_temporaries"]


@pytest.mark.parametrize("path,asked", [(path, asked) for path, classes in PATH_ASKED.items() for asked in classes])
def test_a_foreach_or_fused_step_projects_another_class_on_its_path(mlp, path, asked):
    """Traced under Adam's foreach step (every parameter's scratch as one list: CUDA's default) or its fused
    kernel (none), asked another class made with the same flag: its own scratch on that path, against a real run.
    Scaling Adam's foreach scratch by the state's bytes, as before, read Adagrad -26.3%, Adadelta -16.5%,
    RMSprop -8.2%. A class with no fused kernel updates one parameter at a time on the CPU: its scratch is added
    at the fused update's moments (RMSprop read -12.0% as none, before; Adafactor within its row and column
    factors, -0.04%)."""
    traced, real = mlp
    (peak,) = real[(asked, 512, 1, path)]["peaks"]
    answer = estimate(traced[path], optimizer=asked)
    assert abs(_off(answer["peak_bytes"], peak)) <= EXACT, (answer["peak_bytes"], peak)
    (line,) = [line for line in answer["basis"] if line["category"] == "optimizer_temporaries"]
    added = path == "fused" and asked in ("RMSprop", "Adadelta", "NAdam", "Adafactor")  # no fused kernel
    assert ("scratch at the update" in line["formula"]) == added, line


@pytest.mark.parametrize("traced_under,asked,truth", [
    ("Adam", "Adam foreach", ("Adam", 512, 1, "foreach")), ("Adam", "AdamW fused", ("AdamW", 512, 1, "fused")),
    ("foreach", "Adam for-loop", ("Adam", 512, 1)), ("fused", "Adagrad foreach", ("Adagrad", 512, 1, "foreach")),
    ("foreach", "adamw_fused", ("AdamW", 512, 1, "fused"))], ids=["to_foreach", "to_fused", "to_for_loop",
                                                                   "fused_to_foreach", "hf_style_name"])
def test_an_implementation_asked_by_name(mlp, traced_under, asked, truth):
    """The implementation a step takes asked by name ("AdamW fused", as the tab's menu offers it; "adamw_fused"):
    what switching an Adam step to foreach (every parameter's list at once) or to a fused kernel (none) makes,
    against real runs made so."""
    traced, real = mlp
    (peak,) = real[truth]["peaks"]
    answer = estimate(traced[traced_under], optimizer=asked)
    assert abs(_off(answer["peak_bytes"], peak)) <= EXACT, (answer["peak_bytes"], peak)


@pytest.mark.parametrize("asked,truth", [("Adam", ("Adam", 512, 1)), ("Adam fused", ("amsgrad", 512, 1, "fused"))],
                         ids=["class_at_its_defaults", "implementation_keeps_the_config"])
def test_the_traced_class_asked_by_name_or_by_implementation(mlp, asked, truth):
    """Traced under Adam(amsgrad=True): "Adam" is Adam at its defaults, slots and scratch alike (as "SGD" of a
    momentum run drops momentum), against a real Adam() run; "Adam fused" is that Adam on the fused kernel, its
    amsgrad moment kept, against a real Adam(amsgrad=True, fused=True). Before, "Adam" counted amsgrad's scratch
    with Adam's default slots."""
    traced, real = mlp
    (peak,) = real[truth]["peaks"]
    answer = estimate(traced["amsgrad"], optimizer=asked)
    assert abs(_off(answer["peak_bytes"], peak)) <= EXACT, (answer["peak_bytes"], peak)
    assert answer["by_category"]["optimizer_slots"] == real[truth]["slot_bytes"], answer["by_category"]


@pytest.mark.parametrize("asked", MIXED_ASKED)
def test_foreach_lists_of_float32_and_bfloat16_parameters(mlp, asked):
    """The MLP's first layer float32, the rest bfloat16, traced under Adam's foreach step: torch makes one group
    of lists per dtype, each still held while the next group's are made (``torch_optimizers.FOREACH_MOMENTS``).
    Scaled by the state's bytes, as before, Adagrad read -19.26%, RMSprop -8.11%, Adadelta -10.00%."""
    traced, real = mlp
    (peak,) = real[(asked, 512, 1, "foreach", "", "mixed")]["peaks"]
    answer = estimate(traced["mixed"], optimizer=asked)
    assert abs(_off(answer["peak_bytes"], peak)) <= EXACT, (answer["peak_bytes"], peak)


@pytest.mark.parametrize("path", ["", "foreach"], ids=["for_loop", "foreach"])
@pytest.mark.parametrize("asked", GROUPS_ASKED)
def test_each_param_group_is_updated_apart_with_its_own_settings(mlp, asked, path):
    """Two param groups, as Trainer makes (decay and no decay), here of like sizes: the MLP's middle layer in the
    second, with no weight decay. Traced under SGD(momentum, weight_decay=0.01): its step copies the gradients of
    the first group alone (coupled decay), and every step updates the groups one after another, so its lists and
    scratch are one group's at a time. Asked another class by name (its defaults), against a real run of it with
    the same groups. Counted as one group with the first one's settings, as before: for-loop Adagrad -11.73%, Adam
    -16.13%, Adadelta -16.14%; foreach Adagrad -19.55%, Adam -9.21%, Adadelta -16.00%."""
    traced, real = mlp
    (peak,) = real[(asked, 512, 1, path, "", "", "groups")]["peaks"]
    answer = estimate(traced["groups_foreach" if path else "groups"], optimizer=f"{asked} {path}".strip())
    assert abs(_off(answer["peak_bytes"], peak)) <= EXACT, (answer["peak_bytes"], peak)
    assert answer["by_category"]["optimizer_slots"] == real[(asked, 512, 1, path, "", "", "groups")]["slot_bytes"]


def test_a_frozen_param_group_updates_nothing(mlp):
    """The MLP's middle layer frozen in a group of its own with weight decay (a frozen backbone's), the rest with
    none, traced under SGD(momentum), whose step is then in place: asked Adam, its scratch is added at the update.
    Read with the frozen group's decay as a gradient copy, the step was taken for one with scratch to scale,
    of which the trace held none: -4.36% (54,792,376 B for a real 57,290,940), the scratch left out."""
    traced, real = mlp
    truth = real[("Adam", 512, 1, "", "", "", "frozen")]
    answer = estimate(traced["frozen_group"], optimizer="Adam")
    assert abs(_off(answer["peak_bytes"], truth["peaks"][0])) <= EXACT, (answer["peak_bytes"], truth)
    assert answer["by_category"]["optimizer_slots"] == truth["slot_bytes"]


@pytest.mark.parametrize("traced_under,asked", [("Adam_clip", "Adagrad"), ("SGD_clip", "Adam")])
def test_clipped_gradients_do_not_hide_the_updates_implementation(mlp, traced_under, asked):
    """``clip_grad_norm_`` runs ``_foreach_norm`` and ``_foreach_mul_`` after the backward pass, in the update's
    phase but outside ``Optimizer.step``: the step's implementation is read from inside it alone
    (``OpTrace.optimizer_path``). Read from the whole phase, Adam's one-at-a-time step was taken for foreach and
    Adagrad read +57.0% (138,629,280 B for a real 88,289,436); SGD's clipped step allocates there, so Adam's
    scratch is added at those moments, every gradient live."""
    traced, real = mlp
    (peak,) = real[(asked, 512, 1, "", "clip")]["peaks"]
    answer = estimate(traced[traced_under], optimizer=asked)
    assert abs(_off(answer["peak_bytes"], peak)) <= EXACT, (answer["peak_bytes"], peak)
    (line,) = [line for line in answer["basis"] if line["category"] == "optimizer_temporaries"]
    assert "foreach" not in line["formula"], line


def test_a_compiled_step_projects_as_an_eager_one(mlp):
    """torch.compile's inductor runs the forward as one generated function: its buffers are made by
    ``empty_strided`` calls whose recorded arguments say their shapes, so batch 512 projects to a real compiled
    run at 2048 (the activations are the peak there)."""
    traced, real = mlp
    (peak,) = real[("compiled", 2048, 1)]["peaks"]
    answer = estimate(traced["compiled"], batch=2048)
    assert answer["traced"]["batch"] == 512
    assert abs(_off(answer["peak_bytes"], peak)) <= EXACT, (answer["peak_bytes"], peak)


def _held_out(*args):
    env = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="", TOKENIZERS_PARALLELISM="false")
    done = subprocess.run([sys.executable, "-m", "tests.support.torch_hf_run", *map(str, args)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]) if args[1] == "truth" else None


HELD_OUT = {"llama": [(32, 64, "AdamW"), (8, 128, "AdamW"), (8, 64, "SGD"), (8, 64, "momentum"), (8, 64, "Adafactor"),
                      (8, 64, "RMSprop"), (8, 64, "Adagrad"), (8, 64, "NAdam")],
            "bert": [(32, 64, "AdamW"), (8, 128, "AdamW"), (8, 64, "SGD")],
            "gpt2": [(32, 64, "AdamW"), (8, 128, "AdamW")],
            "t5": [(32, 64, "AdamW"), (8, 128, "AdamW"), (8, 64, "SGD")],
            "qwen2": [(32, 64, "AdamW"), (8, 128, "AdamW")],
            "llama_gc": [(32, 64, "AdamW"), (8, 128, "AdamW")],
            "bart": [(32, 64, "AdamW"), (8, 128, "AdamW")],
            "vit": [(32, 64, "AdamW"), (8, 64, "SGD")],
            "resnet": [(32, 64, "AdamW"), (128, 64, "AdamW"), (8, 64, "momentum")],
            "mobilenet": [(32, 64, "AdamW")],
            "convnext": [(32, 64, "AdamW"), (8, 64, "SGD")],
            "swin": [(32, 64, "AdamW")]}
VISION = ("vit", "resnet", "mobilenet", "convnext", "swin")  # pictures: no sequence


@pytest.fixture(scope="module")
def held_out(tmp_path_factory):
    """Held out: a tiny Llama, BERT, GPT-2, T5 and BART (encoder-decoders), Qwen2 (grouped-query attention), the
    Llama with gradient checkpointing, and on 3 x 64 x 64 pictures a ViT, a ResNet with BatchNorm, a MobileNetV2, a
    ConvNeXt and a Swin, in a plain loop, each traced at batch 8 (x 64 tokens) under AdamW, and real runs at the
    settings asked."""
    root = tmp_path_factory.mktemp("whatif_held_out")
    traced, real = {}, {}
    for model, settings in HELD_OUT.items():
        traced[model] = str(root / model / "traced")
        _held_out(model, "traced", traced[model], "--batch", 8, "--seq", 64)
        for batch, seq, optimizer in settings:
            real[(model, batch, seq, optimizer)] = _held_out(
                model, "truth", root / model / f"{batch}_{seq}_{optimizer}", "--batch", batch, "--seq", seq,
                "--optimizer", optimizer)["peak"]
    return traced, real


def _asked(batch, seq, optimizer):
    return dict(batch=batch) if batch != 8 else dict(seq=seq) if seq != 64 else dict(optimizer=optimizer)


@pytest.mark.parametrize("model, setting", [(m, s) for m, settings in HELD_OUT.items() for s in settings],
                         ids=[f"{m}-{b}x{s}-{o}" for m, settings in HELD_OUT.items() for b, s, o in settings])
def test_held_out_models_project_to_real_runs(held_out, model, setting):
    """No rule was written on these. Each one's traced batch and length are its token ids' [8, 64]: before, the
    Llama's read 3000 (its embedding table, its first op's first input) and BERT's 1 x 512 (a buffer of position
    ids, sliced first), which projected batch 32 to +638%. The Llama reads within 0.05%; BERT read within 0.7%, its
    [batch x seq, 144] buffers at 8 x 64 shaped like its [512, 144] position table, and its LayerNorm statistics
    [batch x seq] made flat by a factory inside the norm (-0.68% at batch 32, -0.39% at 128 tokens; -0.63%, -0.36%
    since a norm's statistics are one per row of its input, [8, 64, 1]). The GPT-2's attention concatenates an empty
    key/value cache with the new keys even in training (``torch.cat`` of [0] and [8, 4, 64, 32], which torch skips):
    with that and the norms' rows it reads 0.000% at batch 32 and -0.001% at 128 tokens (-1.01%, -0.59% before).
    The Llama's optimizers asked (its peak is in the backward pass) check the state torch.optim keeps: each equal.
    Added later, with no rule written on them: T5 within 0.11%, Qwen2 0.02%, the Llama with gradient
    checkpointing 0.06%, ViT, MobileNetV2, Swin and BART exact. The ResNet read +97.5% at batch 32: its oneDNN
    convolutions' scratchpads (18,948,352 B in one backward at batch 8 and at 32 alike, the weight gradient's
    per-thread sums) were taken to carry the batch; kept, it reads exact at 32 and 128. ConvNeXt read -3.2%: its
    ``nn.Linear`` over [8, 4, 4, 128] makes a [128, 512] product, its next layer's weight's shape; the linear's
    own output shape, [8, 4, 4, 512], now says it carries the batch: exact, and BERT's [512, 144] the same
    (0.000%, -0.001%)."""
    traced, real = held_out
    answer = estimate(traced[model], **_asked(*setting))
    assert (answer["traced"]["batch"], answer["traced"]["seq"]) == (8, None if model in VISION else 64)
    assert abs(_off(answer["peak_bytes"], real[(model, *setting)])) <= EXACT, (answer["peak_bytes"], real)


def _review_run(folder, batch, *flags):
    env = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-m", "tests.support.torch_review_run", str(folder), "--batch", str(batch),
                           *flags],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_plain_loops_log_dir_as_left_projects_from_its_full_trace_and_its_optimizer(tmp_path):
    """A new user's report: a plain loop under torch.profiler's repeating schedule leaves an empty trace, written
    last, beside the full one, and a weights-only safetensors file, written last, beside a torch.save of the model
    and the optimizer. The CLI projected the newest of each: "no [memory] events", then optimizer slots "measured
    0" (-16.6%). Now the newest trace that holds ops and the newest checkpoint that holds an optimizer; from the
    safetensors file alone the optimizer's state is unknown, said, never 0. Checked against the runs' own state
    (model.parameters(), optimizer.state) and raw traces, read with json; the tab's Ops peak alike."""
    logdir = tmp_path / "logs"
    traced = _review_run(logdir / "cnn", 16)
    real = _review_run(tmp_path / "real" / "cnn", 64)
    (peak, full, _), (none, empty, _) = sorted(traced["traces"], key=lambda t: t[0] is None)
    assert none is None and peak  # the premise: the second trace holds no memory events
    state = traced["parameters"] + traced["buffers"] + traced["optimizer_state"]
    answer = estimate(str(logdir), run="cnn", batch=64)
    assert answer["trace"] == full and answer["breakdown"] == "ckpt.pt"
    traces = [t for (_, t), info in Served(str(logdir)).tags("cnn").items() if info["kind"] == "ops"]
    assert traces == [f"torch/{full}", f"torch/{empty}"]  # the tab opens on the CLI's, the newer empty one last
    assert answer["traced"]["peak_bytes"] == peak + state
    truth = max(p for p, _, _ in real["traces"] if p) + state
    assert abs(_off(answer["peak_bytes"], truth)) <= EXACT, (answer["peak_bytes"], truth)
    weights_only = tmp_path / "weights_only" / "cnn"
    weights_only.mkdir(parents=True)
    for name in (full, "model.safetensors"):
        os.link(logdir / "cnn" / name, weights_only / name)
    alone = estimate(str(weights_only.parent), run="cnn", batch=64)
    assert alone["breakdown"] == "model.safetensors" and alone["peak_bytes"] is None
    assert alone["by_category"]["weights"] == traced["parameters"]
    assert "holds no optimizer" in alone["unknown"]["optimizer_slots"]
    asked = estimate(str(weights_only.parent), run="cnn", batch=64, optimizer="AdamW")  # its state made from weights
    assert asked["peak_bytes"] == answer["peak_bytes"]
    # the tab's Ops peak alike: with the safetensors file alone, the optimizer's state is unknown, not 0
    ops = Served(str(weights_only.parent)).json("/ops", run="cnn", tag=f"torch/{full}")
    split, layers = ops["peak_by_category"], ops["layers"]["columns"]
    assert split["optimizer_slots"] is None and "holds no optimizer" in split["unknown"]["optimizer_slots"]
    assert set(layers["slot_bytes"]) == {None}  # each layer's too
    assert split["weights"] == traced["parameters"] and split["non_trainable"] == traced["buffers"]
    assert split["total"] == peak + traced["parameters"] + traced["buffers"]  # what is known, the slots not in it
    split = Served(str(logdir)).json("/ops", run="cnn", tag=f"torch/{full}")["peak_by_category"]
    assert split["total"] == peak + state
    assert split["optimizer_slots"] + split["other_state"] == traced["optimizer_state"]
    _the_tab_joins_the_checkpoint_the_cli_reads(tmp_path / "kept", logdir / "cnn", full)


def _the_tab_joins_the_checkpoint_the_cli_reads(logdir, run, trace):
    """A run that kept checkpoints as it went, and a weights-only export written last: named so that their
    order by name is not their age, the tab's What if and Ops join the newest that names an optimizer, the one
    the CLI reads (they joined the first by name: a.safetensors, then epoch=10.pt)."""
    kept = logdir / "cnn"
    kept.mkdir(parents=True)
    os.link(run / trace, kept / trace)
    now = os.path.getmtime(run / "ckpt.pt")
    for name, source, age in (("epoch=10.pt", "ckpt.pt", 200), ("epoch=9.pt", "ckpt.pt", 100),
                              ("a.safetensors", "model.safetensors", 0)):
        (kept / name).write_bytes((run / source).read_bytes())
        os.utime(kept / name, (now - age, now - age))
    assert estimate(str(logdir), run="cnn", batch=64)["breakdown"] == "epoch=9.pt"
    served = Served(str(logdir))
    listed = [t for (_, t), info in served.tags("cnn").items() if info["kind"] == "breakdown"]
    assert listed == ["torch/a.safetensors", "torch/epoch=9.pt", "torch/epoch=10.pt"]  # newest first, in the picker
    for route in ("/ops", "/whatif"):
        body = served.json(route, run="cnn", tag=f"torch/{trace}", **({"batch": 64} if route == "/whatif" else {}))
        assert body["breakdown"]["tag"] == "torch/epoch=9.pt", (route, body["breakdown"])


def test_the_tab_and_the_cli_join_a_trace_with_one_breakdown(tmp_path):
    """A plain loop traced by torch.profiler, its storage recorded by ``tb_modelmem.pytorch.profile`` (a ``storage``
    summary at step 1, with the optimizer's state), and a weights-only safetensors export beside them. The CLI
    joined the trace with the summary; the tab weighed the trace and the export as both at step 0, joined the
    export, and said the optimizer's state unknown. One rule now (``readers.pairing``): both join the summary, and
    the peak's slots are ``optimizer.state``'s bytes, read in the loop's own process."""
    logdir = tmp_path / "logs"
    traced = _review_run(logdir / "cnn", 16, "--storage", "--trainer-folder")
    kept = tmp_path / "kept" / "cnn"
    kept.mkdir(parents=True)
    (full,) = [name for peak, name, _ in traced["traces"] if peak]
    events = [n for n in os.listdir(logdir / "cnn") if "tfevents" in n]
    for name in (full, "model.safetensors", *events):
        os.link(logdir / "cnn" / name, kept / name)
    cli = estimate(str(kept.parent), run="cnn", batch=32)
    assert cli["breakdown"] == "storage step 1"
    served = Served(str(kept.parent))
    for route in ("/ops", "/whatif"):
        body = served.json(route, run="cnn", tag=f"torch/{full}", **({"batch": 32} if route == "/whatif" else {}))
        assert body["breakdown"] == {"tag": "storage", "step": 1}, (route, body["breakdown"])
        assert body["breakdowns"] == ["storage", "torch/model.safetensors"]
    split = served.json("/ops", run="cnn", tag=f"torch/{full}")["peak_by_category"]
    assert split["optimizer_slots"] + split["other_state"] == traced["optimizer_state"]
    assert split["weights"] == traced["parameters"] and split["non_trainable"] == traced["buffers"]
    whatif = served.json("/whatif", run="cnn", tag=f"torch/{full}", batch=32)["whatif"]
    assert whatif["peak_bytes"] == cli["peak_bytes"] is not None
    _a_trainer_folder_beside_a_trace_is_its_checkpoint(tmp_path / "trainer", logdir / "cnn", full, traced)


def _a_trainer_folder_beside_a_trace_is_its_checkpoint(logdir, run, trace, traced):
    """A trace and a Trainer-style ``checkpoint-6/`` folder in one run's folder: the tab joined the folder, while
    the CLI read the folder as a run of its own and left the optimizer's state unknown. Both join the folder now."""
    kept = logdir / "cnn"
    (kept / "checkpoint-6").mkdir(parents=True)
    os.link(run / trace, kept / trace)
    for name in os.listdir(run / "checkpoint-6"):
        os.link(run / "checkpoint-6" / name, kept / "checkpoint-6" / name)
    (kept / "z_broken.pt").write_bytes(b"PK\x03\x04 cut short")  # the newest: passed over, said
    cli = estimate(str(logdir), run="cnn", batch=32)
    assert cli["breakdown"] == "checkpoint-6/"
    assert [why.split(":")[0] for why in cli["breakdowns_unreadable"]] == [str(kept / "z_broken.pt")]
    assert cli["by_category"]["optimizer_slots"] + cli["by_category"]["other_state"] == traced["optimizer_state"]
    body = Served(str(logdir)).json("/whatif", run="cnn", tag=f"torch/{trace}", batch=32)
    assert body["breakdown"] == {"tag": "torch/checkpoint-6/", "step": None}  # a checkpoint has no step
    # the tab names what it passed over, with the CLI's why (its path the log dir's, not the machine's)
    (passed,) = body["breakdowns_unreadable"]
    assert (passed["tag"], passed["step"]) == ("torch/z_broken.pt", None)
    why = cli["breakdowns_unreadable"][0].split(": ", 1)[1]
    assert passed["error"].split(": ", 1) == ["cnn/torch/z_broken.pt", why]
    assert body["whatif"]["peak_bytes"] == cli["peak_bytes"] is not None
    # a plain loop that saves optimizer.pt and model.safetensors into its run's folder: a run, not a checkpoint
    plain = logdir.parent / "plain" / "cnn"
    plain.mkdir(parents=True)
    for name in (trace, "checkpoint-6/optimizer.pt", "checkpoint-6/model.safetensors"):
        os.link(run / name, plain / os.path.basename(name))
    assert estimate(str(plain.parent), batch=32)["trace"] == trace  # it was read as a checkpoint, its trace unseen
    tags = Served(str(plain.parent)).tags("cnn")
    assert {t for (_, t), info in tags.items() if info["kind"] == "ops"} == {f"torch/{trace}"}


def test_where_the_peak_moves_each_row_says_what_the_traced_step_held_then(held_out):
    """ConvNeXt traced at batch 8 and asked a larger batch: the projected peak falls in the forward pass, the traced
    one in the backward, so each row's Traced (the traced peak's) is not what its figure was made from.
    ``traced_then_bytes`` is: the step's rows add up, to the byte, to the "Total Allocated" torch's own raw trace of
    the window (read with json) holds at that moment, as far before the traced peak as the answer says. Where the
    CPU's kernels put the traced peak decides the batch the projected one moves at: 64 on an AVX2-only EPYC, 512 on
    an AVX-512 one (oneDNN picks other kernels there), so the first of 64-1024 that moves is checked."""
    traced = held_out[0]["convnext"]
    answer = next((found for found in (estimate(traced, batch=batch) for batch in (64, 128, 256, 512, 1024))
                   if found["peak_moved"]), None)
    assert answer is not None, "the projected peak stayed in the backward pass up to batch 1024"
    with open(os.path.join(f"{traced}_raw", "ops_4.pt.trace.json")) as f:
        memory = [(e["ts"], e["args"]["Total Allocated"]) for e in json.load(f)["traceEvents"]
                  if e.get("name") == "[memory]"]
    highest = max(total for _, total in memory)
    peak_ts = next(ts for ts, total in memory if total == highest)  # the window counts from 0: the step's bytes
    then_ts = peak_ts - (answer["traced"]["peak_time_us"] - answer["peak_time_us"])
    (then,) = [total for ts, total in memory if abs(ts - then_ts) < 0.5]
    lines = {line["category"]: line for line in answer["basis"]}
    assert sum(lines[c]["traced_then_bytes"] for c in STEP_ONLY_CATEGORIES) == then < highest
    assert sum(lines[c]["traced_bytes"] for c in STEP_ONLY_CATEGORIES) == highest
    for category, line in lines.items():  # the state is the same at every moment
        assert category in STEP_ONLY_CATEGORIES or line["traced_then_bytes"] == line["traced_bytes"], line


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """torch's nn.TransformerEncoder LM (tests/support/torch_hf_run.py ``encoder``) traced at batch 8 x 64 tokens
    under AdamW, and real runs at batch 32, at 128 tokens and at both."""
    root = tmp_path_factory.mktemp("whatif_encoder")
    traced = str(root / "traced")
    _held_out("encoder", "traced", traced, "--batch", 8, "--seq", 64)
    return traced, {(batch, seq): _held_out("encoder", "truth", root / f"{batch}_{seq}", "--batch", batch, "--seq",
                                            seq) for batch, seq in ((32, 64), (8, 128), (32, 128))}


@pytest.mark.parametrize("batch, seq", [(32, 64), (8, 128), (32, 128)])
def test_a_time_first_attention_grows_with_the_batch_and_the_length(encoder, batch, seq):
    """A new user's report: torch's nn.TransformerEncoder (batch_first=True) read -5.1% at 2x the batch, -6.7% at
    2x the length, -13.4% at 4x both, and its largest batch under 32 MiB 81 where 73 is (a real run at 81 peaked
    over it): nn.MultiheadAttention works time first, its packed projections [3, seq, batch, d], the batch no first
    dimension. A buffer holding the length then the batch side by side carries both (``rules.buffers.seq_first``):
    the user's runs now read exact, these within 0.5% (-3.5%, -2.9%, -5.2% before)."""
    traced, real = encoder
    answer = estimate(traced, **({"batch": batch} if batch != 8 else {}), **({"seq": seq} if seq != 64 else {}))
    assert (answer["traced"]["batch"], answer["traced"]["seq"]) == (8, 64)
    truth = real[(batch, seq)]
    assert abs(_off(answer["peak_bytes"], truth["peak"])) <= EXACT, (answer["peak_bytes"], truth)
    # AdamW's step counters are the optimizer's, not a module's state, though the root module's own parameter
    # (the position table) owns one: before, they read as non-trainable state
    assert answer["by_category"]["non_trainable"] == truth["buffers"]
    assert answer["by_category"]["other_state"] == truth["counters"] > 0


RECURRENT = {"gru": "GRU", "lstm": "LSTM (oneDNN)", "rnn": "RNN (held out)", "grucell": "GRUCell loop",
             "lstmcell": "LSTMCell loop (held out)"}


@pytest.fixture(scope="module")
def recurrent(tmp_path_factory):
    """torch's recurrent layers in a plain loop under AdamW (tests/support/torch_hf_run.py), traced at batch 8 x 36
    tokens (36 steps: more than the 30 members of a list whose shapes torch's profiler records; no multiple of the
    batch), and real runs at batch 32 and at 72 tokens."""
    root = tmp_path_factory.mktemp("whatif_recurrent")
    traced, real = {}, {}
    for model in RECURRENT:
        traced[model] = str(root / model / "traced")
        _held_out(model, "traced", traced[model], "--batch", 8, "--seq", 36)
        for batch, seq in ((32, 36), (8, 72)):
            real[(model, batch, seq)] = _held_out(model, "truth", root / model / f"{batch}_{seq}", "--batch", batch,
                                                  "--seq", seq)["peak"]
    return traced, real


@pytest.mark.parametrize("model", list(RECURRENT), ids=list(RECURRENT.values()))
@pytest.mark.parametrize("asked", [dict(batch=32), dict(seq=72)], ids=["batch32", "seq72"])
def test_a_recurrent_layers_steps_grow_with_the_batch_and_the_length(recurrent, model, asked):
    """On the CPU a recurrent layer's call loops over the time steps: its buffers are one step's ([batch, hidden],
    36 of them, the length in no shape), its steps' outputs stacked from a list whose shapes the profiler does not
    record past 30 members, and the LSTM's oneDNN workspace bytes in one dimension. Before the rule (the call's,
    ``_Sizes._per_step``): LSTM batch 32 -29.1%, 72 tokens -16.7%; GRU -0.41% and -3.6%; the RNN, on which no rule
    was written, -2.0% and -2.4%. Now within 0.3% (the LSTM's workspace is near, not exactly,
    proportional: 3.98x at 4x the batch). A char-RNN's loop in Python (``nn.GRUCell`` per token, then a top-level
    ``torch.stack``) has no call around its steps: a cell called a multiple of the length times per forward pass
    runs one step per call, and the stack's output is shaped as the next op's input of its bytes (the head's [8, 36,
    128]). Before: GRUCell -0.81% and -3.79%, LSTMCell (held out) -0.73% and -3.41%; now within 0.03%."""
    traced, real = recurrent
    answer = estimate(traced[model], **asked)
    assert (answer["traced"]["batch"], answer["traced"]["seq"]) == (8, 36)
    truth = real[(model, asked.get("batch", 8), asked.get("seq", 36))]
    assert abs(_off(answer["peak_bytes"], truth)) <= EXACT, (answer["peak_bytes"], truth)
