"""PyTorch recorded like Keras (issue 48): plain loops (pytorch/examples' MNIST; its word language model, an
LSTM updated by hand with no optimizer; its DCGAN, two models and two optimizers in one loop; nanoGPT, a tied
embedding, a position table and gradients accumulated over micro-batches), Hugging Face
``Trainer`` (a GPT-2 from a config), Accelerate (a GPT-2 in run_clm_no_trainer's loop) and Lightning (a conv net
with BatchNorm), each run in a fresh process with TensorFlow blocked (``tests/corpus/pytorch``), served by the
plugin. Every figure is checked against what the live objects said (``model.parameters()``, ``model.buffers()``,
``optimizer.state``) or what the raw Chrome trace says, read here with ``json``; never against tb_modelmem itself."""

from __future__ import annotations

import collections
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from tb_modelmem import estimate
from tb_modelmem.schema.names import BACKWARD, FORWARD, INPUT, LOSS, OPTIMIZER
from tests.support.paths import REPO
from tests.support.plugin_harness import Served

RUNS = {"mnist_main": "mnist_main", "gpt2_trainer": "gpt2_trainer", "lightning_cnn": "lightning/version_0",
        "clm_no_trainer": "clm_no_trainer", "word_language_model": "word_language_model", "dcgan": "dcgan",
        "nanogpt": "nanogpt", "peft_sft": "peft_sft"}
COUNTERS = ("step",)


def run_corpus(name, logdir, out, mode="modelmem", *extra):
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-m", "tests.corpus.pytorch.run", name, "--logdir", logdir, "--out", out,
                           "--mode", mode, *extra], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(out) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("pytorch_corpus")
    logdir = str(root / "logs")
    truths = {name: run_corpus(name, logdir, str(root / f"{name}.json")) for name in RUNS}
    traces = {name: json.load(open(glob.glob(str(root / f"{name}.json_trace" / "*.pt.trace.json"))[0]))
              for name in RUNS}
    return logdir, truths, traces, Served(logdir)


def phase_time(rows, phase, on_layer=None):
    return sum(r["time_us"] for r in rows if r["phase"] == phase and (on_layer is None or bool(r["layer"]) == on_layer))


