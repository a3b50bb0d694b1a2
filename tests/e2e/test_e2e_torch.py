"""End to end, PyTorch: real runs in a log dir, a real `tensorboard` (both loaders), a real Chromium.

The log dir holds Keras 3 on torch recorded by MemoryCallback (tests/support/keras_backend_run.py, which prints
what Keras and torch say its variables are), a plain PyTorch run that wrote a profiler trace beside
SummaryWriter scalars (tests/support/torch_plain_run.py), the H100 ResNet50 trace of tests/fixtures/torch_h100,
and a memory snapshot and checkpoint of tests/fixtures/torch. Every figure the tab shows is checked
against truth read apart from tb_modelmem: the runs' own printout, the traces' "Total Allocated" read
with json, the fixtures' truth.json.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support.browser import TABLE_FIT, Tab
from tests.support.tensorboard_process import TensorBoardProcess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
H100 = "resnet50_adamw_b32.pt.trace.json.gz"
SNAPSHOT, CHECKPOINT = "cnn_adam_cuda_style.pickle.gz", "cnn_adam.pt"
KERAS, PLAIN, GPU, FILES = "keras_torch/train", "plain/run", "h100/resnet50", "files/torch_run"
TORCH_TRUTH = json.load(open(os.path.join(FIXTURES, "torch", "truth.json")))


def _run(args, **kwargs) -> str:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    return subprocess.run([sys.executable, "-m", *args], check=True, timeout=300, cwd=ROOT, env=env,
                          capture_output=True, text=True, **kwargs).stdout


@pytest.fixture(scope="module")
def torch_logdir(tmp_path_factory):
    """(log dir, the Keras run's truth, the plain run's trace file name); the runs one at a time (~15 s)."""
    pytest.importorskip("torch")
    pytest.importorskip("keras")
    logdir = tmp_path_factory.mktemp("torch_logs")
    done = _run(["tests.support.keras_backend_run", "torch", str(logdir / "keras_torch")])
    truth = json.loads(done.strip().splitlines()[-1])
    assert truth["backend"] == "torch" and not truth["tensorflow_imported"]
    _run(["tests.support.torch_plain_run", str(logdir / "plain")])
    traces = [n for n in os.listdir(logdir / "plain" / "run") if n.endswith(".pt.trace.json")]
    assert len(traces) == 1, traces
    (logdir / "h100" / "resnet50").mkdir(parents=True)
    shutil.copy(os.path.join(FIXTURES, "torch_h100", H100), logdir / "h100" / "resnet50" / H100)
    (logdir / "files" / "torch_run").mkdir(parents=True)
    for name in (SNAPSHOT, CHECKPOINT):
        shutil.copy(os.path.join(FIXTURES, "torch", name), logdir / "files" / "torch_run" / name)
    return str(logdir), truth, traces[0]


@pytest.fixture(scope="module", params=[True, False], ids=["rust-data-server", "python-loader"])
def torch_tb(torch_logdir, request):
    logdir, _, trace = torch_logdir
    with TensorBoardProcess(logdir, load_fast=request.param) as tb:
        tb.wait_for_tab(expect_tags=6, expect={(KERAS, "storage"), (KERAS, "ops"), (PLAIN, "torch/" + trace),
                                               (GPU, "torch/" + H100), (FILES, "torch/" + SNAPSHOT),
                                               (FILES, "torch/" + CHECKPOINT)})
        yield tb


@pytest.fixture
def shots(tmp_path) -> str:
    return str(tmp_path)


def highest_total_allocated(path: str, device_type: int) -> int:
    """The trace's own highest "Total Allocated" over its [memory] events on one device type (0 CPU, 1 CUDA)."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        events = json.load(f)["traceEvents"]
    return max(int(e["args"]["Total Allocated"]) for e in events
               if e.get("name") == "[memory]" and e["args"].get("Device Type") == device_type)


