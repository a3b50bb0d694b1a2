"""PyTorch checkpoints as the ecosystem writes them (issue 49), made by real runs in a fresh process
(``tests/support/torch_checkpoints.py``: Trainer folders, sharded and bfloat16/float8 safetensors, a Lightning
``.ckpt``, torch.distributed.checkpoint in one process and over two gloo ranks sharded by FSDP2), each read by
``tb-modelmem inspect --json`` and by the plugin from a log dir, and checked against what the live objects
said (``model.parameters()`` tied once, ``model.buffers()``, ``optimizer.state``) and the files' sizes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from tb_modelmem import cli
from tests.support.paths import REPO
from tests.support.plugin_harness import Served

KINDS = ("trainer", "trainer_bin", "trainer_lora", "accelerate", "accelerate_bin", "accelerate_distill", "lightning",
         "dcp_1", "dcp_2")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("torch_checkpoints"))
    env = dict(os.environ, PYTHONPATH=REPO, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-m", "tests.support.torch_checkpoints", out], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(os.path.join(out, "truth.json")) as f:
        return out, json.load(f)


def inspect_json(path):
    found = io.StringIO()
    with contextlib.redirect_stdout(found):
        assert cli.main(["inspect", path, "--json"]) == 0
    return json.loads(found.getvalue())


def on_disk(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path))


@pytest.mark.parametrize("kind", KINDS)
def test_each_role_is_the_live_objects_to_the_byte_and_the_files_reconcile(made, kind):
    _, truth = made
    t = truth[kind]
    report = inspect_json(t["path"])
    roles = report["by_role"]
    state = t["optimizer_state"]
    assert roles["weight"] == t["parameters"]  # GPT-2's tied lm_head once (HF saves it once)
    assert roles["non_trainable"] == t["buffers"]
    assert roles["optimizer_slot"] == sum(v for k, v in state.items() if k != "step")
    assert roles["other"] >= state.get("step", 0)
    assert report["optimizer"]["class_name"] == t["optimizer"]
    assert report["file_bytes"] == on_disk(t["path"])


def test_slots_are_tied_to_their_parameters_with_or_without_the_parameter_order(made):
    """A torch.save'd state_dict keeps the parameter order; safetensors (Trainer's and Accelerate's default)
    keeps none, so there slots are paired by shape: every module's slot bytes as the live optimizer.state held
    them, each param group's members where no shape sits in two groups (Trainer's split), else said unknown
    (run_clm_no_trainer.py's split, whose no-decay names miss GPT-2's ln_1.weight, puts [64] in both)."""
    _, truth = made
    for kind in ("trainer_bin", "trainer", "trainer_lora", "accelerate", "accelerate_bin"):
        t = truth[kind]
        report = inspect_json(t["path"])
        slots = [v for v in report["variables"] if v["role"] == "optimizer_slot"]
        assert slots and all(v["slot_of"] for v in slots), kind
        assert {v["slot_of"] for v in slots} <= {v["name"] for v in report["variables"] if v["role"] == "weight"}
        by_module: dict = {}  # each module's slot bytes, as the live optimizer.state held them
        for v in slots:
            by_module[v["layer"]] = by_module.get(v["layer"], 0) + v["bytes"]
        assert by_module == {m.replace(".", "/"): b for m, b in t["slots_by_module"].items()}, kind
        if kind.startswith("accelerate"):  # AdamW's two groups, [64] in each: their members unknown, and said so
            assert "groups" not in report["optimizer"]["config"]["optimizer.bin"]
            # the second model's SGD groups, named as its parameters are in the folder (under model_1.)
            assert [g["params"] for g in report["optimizer"]["config"]["optimizer_1.bin"]["groups"]] == t["head_groups"]
            assert any(re.search(r"optimizer\.bin: optimizer state tied to parameters by shape.* its parameters "
                                 r"of shape \[64\] sit in several param groups", line["what"])
                       for line in report["overhead"]), report["overhead"]
            continue
        # Trainer's two param groups, each by its parameters' names, as the live optimizer held them
        groups = report["optimizer"]["groups"]
        if kind == "trainer_bin":
            assert [g["params"] for g in groups] == [g["params"] for g in t["groups"]]
        else:  # paired by shape: each group's members, the order within one shape by name
            assert [sorted(g["params"]) for g in groups] == [sorted(g["params"]) for g in t["groups"]]
            assert any("tied to parameters by shape" in line["what"] for line in report["overhead"])
        assert [g["config"].get("weight_decay", report["optimizer"]["config"]["weight_decay"]) for g in groups] == [
            g["weight_decay"] for g in t["groups"]]


def test_an_optimizer_whose_slots_fit_two_models_is_not_guessed(made):
    """Accelerate numbers models and optimizers apart: a student's AdamW beside a frozen teacher of the same
    shapes fits both models' parameters, so its slots stay the optimizer's, and the folder says why."""
    _, truth = made
    report = inspect_json(truth["accelerate_distill"]["path"])
    slots = [v for v in report["variables"] if v["role"] == "optimizer_slot"]
    assert slots and not any(v["slot_of"] for v in slots)
    assert sum(v["bytes"] for v in slots) == sum(truth["accelerate_distill"]["slots_by_module"].values())
    assert any("optimizer.bin: optimizer state not tied to parameters: its slots fit the parameters of 2 models "
               "(model.safetensors, model_1.safetensors)" in line["what"] for line in report["overhead"])


def test_safetensors_single_sharded_and_low_precision(made):
    _, truth = made
    sharded = inspect_json(truth["sharded"]["path"])
    assert sharded["by_role"]["weight"] == truth["sharded"]["parameters"]
    assert sharded["file_bytes"] == sum(os.path.getsize(os.path.join(os.path.dirname(truth["sharded"]["path"]), n))
                                        for n in os.listdir(os.path.dirname(truth["sharded"]["path"]))
                                        if "safetensors" in n)
    low = inspect_json(truth["bf16"]["path"])
    assert {v["name"]: v["bytes"] for v in low["variables"]} == truth["bf16"]["tensors"]
    assert {v["name"]: v["dtype"] for v in low["variables"]}["proj.weight"] == "float8_e4m3fn"
    assert low["by_role"]["non_trainable"] == truth["bf16"]["tensors"]["norm.running_mean"]
    assert low["file_bytes"] == os.path.getsize(truth["bf16"]["path"])


def test_the_tab_lists_each_checkpoint_as_one_item(made, tmp_path):
    out, truth = made
    run = tmp_path / "logs" / "run"
    run.mkdir(parents=True)
    for kind in KINDS:
        source = truth[kind]["path"]
        target = run / (kind + ("/" if os.path.isdir(source) else os.path.splitext(source)[1]))
        (shutil.copytree if os.path.isdir(source) else shutil.copy)(source, str(target).rstrip("/"))
    shutil.copy(truth["bf16"]["path"], run / "bf16.safetensors")
    served = Served(str(tmp_path / "logs"))
    tags = {t for r, t in served.tags() if r == "run"}
    assert tags == {"torch/trainer/", "torch/trainer_bin/", "torch/trainer_lora/", "torch/accelerate/",
                    "torch/accelerate_bin/",
                    "torch/accelerate_distill/", "torch/lightning.ckpt", "torch/dcp_1/", "torch/dcp_2/",
                    "torch/bf16.safetensors"}
    for kind in KINDS:
        tag = next(t for t in tags if t.startswith("torch/" + kind + ("/" if kind != "lightning" else ".")))
        totals = served.json("/breakdown", run="run", tag=tag)["totals"]
        assert totals["weight"] == truth[kind]["parameters"], kind
    notes = {t["tag"]: t["note"] for r in served.json("/runs")["runs"] if r["run"] == "run" for t in r["tags"]}
    assert notes["torch/trainer/"] == "Hugging Face Trainer checkpoint"  # what each folder is, in its picker
    assert notes["torch/accelerate/"] == "Accelerate save_state folder"
    assert notes["torch/dcp_1/"] == "torch.distributed.checkpoint"
    # a LoRA adapter's Trainer groups: the no-decay one holds none of its matrices
    lora = served.json("/breakdown", run="run", tag="torch/trainer_lora/")["optimizer_summary"]["text"]
    assert [len(g["params"]) for g in truth["trainer_lora"]["groups"]][1] == 0
    assert lora.endswith(f"; 2 param groups, the same settings: {len(truth['trainer_lora']['groups'][0]['params'])} "
                         "parameters, an empty one"), lora


def test_a_python_file_named_like_a_checkpoint_is_refused_not_run(tmp_path):
    """training_args.bin and rng_state.pth hold objects of their own classes: read alone they are refused by
    name, in a Trainer folder counted as files, never unpickled."""
    import pickle

    marker = tmp_path / "ran"

    class Runs:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "training_args.bin"
    with open(path, "wb") as f:
        pickle.dump(Runs(), f)
    code = cli.main(["inspect", str(path)])
    assert code == 2 and not marker.exists()


def test_weights_flattened_into_one_buffer_are_each_their_own(tmp_path):
    """On CUDA, nn.LSTM/GRU/RNN's flatten_parameters makes every weight a view of one flat buffer, and torch.save
    keeps that one storage: each view is its own parameter with its own bytes (not a tied second name), and
    each slot is its own parameter's. The views are made here as cuDNN lays them, one after another."""
    import torch

    torch.manual_seed(0)
    rnn = torch.nn.GRU(5, 8)
    flat = torch.cat([p.detach().reshape(-1) for p in rnn.parameters()])
    at = 0
    for name, p in list(rnn.named_parameters()):
        view = torch.nn.Parameter(flat[at:at + p.numel()].view_as(p))
        setattr(rnn, name, view)
        at += p.numel()
    optimizer = torch.optim.SGD(rnn.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        rnn(torch.randn(3, 2, 5))[0].sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    path = tmp_path / "gru.pt"
    torch.save({"model": rnn.state_dict(), "optimizer": optimizer.state_dict()}, path)
    report = inspect_json(str(path))
    weights = {v["name"]: v["bytes"] for v in report["variables"] if v["role"] == "weight"}
    assert weights == {name: p.numel() * p.element_size() for name, p in rnn.named_parameters()}
    named = {id(p): name for name, p in rnn.named_parameters()}
    slots = {v["slot_of"]: v["bytes"] for v in report["variables"] if v["role"] == "optimizer_slot"}
    assert slots == {named[id(p)]: s["momentum_buffer"].numel() * 4 for p, s in optimizer.state.items()}
    assert report["file_bytes"] == os.path.getsize(path)