def ranges_truth(trace):
    """Op time by what the trace's own ranges say, read with json: top-level ops inside a module's range
    (forward), autograd's evaluate_function ops (backward), ops inside torch.optim's Optimizer.step#/zero_grad#
    ranges and no module's that autograd did not number (optimizer: Lightning runs the forward pass inside
    Optimizer.step), and per iteration (ProfilerStep#N) the ops in no range after its backward pass
    (Trainer's gradient clipping, a scheduler's step)."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    ops = sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"]))

    def spans(*prefixes):
        return [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "user_annotation"
                and e["name"].startswith(prefixes)]

    def inside(e, among):
        return any(a <= e["ts"] and e["ts"] + e["dur"] <= b for a, b in among)

    modules, optim = spans("tb_modelmem.layer: "), spans("Optimizer.step#", "Optimizer.zero_grad#")
    loader = spans("enumerate(DataLoader)#")
    top, end = [], -1.0
    for e in ops:  # an op inside another op is its parent's
        if e["ts"] >= end:
            top.append(e)
            end = e["ts"] + e["dur"]
    backward = [e for e in top if e["name"].startswith("autograd::engine::evaluate_function: ")]
    found = {BACKWARD: sum(e["dur"] for e in backward),
             FORWARD: sum(e["dur"] for e in top if e not in backward and inside(e, modules)),
             OPTIMIZER: sum(e["dur"] for e in top if e not in backward and inside(e, optim) and not inside(e, modules)
                            and "Sequence number" not in e.get("args", {})),
             "after_backward": 0.0}
    for a, b in spans("ProfilerStep#"):
        last = max((e["ts"] + e["dur"] for e in backward if a <= e["ts"] < b), default=None)
        if last is not None:
            found["after_backward"] += sum(e["dur"] for e in top if last <= e["ts"] < b and e not in backward
                                           and not inside(e, optim + modules + loader))
    return found


@pytest.mark.parametrize("name", sorted(RUNS))
def test_storage_is_the_live_objects_to_the_byte(corpus, name):
    logdir, truths, _, served = corpus
    truth = truths[name]
    assert truth["tensorflow_imported"] is False
    storage = served.json("/breakdown", run=RUNS[name], tag="storage")
    totals = storage["totals"]
    slots = sum(v for k, v in truth["optimizer_state"].items() if k not in COUNTERS)
    assert totals["weight"] == truth["parameters"]  # a tied parameter (GPT-2's lm_head) once
    assert storage["total_params"] == truth["element_count"]  # and in the count (buffers in it, as Keras counts)
    # the Weights card's count is model.parameters()', the Non-trainable card's the buffers' (a new user's report)
    assert storage["params_by_role"]["weight"] == truth["parameter_count"]
    assert storage["params_by_role"].get("non_trainable", 0) == truth["element_count"] - truth["parameter_count"]
    assert totals["non_trainable"] == truth["buffers"] + truth["frozen"]  # a LoRA model's frozen base among them
    assert totals["optimizer_slot"] == slots
    assert totals["other"] == truth["optimizer_state"].get("step", 0)
    assert (storage["optimizer"] or {}).get("class_name") == truth["optimizer"]  # None: updated by hand
    for betas in truth["betas"]:  # a list setting, in the card's text as the live param group holds it
        assert f"betas=({betas[0]:.7g}, {betas[1]:.7g})" in storage["optimizer_summary"]["text"], betas
    # the model's own row holds every module, as a Keras model's row does: its parameters and bytes are the model's
    layers = storage["layers"]["columns"]
    (top,) = [i for i, depth in enumerate(layers["depth"]) if depth == 0]
    assert layers["layer"][top] == truth["model_class"] and layers["whole_model"][top]
    assert layers["params"][top] == truth["element_count"] and layers["total_bytes"][top] == sum(totals.values())
    names = set(storage["variables"]["rows"][0]) and {r["name"] for r in served.json(
        "/variables", run=RUNS[name], tag="storage", limit=100000)["rows"]}
    several = len((truth["optimizer"] or "").split(" + "))  # a GAN's two: optimizer0 and optimizer1
    states = {"optimizer"} if several == 1 else {f"optimizer{i}" for i in range(several)}
    assert all(n.split(".")[0] in {m.split("/")[0] for m in truth["modules"]} | states for n in names)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_ops_sit_on_the_modules_named_as_the_state_dict(corpus, name):
    _, truths, _, served = corpus
    truth = truths[name]
    ops = served.json("/ops", run=RUNS[name], tag="ops")
    rows = served.json("/op_rows", run=RUNS[name], tag="ops", limit=100000)["rows"]
    named = set(truth["modules"]) | {truth["model_class"]}
    assert {r["layer"] for r in rows if r["layer"]} <= named
    assert ops["join"]["vocabulary"] == "breakdown" and ops["join"]["unmatched_layers"] == 0
    # the forward and backward passes on modules (on none: AccumulateGrad, the backward of a loss computed
    # outside the model); the update (one fused or foreach kernel over every parameter), the batch's fetch
    # and such a loss are on none, in their phase
    passes = [r for r in rows if r["phase"] in (FORWARD, BACKWARD)]
    on_modules = sum(r["time_us"] for r in passes if r["layer"])
    off = sorted(((round(r["time_us"]), r["name"], r["phase"]) for r in passes if not r["layer"]), reverse=True)
    # 90-98% on an idle machine; op times move with the machine's load, the floor leaves room for that
    assert on_modules / sum(r["time_us"] for r in passes) >= 0.80, (name, on_modules, off[:8])
    assert not [r["name"] for r in rows if not r["phase"]]  # every op in a phase


@pytest.mark.parametrize("name", sorted(RUNS))
def test_phase_times_equal_the_traces_own_ranges(corpus, name):
    _, _, traces, served = corpus
    rows = served.json("/op_rows", run=RUNS[name], tag="ops", limit=100000)["rows"]
    expected = ranges_truth(traces[name])
    assert phase_time(rows, BACKWARD) == pytest.approx(expected[BACKWARD], rel=0.02)
    assert phase_time(rows, FORWARD, on_layer=True) == pytest.approx(expected[FORWARD], rel=0.02)
    # the update, and what runs in no range after the backward pass (Trainer's gradient clipping)
    assert phase_time(rows, OPTIMIZER) == pytest.approx(expected[OPTIMIZER] + expected["after_backward"], rel=0.02)
    if name == "lightning_cnn":  # the loss, computed in training_step inside optimizer.step(closure)
        assert phase_time(rows, LOSS) > 0
    if name == "nanogpt":  # get_batch, with no DataLoader's range, between a micro-batch's forward and backward:
        # on no module; autograd numbers its torch.stack, so it reads as forward work (left as is: a rule that told
        # it apart would need the ops autograd numbered but never differentiated)
        fetches = [r for r in rows if r["op_type"] in ("aten::randint", "aten::stack")]
        assert fetches and not [r["layer"] for r in fetches if r["layer"]]
    else:
        assert phase_time(rows, INPUT) > 0  # the DataLoader's next batch, fetched in the window


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_peak_holds_storages_weights_and_slots_and_its_parts_sum(corpus, name):
    _, truths, _, served = corpus
    truth = truths[name]
    peak = served.json("/ops", run=RUNS[name], tag="ops")["peak_by_category"]
    assert peak["weights"] == truth["parameters"]
    if truth["optimizer"] is None:  # the update by hand: what state it keeps, no record holds
        assert peak["optimizer_slots"] is None and "updated by hand" in peak["unknown"]["optimizer_slots"]
    else:
        assert peak["optimizer_slots"] == sum(v for k, v in truth["optimizer_state"].items() if k not in COUNTERS)
    assert (peak["non_trainable"] or 0) == truth["buffers"] + truth["frozen"]
    if truth.get("batch_is_views"):  # slices of token ids made before the window: the batch allocates nothing
        assert peak["inputs"] == 0 and truth["batch_bytes"] > 0
    elif name == "nanogpt":  # get_batch's torch.stack, which autograd numbers, runs between a micro-batch's forward
        # and backward: read as forward work, its batch is among the activations (left as is: see the phase test)
        assert peak["inputs"] == 0 and peak["activations"] >= truth["batch_bytes"] > 0
    else:
        assert peak["inputs"] >= truth["batch_bytes"] > 0
    parts = sum(v or 0 for k, v in peak.items() if k not in ("total", "unknown", "step_peak_bytes"))
    assert parts == peak["total"]  # what is known; unknown only the state no record holds
    assert set(peak["unknown"]) == ({"optimizer_slots", "other_state"} if truth["optimizer"] is None else set())


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_traced_precision_is_what_the_step_computed_in(corpus, name):
    """torch's trace records no op's output dtype, so every PyTorch step read "float32", peft's bf16 LoRA run too.
    Truth: the script's own setting (Trainer's ``bf16=True``: CPU autocast) with the live parameters' dtype, and
    the trace read with json: its matrix products' and convolutions' kernels (aten::mm, addmm, bmm, _convolution)
    took that dtype's inputs."""
    logdir, truths, traces, _ = corpus
    truth = truths[name]
    assert truth["parameter_dtypes"] == ["torch.float32"]
    computed = collections.Counter(e["args"]["Input type"][0] for e in traces[name]["traceEvents"]
                                   if e.get("name") in ("aten::mm", "aten::addmm", "aten::bmm", "aten::_convolution")
                                   and e.get("args", {}).get("Input type"))
    autocast = truth.get("autocast")
    assert computed.most_common(1)[0][0] == ("c10::BFloat16" if autocast else "float"), computed
    expected = f"{autocast} autocast" if autocast else "float32"
    assert estimate(logdir, run=RUNS[name])["traced"]["policy"] == expected