def test_keras_on_torch_storage_and_ops_name_torch_and_its_layers(torch_tb, torch_logdir, browser, shots):
    _, truth, _ = torch_logdir
    tab = Tab(browser, torch_tb, shots, height=1400)
    tab.open("storage", KERAS, "storage")
    tab.text("total-weight", f"{truth['trainable_bytes']:,} B")
    tab.text("total-non_trainable", f"{truth['non_trainable_bytes']:,} B")
    tab.text("total-optimizer_slot", f"{truth['slot_bytes']:,} B")
    # Keras' summary's three counts: BatchNorm's moving statistics are the non-trainable ones
    non_trainable = truth["count_params"] - truth["trainable_count"]
    assert non_trainable > 0
    tab.text("meta", f"{truth['count_params']:,} params ({truth['trainable_count']:,} trainable, {non_trainable:,} "
                     "non-trainable)")
    tab.page.screenshot(path=os.path.join(shots, "keras-torch-storage.png"))
    tab.open("ops", KERAS, "ops")
    tab.text("meta", "torch profiler")
    meta = tab.testid("meta").inner_text()
    assert "op by op (PyTorch)" in meta and "TensorFlow" not in meta and " cpu " in f"{meta} ", meta
    # the peak's state is the run's variables, as Keras counted them (allocated before the profiled steps)
    tab.text("peak-weights", f"{truth['trainable_bytes']:,} B")
    tab.text("peak-optimizer_slots", f"{truth['slot_bytes']:,} B")
    for layer in truth["layers"]:  # "mnist_convnet/conv1": the layer table names the model's own layers
        leaf = layer.split("/")[-1]
        tab.testid("op-layer-table").locator('[role="row"]').filter(has_text=leaf).first.wait_for()
    tab.row("op-layer-table", "conv1").filter(has_text="Conv2D").wait_for()
    tab.row("op-layer-table", "conv1").click()
    assert tab.testid("op-table-filter").input_value() == "layer^=mnist_convnet/conv1"
    tab.row("op-table", "aten::conv2d").locator(".badge.measured").wait_for()
    assert tab.testid("op-table").locator('[role="columnheader"]').filter(has_text="Fused ops").count() == 0
    tab.page.screenshot(path=os.path.join(shots, "keras-torch-ops.png"))
    assert not tab.errors, tab.errors
    tab.close()


def test_a_plain_pytorch_trace_shows_its_peak_and_modules(torch_tb, torch_logdir, browser, shots):
    logdir, _, trace = torch_logdir
    peak = highest_total_allocated(os.path.join(logdir, "plain", "run", trace), device_type=0)
    tab = Tab(browser, torch_tb, shots, height=1400)
    tab.open("ops", PLAIN, "torch/" + trace)
    tab.text("peak-all", f"{peak:,} B")
    # no breakdown beside this trace: its weights are unknown, with the reason, never 0
    tab.text("peak-weights", "unknown")
    assert "no variable breakdown" in tab.testid("peak-weights").inner_text()
    assert "step stats" not in tab.testid("peak-weights").inner_text()
    tab.row("op-layer-table", "Conv2d_0")  # nn.Module names from with_stack=True
    assert "op by op (PyTorch)" in tab.testid("meta").inner_text()
    tab.open("timeline", PLAIN, "torch/" + trace)
    tab.text("timeline-peak", f"{peak:,} B")
    # each buffer's shape from the op that made it (record_shapes=True): conv2's output, by PyTorch's own
    # formula, 28 - 3 + 1 = 26, then 24, on 64 channels of the batch of 32
    tab.text("buffer-table", "[32,64,24,24]")
    assert "records no buffer's shape" not in tab.testid("buffer-count").inner_text()
    heads = tab.testid("buffer-table").locator('[role="columnheader"]').all_inner_texts()
    assert "Shape" in heads and "Op" in heads and "Layer" in heads, heads
    tab.page.screenshot(path=os.path.join(shots, "plain-timeline.png"))
    assert not tab.errors, tab.errors
    tab.close()


