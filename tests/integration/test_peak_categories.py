"""Issue 10 acceptance: every byte of a step's peak in a category, on CPU with TensorFlow's BFC
allocator (seed 002's LeNet, batch 32, Adam), for a Keras fit profiled by MemoryCallback and for the
same model's TF1 RunMetadata. Run in a fresh process: the allocator is chosen when TensorFlow starts."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tb_modelmem.readers import xspace
from tb_modelmem.schema.names import PEAK_CATEGORIES
from tests.support.plugin_harness import Served, layer_rows

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The held and peak checks read BFC's chunks, which move with the executor's op order, and the order moves
# when the machine is busy (scripts/test.sh runs these alone). Most runs hold 8,318,844-8,497,020 B past the
# variables (the slack made at build time 7,971,376); see the held check for the order that holds more.
pytestmark = pytest.mark.quiet
LENET_WEIGHTS = (5 * 5 * 1 + 1) * 32 + (5 * 5 * 32 + 1) * 64 + (3136 + 1) * 1024 + (1024 + 1) * 10


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> str:
    logdir = str(tmp_path_factory.mktemp("peak"))
    result = subprocess.run([sys.executable, "-m", "tests.support.peak_run", logdir], cwd=REPO, capture_output=True,
                            text=True, timeout=600,
                            # one inter-op and one intra-op thread: the executor runs the step's ops in one order,
                            # so the peak is one moment (free-running, a clean CI run once peaked where no
                            # activation was held)
                            env=dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true", TF_CPP_MIN_LOG_LEVEL="3",
                                     TF_NUM_INTEROP_THREADS="1", TF_NUM_INTRAOP_THREADS="1"))
    assert result.returncode == 0, result.stderr[-3000:]
    return logdir


@pytest.fixture(scope="module")
def served(logdir) -> Served:
    return Served(logdir)


def _parts(peak):
    return {c: peak[c] or 0 for c in PEAK_CATEGORIES}  # None: unknown (no breakdown to say)


def _buffer(buffers, shape, category):
    return [b for b in buffers if b["shape"] == shape and b["category"] == category]


def test_keras_peak_is_split_byte_for_byte(served, logdir):
    body = served.json("/ops", run="keras", tag="ops")
    peak = body["peak_by_category"]
    assert body["allocations"] == "all"  # the BFC allocator records every allocation
    assert sum(_parts(peak).values()) == peak["total"] == body["peak_bytes"]
    assert peak["weights"] == 4 * LENET_WEIGHTS == 13_098_536
    assert peak["optimizer_slots"] == 2 * 13_098_536  # m and v, as in the Storage view
    assert peak["other_state"] == 8 + 4  # Adam's iteration (int64) and learning rate (float32)
    assert peak["activations"] > 0 and peak["gradients"] > 0 and peak["optimizer_temporaries"] > 0
    # What the allocator held from before the trace is named: what earlier steps left and this one frees,
    # and what stays all through it, which is the chunks BFC handed the variables past their size. That
    # chunk slack is measured independently, from BFC's own events while the model and Adam were built
    # (chunk_slack.json: 7,971,376 B here, fc1's kernel slots in 16 MiB chunks for 12.25 MiB each).
    # Measured over three runs: held 8,495,996-8,497,020 B, 0.6% of the peak past the slack made at build
    # time (the copies TensorFlow writes of a variable have chunks of their own: one of fc1's slots, moved to
    # a 20.7 MB chunk before the peak, put 7.9 MB more there in another run); unattributed 0.
    with open(os.path.join(logdir, "chunk_slack.json")) as f:
        built = json.load(f)
    slack = built["handed"] - built["asked"]
    assert built["variables"] == 13_098_536 * 3 + 12 and slack > 0
    # A variable TensorFlow moved to a copy before the peak holds the copy's chunk, not the one it was built in:
    # at most the copy's own slack more, at most the largest built slack of its size less.
    copies = [b for b in served.json("/timeline", run="keras", tag="ops")["buffers"] if b["category"] == "moved_state"
              and b["op"]]
    gained = sum(b["bytes"] - (b["requested_bytes"] or b["bytes"]) for b in copies)
    lost = sum(max([handed - asked for handed, asked in built["chunks"] if asked == b["requested_bytes"]], default=0)
               for b in copies)
    # About one run in ten, alone and ordered too, takes another op order throughout (its peak 81.85 MB, where
    # others read 87.75-91.63) and holds 10,177,404-10,178,428 B, 2.7% of its peak past that slack (two CI runs):
    # where, the build-time events do not say; hence 3% above, 1% below.
    within = 0.01 * peak["total"]
    assert slack - lost - within <= peak["held_between_steps"] <= slack + gained + 3 * within, (
        slack, gained, lost, peak)
    assert peak["unattributed"] <= 0.02 * peak["total"], peak
    why = body["peak_notes"]["held_between_steps"]
    assert f"{peak['held_between_steps']:,} B allocated before the trace and in use all through it" in why, why


def _scope(op: str, shape: str):
    """(Category, layer) that a Keras op's name says, read from the name alone: the tape's ops are gradients,
    Adam's its temporaries, the rest of the model's forward pass activations; the layer is the scope under the
    model's (``lenet_1/conv1_1/Relu``: ``lenet/conv1``), or for Adam's, the layer of the one kernel that big."""
    if "/adam/" in op:
        return "optimizer_temporaries", {"[3136,1024]": "lenet/fc1"}.get(shape, "")
    category = "gradients" if "gradient_tape" in op else "activations"
    parts = op.split("/")
    layer = next((f"lenet/{parts[i + 1].rsplit('_', 1)[0]}" for i, p in enumerate(parts) if p == "lenet_1"), "")
    return category, layer


def test_keras_buffers_at_the_peak_are_named_with_their_layer_and_category(served):
    timeline = served.json("/timeline", run="keras", tag="ops")
    buffers = timeline["buffers"]
    assert sum(b["bytes"] for b in buffers) <= timeline["peak_bytes"]
    # Where the peak falls moves with the executor's order, even on one inter-op thread. Of 27 runs alone: 24 in
    # the backward pass with conv1's activation still held (87.7-91.6 MB), 2 once pool1's gradient of it replaced
    # it (77.0 MB), 1 in Adam's update of fc1 with no conv1 buffer left (77.3 MB; a CI run too). In each, fc1's
    # 12.25 MiB kernel is worked on: its gradient from the tape, or Adam's temporaries of it.
    fc1 = [b for b in buffers if b["shape"] == "[3136,1024]"]
    assert fc1, buffers
    # Each of the step's buffers is named by its op: the layer and phase its scope says, unless the op asked
    # for it as scratch space (a temp region): then it is a temporary, whatever the op.
    step_buffers = [b for b in buffers if b["op"] and b["bytes"] >= 1 << 20]
    assert {b["shape"] for b in step_buffers} <= {"[3136,1024]", "[32,28,28,32]", "[32,14,14,64]"}, step_buffers
    for b in step_buffers:
        category, layer = _scope(b["op"], b["shape"])
        if b["region"] in ("temp", "scratch", "dynamic"):
            category = "temporaries"
        assert (b["category"], b["layer"], b["dtype"]) == (category, layer, "float32"), b
        assert b["bytes"] >= np.prod(json.loads(b["shape"])) * 4, b
    layers = {row["layer"]: row for row in layer_rows(served.json("/ops", run="keras", tag="ops"))}
    for b in step_buffers:  # each layer's row holds at least its buffers at the peak
        held = {"activations": "peak_activations_bytes", "gradients": "peak_gradients_bytes"}.get(b["category"])
        if held:
            same = [o for o in step_buffers if (o["layer"], o["category"]) == (b["layer"], b["category"])]
            assert layers[b["layer"]][held] >= sum(np.prod(json.loads(o["shape"])) * 4 for o in same), b


def test_timeline_stacks_add_up_to_the_bytes_in_use(served):
    timeline = served.json("/timeline", run="keras", tag="ops")
    stacks = np.array([timeline["stacks"][c] for c in timeline["stacks"]])
    assert np.allclose(stacks.sum(axis=0), timeline["bytes"])
    at_peak = max(range(len(timeline["bytes"])), key=lambda i: timeline["bytes"][i])
    assert timeline["bytes"][at_peak] == timeline["peak_bytes"]


def test_tf1_run_metadata_of_the_same_model_has_the_same_categories(served):
    body = served.json("/ops", run="tf1", tag="ops")
    peak = body["peak_by_category"]
    # step stats count the step's own allocations; the session's variables come on top
    assert peak["total"] == peak["step_peak_bytes"] + 13_098_536 + 26_197_072 + 8
    assert sum(_parts(peak).values()) == peak["total"]
    assert peak["activations"] > 0 and peak["gradients"] > 0
    buffers = served.json("/timeline", run="tf1", tag="ops")["buffers"]
    (conv1,) = _buffer(buffers, "[32,28,28,32]", "activations")
    assert conv1["op"] == "conv1/Relu" and conv1["layer"] == "conv1"
    fc1 = [b for b in _buffer(buffers, "[3136,1024]", "gradients") if b["op"].startswith("gradients/fc1/")]
    assert fc1 and fc1[0]["layer"] == "fc1"


def test_a_gpu_allocator_gives_the_same_categories(logdir):
    """No GPU here: a recorded BFC profile, its allocator renamed as TensorFlow names a GPU's
    (GPU_0_bfc), reduces to the same split and names that allocator."""
    (path,) = glob.glob(os.path.join(logdir, "raw", "plugins", "profile", "*", "*.xplane.pb"))
    space = xspace.load_xspace(path)
    renamed = 0
    for plane in space.planes:
        for stat in plane.stat_metadata.values():
            if stat.name == "bfc_cpu_allocator_for_gpu":
                stat.name, renamed = "GPU_0_bfc", renamed + 1
    assert renamed  # allocator names are interned strings of the plane (ref_value stats)
    cpu, gpu = xspace.reduce_xspace(xspace.load_xspace(path)), xspace.reduce_xspace(space)
    assert [a["name"] for a in gpu.allocators] == ["GPU_0_bfc"] and gpu.allocations == "all"
    assert gpu.peak_buffers.column("category") == cpu.peak_buffers.column("category")
    assert (gpu.peak_bytes, gpu.timeline.bytes) == (cpu.peak_bytes, cpu.timeline.bytes)


def test_the_raw_profile_in_the_log_dir_is_an_item_with_the_same_split(served):
    tags = served.tags("raw")
    (tag,) = [t for (run, t), info in tags.items() if info["origin"] == "profile"]
    body = served.json("/ops", run="raw", tag=tag)
    peak = body["peak_by_category"]
    assert body["allocations"] == "all" and sum(_parts(peak).values()) == peak["total"] == body["peak_bytes"]
    assert peak["gradients"] > 0 and peak["activations"] > 0
    assert peak["weights"] is None and "breakdown" in peak["unknown"]["weights"]  # plain TF: no breakdown here