def real_peak(tmp_path, name, *args):
    """A real plain run of a corpus script at another setting: its trace's highest "Total Allocated" (json) plus
    what the live objects held all through it (trainable and frozen parameters, buffers, optimizer state), and its
    ground truth."""
    logs = tmp_path / "_".join((name,) + args)
    truth = run_corpus(name, str(logs), str(logs) + ".json", "plain", *args)
    (trace,) = glob.glob(str(logs / name / "*.pt.trace.json"))
    with open(trace) as f:
        step = max(int(e["args"]["Total Allocated"]) for e in json.load(f)["traceEvents"]
                   if e.get("name") == "[memory]")
    held = truth["parameters"] + truth["frozen"] + truth["buffers"] + sum(truth["optimizer_state"].values())
    return step + held, truth


def projected_as_real_runs(logdir, tmp_path, name, questions, **fixed):
    """Each question (``{"batch": 16}``, ``{"seq": 128}``) asked of a corpus run's trace, with ``fixed`` (an
    optimizer), and run for real: its projected peak within 1% of the real run's (``real_peak``). Yields the
    question, the answer and the real run's truth, for what a test checks beside the peak."""
    flags = {"batch": "--batch", "seq": "--bptt"}
    for asked in questions:
        real, truth = real_peak(tmp_path, name, *[part for key, value in asked.items()
                                                  for part in (flags[key], str(value))])
        answer = estimate(logdir, run=RUNS[name], **fixed, **asked)
        assert abs(answer["peak_bytes"] - real) <= 0.01 * real, (asked, answer["peak_bytes"], real)
        yield asked, answer, truth