def test_the_h100_trace_peak_is_the_gpus_and_its_op_table_fits_1400_px(torch_tb, browser, shots):
    peak = highest_total_allocated(os.path.join(FIXTURES, "torch_h100", H100), device_type=1)
    assert peak == 3_182_946_816  # torch.cuda.max_memory_allocated() in that run (the fixture's README)
    tab = Tab(browser, torch_tb, shots, height=1200)
    tab.view("ops")
    tab.testid("meta").wait_for(timeout=60_000)  # the first item of the view, then the GPU trace
    tab.open("ops", GPU, "torch/" + H100)
    tab.text("peak-all", f"{peak:,} B")
    tab.text("meta", "cpu, cuda:0")
    tab.text("join-fraction", "with_stack=True")
    # what the caching allocator held besides the tensors, from the trace's own "Total Reserved" at the peak
    tab.text("reserved-note", "cuda:0's caching allocator held 3.46 GiB reserved at the peak: 512.51 MiB (14.4%)")
    table = tab.testid("op-table")
    tab.row("op-table", "ConvolutionBackward0").filter(has_text="cuda:0").wait_for()
    fit = table.evaluate(TABLE_FIT)
    assert fit == {"sideways": 0, "heads": [], "cut": [], "shapes_cut": [], "untitled": []}, fit
    heads = table.locator('[role="columnheader"]')
    assert heads.filter(has_text="Total time").get_attribute("aria-sort") == "descending"  # the table's own sort
    assert heads.filter(has_text="Layer").count() == 0  # no op of this trace is on a layer: no empty column
    tab.page.screenshot(path=os.path.join(shots, "h100-ops.png"))
    tab.open("whatif", GPU, "torch/" + H100)
    tab.text("meta", f"{peak:,} B")
    tab.text("whatif-table", "no variable breakdown")  # weights unknown, and why
    tab.text("whatif-caveat", "held 512.51 MiB of them at its peak")  # the cached blocks, in the reserved row
    tab.text("whatif-table", "Reserved (allocator)")  # its requests replayed, and how close that reads
    tab.text("whatif-table", "against the 3.46 GiB the trace reserved")
    assert not tab.errors, tab.errors
    tab.close()


def test_a_snapshot_and_a_checkpoint_read_in_place(torch_tb, browser, shots):
    truth = TORCH_TRUTH
    tab = Tab(browser, torch_tb, shots, height=1400)
    tab.open("ops", FILES, "torch/" + SNAPSHOT)
    tab.text("meta", "torch memory snapshot")
    assert "TensorFlow" not in tab.testid("meta").inner_text()
    tab.text("untimed-note", "A PyTorch memory snapshot records the allocator's actions")
    tab.text("peak-all", f"{truth[SNAPSHOT]['max_memory_allocated']:,} B")
    tab.open("timeline", FILES, "torch/" + SNAPSHOT)
    tab.text("timeline-peak", f"{truth[SNAPSHOT]['max_memory_allocated']:,} B")
    tab.page.screenshot(path=os.path.join(shots, "snapshot-timeline.png"))
    tab.open("storage", FILES, "torch/" + CHECKPOINT)
    tab.text("meta", "pytorch checkpoint")
    tab.text("total-weight", f"{truth[CHECKPOINT]['parameters']:,} B")
    slots = truth[CHECKPOINT]["optimizer_state"]
    tab.text("total-optimizer_slot", f"{slots['exp_avg'] + slots['exp_avg_sq']:,} B")
    tab.text("reconciliation", f"{truth[CHECKPOINT]['file_bytes']:,} B")
    tab.text("reconciliation", "reconciled to the byte")
    tab.page.screenshot(path=os.path.join(shots, "checkpoint-storage.png"))
    assert not tab.errors, tab.errors
    tab.close()


