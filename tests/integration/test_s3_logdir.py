"""A log dir in an S3 bucket reads as the same folder on disk (issue 52): a PyTorch trace, a memory snapshot and
a checkpoint beside them, uploaded to a real S3-compatible server (moto's, started by the test on 127.0.0.1),
served by the plugin through TensorBoard's filesystem layer; each item's figures are the fixture's truth (the
checkpoint's read by ranged requests into the zip, never a local path)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support.paths import FIXTURES, REPO

pytest.importorskip("moto")
TORCH = os.path.join(FIXTURES, "torch")
TRUTH = json.load(open(os.path.join(TORCH, "truth.json")))
H100_PEAK = 3_182_946_816  # tests/fixtures/torch_h100/README.md: torch.cuda.max_memory_allocated()


def test_trace_snapshot_and_checkpoint_in_a_bucket_read_exactly(tmp_path):
    run = tmp_path / "logs" / "run"
    run.mkdir(parents=True)
    shutil.copy(os.path.join(FIXTURES, "torch_h100", "resnet50_adamw_b32.pt.trace.json.gz"), run)
    shutil.copy(os.path.join(TORCH, "cnn_adam_cuda_style.pickle.gz"), run)
    shutil.copy(os.path.join(TORCH, "cnn_adam.pt"), run)
    out = tmp_path / "answers.json"
    done = subprocess.run([sys.executable, "-m", "tests.support.s3_logdir", str(tmp_path / "logs"), str(out)],
                          cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3"),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.load(open(out))
    assert set(answers) == {"torch/resnet50_adamw_b32.pt.trace.json.gz", "torch/cnn_adam_cuda_style.pickle.gz",
                            "torch/cnn_adam.pt"}
    assert all(a["status"] == 200 and a["run"] == "run" for a in answers.values()), answers
    trace = json.loads(answers["torch/resnet50_adamw_b32.pt.trace.json.gz"]["body"])
    assert trace["peak_bytes"] == H100_PEAK
    snapshot = json.loads(answers["torch/cnn_adam_cuda_style.pickle.gz"]["body"])
    assert snapshot["peak_bytes"] == TRUTH["cnn_adam_cuda_style.pickle.gz"]["max_memory_allocated"]
    checkpoint = json.loads(answers["torch/cnn_adam.pt"]["body"])
    assert checkpoint["totals"]["weight"] == TRUTH["cnn_adam.pt"]["parameters"]
    assert checkpoint["file_bytes"] == TRUTH["cnn_adam.pt"]["file_bytes"]