def test_a_gan_of_two_models_projects_as_real_runs_peak(corpus, tmp_path):
    """pytorch/examples' DCGAN passes its generator and discriminator as a list, and their optimizers (a list
    made the tab's capture fail and read the step as a TensorFlow one). Its step at 2x and 4x the batch, against
    real runs: their count plus the models' parameters and buffers and both optimizers' state (the live objects).
    Asked SGD (plain, and with momentum), both models' optimizers are replaced, as in a real run of that."""
    from tests.corpus.pytorch import dcgan

    logdir, truths, _, _ = corpus
    traced = estimate(logdir, run=RUNS["dcgan"])["traced"]
    # both optimizers, as the live objects' classes name them (not one class "named by the trace")
    assert (traced["batch"], traced["optimizer"]) == (dcgan.BATCH, truths["dcgan"]["optimizer"])
    for batch in (2 * dcgan.BATCH, 4 * dcgan.BATCH):
        real, _ = real_peak(tmp_path, "dcgan", "--batch", str(batch))
        projected = estimate(logdir, run=RUNS["dcgan"], batch=batch)["peak_bytes"]
        assert abs(projected - real) <= 0.01 * real, (batch, projected, real)
    # asked SGD, with momentum or not, for both models: against real runs whose two optimizers are those
    for asked, flag in (("SGD", "sgd"), ("momentum", "momentum")):
        real, truth = real_peak(tmp_path, "dcgan", "--optimizer", flag)
        assert truth["optimizer"] == "SGD + SGD"
        projected = estimate(logdir, run=RUNS["dcgan"], optimizer=asked)["peak_bytes"]
        assert abs(projected - real) <= 0.01 * real, (asked, projected, real)


def test_a_time_first_lstm_updated_by_hand_projects_as_real_runs_peak(corpus, tmp_path):
    """pytorch/examples' word language model feeds its LSTM [bptt, batch] token ids, time first, and updates its
    parameters by hand. Its batch read 35 and its sequence 20 (the ids' first dimension taken for the batch), and
    with no optimizer's range no weight was known, so its [bptt x batch, vocabulary] logits were not scaled: batch
    40 projected -21%. Now the batch is the LSTM's (``batch_first=False``), the weights the shapes autograd
    accumulated gradients into. Asked SGD (torch.optim's keeps no state, as the update by hand), against real runs:
    their traces' highest "Total Allocated" (json) plus ``model.parameters()``' bytes."""
    from tests.corpus.pytorch import word_language_model as wlm

    logdir, truths, _, _ = corpus
    traced = estimate(logdir, run=RUNS["word_language_model"])["traced"]
    assert (traced["batch"], traced["seq"]) == (wlm.BATCH, wlm.BPTT)
    checked = projected_as_real_runs(logdir, tmp_path, "word_language_model",  # no state: updated by hand
                                     [{"batch": 2 * wlm.BATCH}, {"seq": 2 * wlm.BPTT}], optimizer="SGD")
    assert len(list(checked)) == 2