def test_what_if_offers_each_runs_own_choices(torch_tb, torch_logdir, browser, shots):
    """A PyTorch run's What if offers torch.optim's classes and no Keras policy (autocast sets its precision:
    the disabled menu says so); the Keras run beside it, Keras' own optimizers, and no policy either (Keras 3 on
    torch: torch's kernels decide, measured). An optimizer asked of the Keras run that the PyTorch run does not
    offer is dropped from the question as from the menu, not sent to fail."""
    logdir, _, trace = torch_logdir
    tab = Tab(browser, torch_tb, shots, height=1400)

    def offered(testid):  # each option's text, without the bidi isolation every name is shown in
        return [text.strip("\u2068\u2069") for text in tab.testid(testid).locator("option").all_inner_texts()]

    tab.open("whatif", KERAS, "ops")
    tab.text("whatif-traced", "batch")
    assert "Ftrl" in offered("whatif-optimizer")
    assert offered("whatif-policy") == ["as traced (torch's kernels decide)"]
    assert tab.testid("whatif-policy").is_disabled()
    tab.text("whatif-caveat", "torch counts a CPU step's bytes exactly")  # Keras on torch: torch's allocator
    tab.testid("whatif-optimizer").select_option("Ftrl")
    tab.testid("whatif-project").click()
    tab.text("whatif-table", "Ftrl")
    tab.open("whatif", PLAIN, "torch/" + trace)
    tab.text("whatif-traced", "batch 32")
    assert "NAdam" in offered("whatif-optimizer") and "Ftrl" not in offered("whatif-optimizer")
    assert {"AdamW fused", "Adam foreach"} <= set(offered("whatif-optimizer"))  # torch's implementations by name
    assert tab.testid("whatif-optimizer").input_value() == ""  # Ftrl: not torch's, "as traced" here
    asked = [url for url in tab.requests if "/whatif?" in url and "run=plain" in url]
    assert asked and not any("Ftrl" in url for url in asked), asked  # nor asked of it
    assert not tab.testid("error").count()
    assert offered("whatif-policy") == ["as traced (autocast sets it)"] and tab.testid("whatif-policy").is_disabled()
    assert "autocast" in tab.testid("whatif-policy").get_attribute("title")
    tab.testid("whatif-batch").fill("64")
    tab.testid("whatif-project").click()
    status, body = torch_tb.answer("/whatif", run=PLAIN, tag="torch/" + trace, batch="64")
    assert status == 200, body
    answer = json.loads(body)["whatif"]
    tab.text("whatif-headline", "at batch 64")
    tab.text("whatif-caveat", "torch counts a CPU step's bytes exactly")
    tab.row("whatif-table", "Peak in use").filter(has_text=f"{answer['peak_bytes']:,} B").wait_for(timeout=30_000)
    tab.page.screenshot(path=os.path.join(shots, "whatif-torch.png"))
    assert not tab.errors, tab.errors
    tab.close()


def test_a_checkpoint_cut_short_gives_way_to_the_runs_readable_one(browser, tmp_path):
    """A run whose newest checkpoint was cut short (a save killed mid-write), beside a good one and a memory
    snapshot. The Storage view opened on the cut file, listed first as the newest, and showed only its error;
    the Ops view joined the good one and did not say it passed the newest over. Both now say it, and show
    the good checkpoint's bytes, torch's own (the fixture's truth.json)."""
    run = tmp_path / "logs" / "cnn"
    run.mkdir(parents=True)
    for name in (SNAPSHOT, CHECKPOINT):
        shutil.copy(os.path.join(FIXTURES, "torch", name), run / name)
    cut = run / "z_cut.pt"
    cut.write_bytes(b"PK\x03\x04 cut short")
    later = os.path.getmtime(run / CHECKPOINT) + 60
    os.utime(cut, (later, later))
    with TensorBoardProcess(str(tmp_path / "logs"), load_fast=False) as tb:
        tb.wait_for_tab(expect_tags=3, expect={("cnn", "torch/z_cut.pt"), ("cnn", "torch/" + CHECKPOINT)})
        tab = Tab(browser, tb, str(tmp_path), height=1200)
        tab.shown("cnn", "torch/" + CHECKPOINT)
        tab.text("passed-over-items", "torch/z_cut.pt was not readable at")
        tab.text("total-weight", f"{TORCH_TRUTH[CHECKPOINT]['parameters']:,} B")
        tab.page.screenshot(path=os.path.join(str(tmp_path), "storage-passed-over.png"))
        tab.open("ops", "cnn", "torch/" + SNAPSHOT)
        tab.text("passed-over-note", "Passed over, not readable: cnn/torch/z_cut.pt")
        tab.text("passed-over-note", f"The ops are joined with torch/{CHECKPOINT} instead.")
        tab.view("whatif")
        tab.text("passed-over-note", f"The ops are joined with torch/{CHECKPOINT} instead.")
        # the one console error: the cut file's 422, asked for the user before it was passed over
        assert len(tab.errors) == 1 and "422" in tab.errors[0], tab.errors
        tab.close()