def test_a_gpt_with_a_position_table_projects_its_length_and_batch_as_real_runs_peak(corpus, tmp_path):
    """nanoGPT at its README's CPU recipe, 4 micro-batches a step: its position table wpe has a row per token
    ([block_size, 128], 64 rows at 64 tokens), so every length asked read unknown ("64 is also a dimension of
    transformer.wpe.weight"). Its rows are positions, which no buffer has as a feature; and a model for a longer
    length has a longer table, its gradient and AdamW's state of it with it. Against real runs built for that
    length and batch: their traces' highest "Total Allocated" (json) plus the live model's and AdamW's bytes."""
    from tests.corpus.pytorch import nanogpt

    logdir, truths, _, _ = corpus
    traced = estimate(logdir, run=RUNS["nanogpt"])["traced"]
    assert (traced["batch"], traced["seq"]) == (nanogpt.BATCH, nanogpt.BLOCK)
    for asked, answer, truth in projected_as_real_runs(logdir, tmp_path, "nanogpt", [
            {"batch": 2 * nanogpt.BATCH}, {"seq": 2 * nanogpt.BLOCK}, {"seq": 4 * nanogpt.BLOCK}]):
        # the weights and AdamW's state of the model built for that length: the live objects' (wpe's rows grown)
        slots = truth["optimizer_state"]["exp_avg"] + truth["optimizer_state"]["exp_avg_sq"]
        assert (answer["by_category"]["weights"], answer["by_category"]["optimizer_slots"]) == (
            truth["parameters"], slots), asked
        # asked Adam: its state of each tensor, that longer table's among them, as the real AdamW's (same slots)
        adam = estimate(logdir, run=RUNS["nanogpt"], optimizer="Adam", **asked)["by_category"]["optimizer_slots"]
        assert adam == slots, asked


def test_a_lora_model_under_autocast_and_checkpointing_projects_as_real_runs_peak(corpus, tmp_path):
    """peft's SFT example: LoRA on every linear layer of a Mistral, Trainer's bf16 autocast and reentrant gradient
    checkpointing. Its frozen base is no weight the optimizer reads, so autocast's bfloat16 copy of lm_head [1000,
    96], 1000 a multiple of the batch 4, read as [batch x time, units] (batch 16 +4.0%), and rotary's cos and sin
    [1, 64, 24], 64 a multiple of it too. Against real runs: their traces' highest "Total Allocated" (json) plus
    the live model's trainable and frozen parameters, buffers and AdamW's state."""
    from tests.corpus.pytorch import peft_sft

    logdir, truths, _, _ = corpus
    traced = estimate(logdir, run=RUNS["peft_sft"])["traced"]
    assert (traced["batch"], traced["seq"]) == (peft_sft.BATCH, peft_sft.BLOCK)
    checked = projected_as_real_runs(logdir, tmp_path, "peft_sft", [
        {"batch": 2 * peft_sft.BATCH}, {"batch": 4 * peft_sft.BATCH}, {"seq": 2 * peft_sft.BLOCK}])
    assert len(list(checked)) == 3


def test_nanogpts_checkpoint_dict_is_the_live_objects_and_the_file_to_the_byte(corpus):
    """train.py's ``ckpt.pt``: the model's state_dict (the tied wte and lm_head, one storage under two names),
    AdamW's state_dict (its two param groups), model_args, config and a loss tensor, read as a breakdown in the
    run beside its trace; against the live objects, and every byte of the file accounted for."""
    logdir, truths, _, served = corpus
    truth = truths["nanogpt"]
    storage = served.json("/breakdown", run=RUNS["nanogpt"], tag="torch/ckpt.pt")
    totals = storage["totals"]
    assert totals["weight"] == truth["parameters"]  # the tied tensor once
    assert totals["optimizer_slot"] == truth["optimizer_state"]["exp_avg"] + truth["optimizer_state"]["exp_avg_sq"]
    assert totals["other"] == truth["optimizer_state"]["step"] + 4  # the steps, and best_val_loss (float32)
    answer = subprocess.run([sys.executable, "-m", "tb_modelmem.cli", "inspect", "--json",
                             os.path.join(logdir, "nanogpt", "ckpt.pt")], capture_output=True, text=True, timeout=300,
                            cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO))
    report = json.loads(answer.stdout)
    assert report["reconciled"] and report["file_bytes"] == os.path.getsize(os.path.join(logdir, "nanogpt", "ckpt.pt"))
    slots = {v["name"]: v["slot_of"] for v in report["variables"] if v["role"] == "optimizer_slot"}
    # each numbered state is the parameter the live AdamW's groups hold at that place (matrices first, then norms)
    assert slots == {f"optimizer.state.{number}.{slot}": name for number, name in truth["state_numbers"].items()
                     for slot in ("exp_avg", "exp_avg_sq")}


def test_a_checkpoint_saved_into_the_run_changes_no_ops_module(corpus, tmp_path):
    """torch.save of the state_dicts into the run folder: the tab lists it, and the trace keeps its modules."""
    import torch

    logdir, _, _, served = corpus
    before = {r["name"]: r["layer"] for r in served.json("/op_rows", run="mnist_main", tag="ops", limit=100000)["rows"]}
    copy = tmp_path / "logs"
    shutil.copytree(os.path.join(logdir, "mnist_main"), copy / "mnist_main")
    from tests.corpus.pytorch import mnist_main

    model, optimizer, _ = mnist_main.build()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, copy / "mnist_main" / "model.pt")
    again = Served(str(copy))
    assert ("mnist_main", "torch/model.pt") in set(again.tags())
    for tag in ("storage", "torch/model.pt"):
        answer = again.json("/op_rows", run="mnist_main", tag="ops", breakdown=tag, limit=100000)
        assert {r["name"]: r["layer"] for r in answer["rows"]} == before, tag


def test_traces_written_without_tb_modelmem_get_the_same_rules(tmp_path):
    """Lightning's own PyTorchProfiler: modules from its [pl][module] ranges (the state_dict paths), the
    loss in training_step, the update after the closure the optimizer's, the cut window said."""
    truth = run_corpus("lightning_cnn", str(tmp_path / "logs"), str(tmp_path / "truth.json"), mode="plain")
    served = Served(str(tmp_path / "logs"))
    ((run, tag),) = [(r, t) for r, t in served.tags() if t.endswith(".pt.trace.json")]
    rows = served.json("/op_rows", run=run, tag=tag, limit=100000)["rows"]
    assert {r["layer"] for r in rows if r["layer"]} <= set(truth["modules"])
    assert phase_time(rows, LOSS) > 0 and phase_time(rows, OPTIMIZER) > 0
    ops = served.json("/ops", run=run, tag=tag)
    assert "starts inside an iteration" in ops["allocations_note"]
    assert ops["peak_by_category"]["weights"] is None and "weights" in ops["peak_by_category"]["unknown"]


def test_importing_tb_modelmem_imports_no_trainer_library():
    code = ("import sys, tb_modelmem, tb_modelmem.pytorch, tb_modelmem.summary; print(sorted(m for m in "
            "('transformers', 'lightning', 'pytorch_lightning', 'tensorflow') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_growth_samples_count_the_live_parameters(corpus, name):
    """Each run's memory samples (the Growth view): the live nn.Parameters' bytes are the model's (a tied one
    once), at the first iteration and at the end, and RSS is known."""
    _, truths, _, served = corpus
    growth = served.json("/growth", run=RUNS[name], tag="memory")
    series = growth["series"]
    if name in ("gpt2_trainer", "peft_sft"):  # Trainer's callback asked memory_every=2 over its 6 iterations
        assert series["rss_bytes"]["steps"][:3] == [1, 2, 4] and set(series["rss_bytes"]["steps"][3:]) == {6}
    assert series["live_variable_bytes"]["values"] and set(series["live_variable_bytes"]["values"]) == {
        truths[name]["parameters"] + truths[name]["frozen"]}  # every nn.Parameter, frozen or not
    assert all(v > 0 for v in series["rss_bytes"]["values"])
    # the models the script built (DCGAN's generator and discriminator; a LoRA model wraps its base), not the
    # parameterless modules a library keeps (transformers' activations: 10 "models" beside one GPT-2 before)
    assert set(series["live_models"]["values"]) == {2 if name == "dcgan" else 1}, series["live_models"]
