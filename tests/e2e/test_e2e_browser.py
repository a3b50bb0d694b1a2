"""End to end: real TensorFlow runs in a log dir, a real `tensorboard` process (both loaders), a real Chromium.

Chromium is Debian's (/usr/bin/chromium) driven by Playwright; TensorBoard loads our ES
module in an iframe under its CSP, so anything inline or from a CDN would fail here.
Headless Chromium may not lay out the plugin's iframe until a frame is painted: each page
takes a screenshot before reading the frame.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import urllib.parse

import pytest

from tests.support import gpu_h100, xplane_truth
from tests.support.basis_arithmetic import basis_arithmetic
from tests.support.browser import API, TABLE_FIT, WAIT, Tab
from tests.support.tensorboard_process import TensorBoardProcess

playwright = pytest.importorskip("playwright.sync_api")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RLO = "\u202e"


@pytest.fixture(scope="module")
def demo_logdir(tmp_path_factory) -> str:
    """The demo log dir, made here (~2 min); TB_MODELMEM_E2E_DEMO names one demo/make_logdir.py already
    wrote (--loadbench none), to rerun a browser test while working on it."""
    if os.environ.get("TB_MODELMEM_E2E_DEMO"):
        return os.environ["TB_MODELMEM_E2E_DEMO"]
    logdir = str(tmp_path_factory.mktemp("demo_logs"))
    subprocess.run([sys.executable, os.path.join(ROOT, "demo", "make_logdir.py"), "--logdir", logdir,
                    "--loadbench", "none"], check=True, timeout=900,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    return logdir


# What the tests below open in the demo log dir, as (run, tag or kind): waited for, because a
# loader's first pass over the log dir lists it run by run.
DEMO_ITEMS = {("tf1_convnet_adam", "storage"), ("tf1_convnet_adam", "checkpoint"), ("tf1_convnet_adam", "step_1"),
              ("convnet_adam/train", "storage"), ("lenet_trace", "ops")}


@pytest.fixture(scope="module", params=[True, False], ids=["rust-data-server", "python-loader"])
def demo_tb(demo_logdir, request):
    """One TensorBoard per loader on the demo log dir, shared by the tests that read it."""
    with TensorBoardProcess(demo_logdir, load_fast=request.param) as tb:
        tb.wait_for_tab(expect_tags=8, expect=DEMO_ITEMS)
        yield tb


@pytest.fixture
def shots(tmp_path) -> str:
    return str(tmp_path)


def test_storage_view_shows_the_seed_convnet_to_the_byte(demo_tb, browser, shots):
    tab = Tab(browser, demo_tb, shots)
    tab.pick("run-select", "tf1_convnet_adam", exact=True)
    tab.pick("tag-select", "storage", exact=True)
    tab.text("total-weight", "13,098,536")
    tab.text("total-optimizer_slot", "26,197,072")
    tab.text("total-all", "37.48 MiB")
    tab.pick("run-select", "convnet_adam/train", exact=True)
    tab.shown("convnet_adam/train", "storage")  # tf1_convnet_adam's figures read the same until then
    tab.text("total-optimizer_slot", "26,197,072")
    layers = tab.testid("layer-table")
    for derivation in ("(5*5*1+1)*32 = 832", "(5*5*32+1)*64 = 51,264", "(3136+1)*1024 = 3,212,288",
                       "(1024+1)*10 = 10,250"):
        layers.get_by_text(derivation, exact=False).first.wait_for(timeout=WAIT)
    # The model is a composite row over its layers: collapsing it hides them.
    model = tab.row("layer-table", "composite")
    model.get_by_role("button", name="Collapse").click()
    layers.get_by_text("(5*5*1+1)*32 = 832").wait_for(state="detached")
    model.get_by_role("button", name="Expand").click()
    # A layer lists its variables (slots included) through the server's filter.
    tab.row("layer-table", "(3136+1)*1024").click()
    assert tab.testid("variable-table-filter").input_value() == "layer^=lenet/fc1"
    tab.text("variable-table-count", "6 of 26 rows")
    tab.row("variable-table", "lenet/fc1/kernel").filter(has_text="12,845,056").wait_for()
    tab.row("variable-table", "velocity")
    assert any("variables?" in u and "filter=layer%5E%3Dlenet%2Ffc1" in u for u in tab.requests), tab.requests
    tab.page.screenshot(path=os.path.join(shots, "storage.png"), full_page=True)
    tab.close()


def test_ops_view_of_a_plain_tf1_log_dir(demo_tb, browser, shots):
    """tf1_convnet_adam/step_1 was written by FileWriter.add_run_metadata alone: its ops, joined with the
    run's breakdowns, and the peak by category (the step's own peak plus the breakdown's weights and slots)."""
    tab = Tab(browser, demo_tb, shots)
    tab.open("ops", "tf1_convnet_adam", "step_1")
    tab.text("peak-weights", "13,098,536")
    tab.text("peak-all", "step's own peak")
    tab.text("join-fraction", "of op time on the model's layers")
    for category in ("non_trainable", "optimizer_slots", "other_state", "gradients", "activations",
                     "optimizer_temporaries", "inputs", "temporaries", "unattributed"):
        tab.testid(f"peak-{category}").wait_for()
    # Two breakdowns in the run (the checkpoint and the live one): the user picks the join.
    joins = tab.testid("breakdown-select")
    assert joins.is_visible()
    tab.pick("breakdown-select", "storage", exact=True)
    tab.text("peak-weights", "13,098,536")
    # Clicking a layer filters the op table by it, on the server.
    tab.row("op-layer-table", "conv1").click()
    assert tab.testid("op-table-filter").input_value() == "layer^=conv1"
    relu = tab.row("op-table", "conv1/Relu")
    relu.filter(has_text="[1,28,28,32]").filter(has_text="100,352").wait_for()
    relu.locator(".badge.measured").wait_for()
    assert any("op_rows?" in u and "filter=layer%5E%3Dconv1" in u for u in tab.requests), tab.requests
    tab.page.screenshot(path=os.path.join(shots, "ops-tf1.png"), full_page=True)
    tab.close()


def _ops_tag(tb: TensorBoardProcess, run: str) -> str:
    (tags,) = [r["tags"] for r in tb.get(f"{API}/runs")["runs"] if r["run"] == run]
    return next(t["tag"] for t in tags if t["kind"] == "ops" and not t["error"])


def test_ops_view_of_a_tf2_profile_says_what_it_missed(demo_tb, browser, shots):
    """lenet_trace: a TF2 profile on CPU; without the BFC allocator it records only large allocations."""
    tag = _ops_tag(demo_tb, "lenet_trace")
    body = demo_tb.get(f"{API}/ops?run=lenet_trace&tag={urllib.parse.quote(tag)}")
    tab = Tab(browser, demo_tb, shots)
    tab.open("ops", "lenet_trace", tag)
    if body["allocations"] != "all":  # issue 39: what to do first, then why
        tab.text("allocations-note", "TF_CPU_ALLOCATOR_USE_BFC")
        assert tab.testid("allocations-note").inner_text().lstrip("⚠ \n").startswith(
            "To see this peak split to the byte, call tb_modelmem.enable_full_memory_trace() first thing")
    # issue 39: the two durations named, the op time summed over threads and the wall time the Timeline spans
    timeline = demo_tb.get(f"{API}/timeline?run=lenet_trace&tag={urllib.parse.quote(tag)}")
    total, span = body["total_time_us"], timeline["t_us"][-1]
    assert total > span > 0  # ops ran on several threads at once
    tab.text("ops-durations", f"{total / 1000:.2f} ms of op time, summed over ops on all threads · the Timeline spans "
             f"{span / 1000:.2f} ms of wall time (op time {total / span:.2f}x it: ops ran side by side)")
    tab.text("peak-weights", "13,098,536")
    tab.text("peak-all", f"{body['peak_by_category']['total']:,}")
    fc1 = tab.row("op-layer-table", "fc1")
    fc1.filter(has_text="12,849,152").wait_for()  # its weights, next to its time and activations
    tab.text("op-table-count", f"{body['op_count']:,} rows")
    tab.close()


def test_timeline_stacks_the_peak_by_category_and_lists_its_buffers(demo_tb, browser, shots):
    tag = _ops_tag(demo_tb, "lenet_trace")
    timeline = demo_tb.get(f"{API}/timeline?run=lenet_trace&tag={urllib.parse.quote(tag)}")
    tab = Tab(browser, demo_tb, shots)
    tab.open("timeline", "lenet_trace", tag)
    tab.text("timeline-peak", f"{timeline['peak_bytes']:,} B")
    legend = tab.testid("timeline-legend")
    legend.get_by_text("Weights").wait_for()
    assert legend.locator(".chip").first.inner_text() == "Weights"  # resident memory at the bottom of the stack
    assert tab.frame.locator(".chart svg path").count() > 3
    for buffer in timeline["buffers"][:3]:
        tab.row("buffer-table", buffer["op"])
    # a gradient, else an activation: which of the step's buffers are live at the peak varies with the
    # executor's order (fc1's gradient may already be consumed by Adam)
    step_buffer = min((b for b in timeline["buffers"] if b["category"] in ("gradients", "activations")),
                      key=lambda b: b["category"] != "gradients")
    tab.filter("buffer-table", f"category:{step_buffer['category']}")
    tab.row("buffer-table", step_buffer["op"]).filter(has_text=step_buffer["shape"]).wait_for()
    tab.page.screenshot(path=os.path.join(shots, "timeline.png"), full_page=True)
    tab.close()


def test_bad_items_show_a_message_and_names_stay_text(tmp_path, browser, shots):
    from tb_modelmem import summary
    from tests.support.bad_input import XSS, good_breakdown, raw_summary
    from tests.support.plugin_harness import write_events

    write_events(os.path.join(str(tmp_path), "run"), [(1, summary.pb("storage", good_breakdown())),
                                                      (1, raw_summary("garbage", [b"\x00not zlib"]))])
    with TensorBoardProcess(str(tmp_path), load_fast=False) as tb:
        tb.wait_for_tab(expect_tags=2)
        tab = Tab(browser, tb, shots)
        dialogs = []
        tab.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        tab.pick("tag-select", "garbage", exact=True)
        tab.text("error", "corrupt or foreign", timeout=30_000)
        tab.pick("tag-select", "storage", exact=True)
        tab.text("total-weight", "48 B", timeout=30_000)
        tab.row("variable-table", f"{XSS}/kernel")
        assert tab.frame.locator("img").count() == 0 and not dialogs
        tab.close()


def test_hostile_names_are_isolated_and_contained(tmp_path, browser, shots):
    """An RLO in a run name reverses nothing around it; 10,000-character names and optimizer-config
    keys stay inside their panels (issue 12)."""
    from tb_modelmem import summary
    from tb_modelmem.schema.names import WEIGHT
    from tb_modelmem.schema.records import Breakdown, VariableRecord
    from tests.support.bad_input import good_breakdown, raw_summary
    from tests.support.plugin_harness import write_events

    long_name = "n" * 10_000
    long_tag = "t" * 10_000
    breakdown = Breakdown(source="test", model_name=long_name,
                          optimizer={"class_name": "Adam", "config": {"k" * 10_000: 1}},
                          variables=[VariableRecord(name=f"{long_name}/kernel", layer=long_name, shape=[3, 4],
                                                    dtype="float32", bytes=48, role=WEIGHT)])
    evil = f"evil{RLO}run"
    write_events(os.path.join(str(tmp_path), evil), [
        (1, summary.pb("storage", good_breakdown())),
        (1, raw_summary("future", [b"x"], content=b'{"version": 99, "kind": "breakdown"}'))])
    write_events(os.path.join(str(tmp_path), "long"), [(1, summary.pb(long_tag, breakdown))])
    with TensorBoardProcess(str(tmp_path), load_fast=True) as tb:
        tb.wait_for_tab(expect_tags=2)
        tab = Tab(browser, tb, shots)
        # The unreadable tag's box: "evil<RLO>run / future: written by a newer ...", the message left to right
        # after the name: without isolation the override would carry on past the name and reverse it.
        box = tab.testid("problems").locator('[data-testid="error"]').filter(has_text="newer")
        box.wait_for(timeout=WAIT)
        what, message = box.locator(".what").bounding_box(), box.locator(".text").bounding_box()
        assert message["x"] >= what["x"] + what["width"] - 1, (what, message)
        assert box.locator(".what bdi").first.inner_text() == evil
        tab.pick("run-select", "long", exact=True)
        tab.text("total-weight", "48 B")
        tab.row("variable-table", "/kernel")
        tab.testid("optimizer-config").wait_for()
        frame_width = tab.frame.locator("body").evaluate("b => [b.scrollWidth, window.innerWidth]")
        assert frame_width[0] <= frame_width[1], frame_width  # nothing pushes the page sideways
        for selector in (".panel", ".card", ".toolbar", ".kv div"):
            overflowing = tab.frame.locator(selector).evaluate_all(
                "els => els.filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).length")
            assert overflowing == 0, selector
        title = tab.testid("tag-select").locator("option").first.get_attribute("title")
        assert long_tag in title  # the picker shows a cut label; the full name is its tooltip
        tab.page.screenshot(path=os.path.join(shots, "hostile.png"))
        tab.close()


@pytest.fixture(scope="module")
def growth_logdir(tmp_path_factory, growth_loop):
    """The seed-004 loops of demo/growth_loops.py (run once per session, tests/conftest.py ``growth_loop``, as
    tests/integration/test_growth.py reads them): models kept in a list (keep/builds) and freed with
    clear_session (clear/builds), copied side by side into one log dir. Returns it and each loop's
    TRUTH.json (gc counts and the model's own variables, taken without tb_modelmem)."""
    logdir, truth = str(tmp_path_factory.mktemp("growth") / "logs"), {}
    for mode in ("keep", "clear"):
        made, truth[mode] = growth_loop(mode)
        shutil.copytree(made, os.path.join(logdir, mode))
    return logdir, truth


@pytest.fixture(scope="module", params=[True, False], ids=["rust-data-server", "python-loader"])
def growth_tb(growth_logdir, request):
    with TensorBoardProcess(growth_logdir[0], load_fast=request.param) as tb:
        tb.wait_for_tab(expect_tags=2)
        yield tb


def _per_build(values):
    """The growth per build the loop measured itself: the median of its build-to-build increments."""
    return statistics.median(b - a for a, b in zip(values, values[1:]))


def _human(n: float) -> str:
    """Bytes as the tab writes them (binary units, two decimals)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:g} B" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    raise AssertionError


def test_growth_view_flags_what_models_kept_in_a_list_leave_alive(growth_tb, growth_logdir, browser, shots):
    """Issue 9 in the browser: 8 builds of a small CNN kept in a list. The tab flags live variables
    with the growth per build the loop counted itself (gc), names every surviving model; after
    clear_session the variables no longer grow (the loop counted 0 alive) and their chart is not marked."""
    keep, clear = growth_logdir[1]["keep"], growth_logdir[1]["clear"]
    variables = _per_build(keep["variables"])
    assert variables == keep["model_variables"] == 22  # the loop's own count agrees with its model
    tab = Tab(browser, growth_tb, shots)
    tab.view("growth")
    tab.pick("run-select", "keep/builds", exact=True)
    tab.text("growth-flag-live_variables", f"+{variables} live variables per build")
    # its bytes: the model's variables, Adam's slots and counters, the loss tracker's (the loop summed them)
    tab.text("growth-flag-live_variable_bytes", f"+{_human(keep['model_bytes'])} live variable bytes per build")
    if len(set(b - a for a, b in zip(keep["operations"], keep["operations"][1:]))) == 1:  # every build the same
        tab.text("growth-flag-graph_ops", f"+{_per_build(keep['operations']):,} graph ops per build")
    chart = tab.testid("growth-chart-live_variables")
    assert chart.get_attribute("data-flagged") == "true" and chart.locator(".growth-badge").is_visible()
    assert chart.locator("svg path").count() > 0
    tab.text("growth-summary", "Keeps growing")
    models = tab.testid("growth-models")
    assert keep["kept_models"]
    for model in keep["kept_models"]:  # every surviving model is named, as text
        tab.filter("growth-models", model)
        models.locator('[role="rowheader"]').filter(has_text=re.compile(rf"^{re.escape(model)}$")).first.wait_for(timeout=WAIT)
    tab.filter("growth-models", "")
    tab.text("growth-models-count", f"{len(keep['kept_models'])} rows")
    for table in ("growth-owners", "growth-functions", "growth-types"):
        assert tab.testid(table).is_visible(), table
    tab.page.screenshot(path=os.path.join(shots, "growth-keep.png"), full_page=True)
    models.scroll_into_view_if_needed()
    tab.page.screenshot(path=os.path.join(shots, "growth-keep-explained.png"))

    # clear_session: the loop found no variable alive after any build; the traced graphs still pile up.
    assert clear["variables"] == [0] * len(clear["variables"])
    assert all(b > a for a, b in zip(clear["operations"], clear["operations"][1:]))
    tab.pick("run-select", "clear/builds", exact=True)
    tab.shown("clear/builds")
    tab.testid("growth-flag-graph_ops").wait_for(timeout=WAIT)
    chart = tab.testid("growth-chart-live_variables")
    chart.wait_for(timeout=WAIT)
    assert tab.testid("growth-flag-live_variables").count() == 0
    assert chart.get_attribute("data-flagged") == "false" and not chart.locator(".growth-badge").is_visible()
    assert "flat after warm-up" in chart.inner_text()
    assert clear["kept_models"] == [] and not tab.testid("growth-models").is_visible()  # no model survives to name
    tab.page.screenshot(path=os.path.join(shots, "growth-clear.png"), full_page=True)
    assert not tab.errors, tab.errors
    tab.close()


def _first(responses, route: str):
    return next(r for r in responses if f"{API}/{route}?" in r.url)


def test_a_20000_op_trace_is_paged_by_the_server(tmp_path, browser, shots):
    from tb_modelmem import summary
    from tb_modelmem.readers.run_metadata import reduce_run_metadata
    from tests.support.plugin_harness import write_events
    from tests.support.trace_fixtures import synthetic_run_metadata

    trace = reduce_run_metadata(synthetic_run_metadata(20_000))
    last = trace.ops[-1].name
    write_events(os.path.join(str(tmp_path), "big"), [(1, summary.pb("ops", trace))])
    with TensorBoardProcess(str(tmp_path), load_fast=True) as tb:
        tb.wait_for_tab()
        tab = Tab(browser, tb, shots)
        tab.view("ops")
        table = tab.testid("op-table")
        tab.text("op-table-count", "20,000 rows")
        assert 0 < table.locator(".table-row").count() < 200  # virtualised: the DOM holds the rows in view
        first = _first(tab.responses, "ops")
        size = len(first.body())
        assert size < 1_000_000, size  # the first screen, not the whole table
        print(f"first /ops answer of a 20,000-op trace: {size:,} bytes")
        tab.filter("op-table", last)
        tab.row("op-table", last)
        tab.text("op-table-count", "of 20,000 rows")
        query = urllib.parse.quote(last, safe="")
        assert any("op_rows?" in u and f"filter={query}" in u for u in tab.requests), tab.requests[-3:]
        # Scrolling deep fetches the page in view, and only pages.
        tab.filter("op-table", "")
        tab.text("op-table-count", re.compile(r"^20,000 rows$"))
        # The rows above stay painted until the scroll event is handled: wait for the deep page itself.
        with tab.page.expect_request(lambda r: "op_rows?" in r.url and "offset=14" in r.url, timeout=WAIT):
            table.locator(".table-scroll").evaluate("s => { s.scrollTop = 26 * 15000; }")
        playwright.expect(table.locator(".table-row.pending")).to_have_count(0, timeout=WAIT)  # and it is painted
        table.locator(".table-row:not(.pending)").first.wait_for()
        assert not any("limit=20000" in u for u in tab.requests)
        assert not tab.errors, tab.errors
        tab.close()


def test_a_profile_still_reducing_shows_progress_then_renders_every_host(tmp_path, browser, shots):
    """Two ~4 MiB profiles of one session (a worker each): the server reduces them off the request
    thread and answers 202 meanwhile; the tab shows the progress, asks again, then renders, and
    lists both hosts side by side."""
    from tb_modelmem import summary
    from tests.support.bad_input import good_breakdown
    from tests.support.plugin_harness import write_events

    session = os.path.join(str(tmp_path), "workers", "plugins", "profile", "2026_01_01_00_00_00")
    os.makedirs(session)
    for host, scale in (("worker_a", 1.0), ("worker_b", 2.0)):
        with open(os.path.join(session, f"{host}.xplane.pb"), "wb") as f:
            f.write(_synthetic_profile(25_000, scale))
    write_events(os.path.join(str(tmp_path), "workers"), [(1, summary.pb("storage", good_breakdown()))])
    with TensorBoardProcess(str(tmp_path), load_fast=True) as tb:
        tb.wait_for_tab(expect_tags=2)
        tab = Tab(browser, tb, shots)
        tab.view("ops")
        tab.pick("tag-select", "profile/2026_01_01_00_00_00", exact=True)
        tab.text("progress", "Reducing…", timeout=30_000)
        tab.text("op-table-count", "25,000 rows", timeout=120_000)
        statuses = [r.status for r in tab.responses if f"{API}/ops?" in r.url]
        assert statuses[0] == 202 and statuses[-1] == 200, statuses
        assert max(tab.most_in_flight.values()) == 1  # one request per item: asked again only after each answer
        hosts = tab.testid("host-table")
        tab.row("host-table", "worker_b", timeout=120_000)
        assert tab.testid("host-select").is_visible()
        hosts.locator('[role="row"]').filter(has_text="worker_a").first.wait_for(timeout=120_000)
        tab.row("host-table", "worker_a").click()
        assert tab.testid("host-select").input_value() == "worker_a"
        assert not tab.errors, tab.errors
        tab.close()


def _synthetic_profile(n_ops: int, scale: float) -> bytes:
    """An XSpace of `n_ops` timed ops on the host CPU, each allocating its output (BFC allocator
    events as TensorFlow writes them: the count in use after each event, the size, the address)
    and freeing it a few ops later."""
    from tb_modelmem import proto

    space = proto.XSpace()
    plane = space.planes.add(name="/host:CPU")
    plane.event_metadata[1].name = "MemoryAllocation"
    plane.event_metadata[2].name = "MemoryDeallocation"
    stats = ("bytes_allocated", "allocation_bytes", "requested_bytes", "addr", "tf_op", "allocator_name", "region_type",
             "shape")
    stat = {name: i for i, name in enumerate(stats, 1)}
    for name, i in stat.items():
        plane.stat_metadata[i].name = name
    compute = plane.lines.add(name="tf_Compute/1", timestamp_ns=1000)
    memory = []  # (time_ps, is_alloc, op, size, addr)
    for i in range(n_ops):
        name = f"model/block_{i // 500}/dense_{i % 500}/MatMul_{i}"
        meta = plane.event_metadata[10 + i]
        meta.id, meta.name, meta.display_name = 10 + i, f"{name}:MatMul", "MatMul"
        compute.events.add(metadata_id=10 + i, offset_ps=i * 2_000_000, duration_ps=1_000_000 + (i * 7919) % 3_000_000)
        size = int((1024 + (i * 131) % 65536) * scale) // 4 * 4
        memory.append((i * 2_000_000 + 500_000, True, name, size, i + 1))
        memory.append((i * 2_000_000 + 1_500_000 + (i % 7) * 4_000_000, False, name, size, i + 1))
    line = plane.lines.add(name="memory", timestamp_ns=1000)
    in_use = 0
    for time_ps, is_alloc, name, size, addr in sorted(memory):
        in_use += size if is_alloc else -size
        event = line.events.add(metadata_id=1 if is_alloc else 2, offset_ps=time_ps)
        for key, value in (("bytes_allocated", in_use), ("allocation_bytes", size), ("requested_bytes", size),
                           ("addr", addr)):
            event.stats.add(metadata_id=stat[key], int64_value=value)
        event.stats.add(metadata_id=stat["allocator_name"], str_value="cpu_bfc")
        if is_alloc:
            event.stats.add(metadata_id=stat["tf_op"], str_value=f"{name}:MatMul")
            event.stats.add(metadata_id=stat["region_type"], str_value="output")
            event.stats.add(metadata_id=stat["shape"], str_value=f"[1,{size // 4}]")
    return space.SerializeToString()


# --- What users see (issues 30, 31, 27): one log dir of real runs, read at 1400 x 1200 -----------------------

MIRRORED_SCRIPT = r"""
import os, sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import tb_modelmem
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():  # keras-io's MNIST convnet, one conv block: a [5408,64] kernel
    model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(32, 3, activation="relu", name="conv"),
                              keras.layers.MaxPooling2D(name="pool"), keras.layers.Flatten(name="flatten"),
                              keras.layers.Dense(64, activation="relu", name="fc1"),
                              keras.layers.Dense(10, name="logits")],
                             name="mnist_mirrored")
    model.compile(keras.optimizers.Adam(), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(np.zeros((8, 28, 28, 1), "float32"), np.zeros((8,), "int64"), batch_size=4, epochs=1, verbose=0,
          callbacks=[tb_modelmem.MemoryCallback(sys.argv[1], memory_every=0)])
"""
PROFILER_TAKEN_SCRIPT = r"""
import sys
import time
import keras, numpy as np
import tb_modelmem
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, name="hidden"),
                          keras.layers.Dense(3, name="logits")])
model.compile(keras.optimizers.Adam(), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(np.zeros((6, 8), "float32"), np.zeros((6,), "int64"), batch_size=2, epochs=2, verbose=0,
          callbacks=[keras.callbacks.TensorBoard(sys.argv[1], profile_batch=2),
                     tb_modelmem.MemoryCallback(sys.argv[1], profile_steps=2, memory_every=0)])
"""


def _run_script(script: str, logdir: str) -> None:
    done = subprocess.run([sys.executable, "-c", script, logdir], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def seen_logdir(tmp_path_factory) -> str:
    """Real runs for what users see: MirroredStrategy over two logical CPUs, a fit whose profiler the TensorBoard
    callback took, the load benchmark of MobileNetV2 (frontend/test/fixtures, measured by tb-modelmem loadbench),
    and the H100 profiles of Keras on JAX (XLA) in tests/fixtures/gpu_h100."""
    from tb_modelmem import summary
    from tb_modelmem.schema.records import LoadBench, LoadResult
    from tests.support.plugin_harness import write_events

    logdir = str(tmp_path_factory.mktemp("seen"))
    _run_script(MIRRORED_SCRIPT, os.path.join(logdir, "mirrored"))
    _run_script(PROFILER_TAKEN_SCRIPT, os.path.join(logdir, "profiler_taken"))
    with open(os.path.join(ROOT, "frontend", "test", "fixtures", "loadbench-mobilenet.json")) as f:
        bench = json.load(f)
    fields = ("format", "mode", "file_bytes", "load_seconds", "peak_rss_bytes", "repeats", "error")
    record = LoadBench(bench["model_name"], [LoadResult(**{k: r[k] for k in fields}) for r in bench["results"]])
    write_events(os.path.join(logdir, "loadbench"), [(0, summary.pb("loadbench", record))])
    for run in ("keras_jax_lenet", "keras_jax_transformer"):
        gpu_h100.write_run(logdir, run)
    gpu_h100.write_run(logdir, "keras_jax_transformer", name="no_node_ids",
                       data=xplane_truth.without_graph_node_ids(gpu_h100.profile_bytes("keras_jax_transformer")))
    return logdir


@pytest.fixture(scope="module")
def seen_tb(seen_logdir):
    with TensorBoardProcess(seen_logdir, load_fast=True) as tb:
        tb.wait_for_tab(expect_tags=5, expect={("mirrored/train", "storage"), ("profiler_taken/train", "ops"),
                                               ("loadbench", "loadbench")})
        yield tb


# In the frame: the texts of a chart's SVG (axis labels, bar labels), without the marks that isolate a name.
SVG_TEXTS = "box => [...box.querySelectorAll('svg text')].map(t => t.textContent.replace(/[\\u2066-\\u2069]/g, ''))"


def test_the_op_table_fits_1400_px_and_bars_name_their_layer(demo_tb, browser, shots):
    """Issue 30 item 6: at 1400 px the op table overflowed (Output cells cut, the last column clipped) and
    the top-12 charts cut op names from the left ("...PartitionedCall/adam/Sub_19"), losing the layer."""
    tag = _ops_tag(demo_tb, "lenet_trace")
    body = demo_tb.get(f"{API}/ops?run=lenet_trace&tag={urllib.parse.quote(tag)}")
    tab = Tab(browser, demo_tb, shots, height=1200)
    for run, tag_ in (("tf1_convnet_adam", "step_1"), ("lenet_trace", tag)):
        tab.open("ops", run, tag_)
        table = tab.testid("op-table")
        tab.row("op-table", "float32")
        fit = table.evaluate(TABLE_FIT)
        assert fit == {"sideways": 0, "heads": [], "cut": [], "shapes_cut": [], "untitled": []}, (run, fit)
        if run == "tf1_convnet_adam":  # every part of its peak known: eleven cards (other_state among them), two rows
            tab.text("peak-other_state", "of peak")
            cards = tab.testid("peak-by-category").locator(".card")
            assert cards.count() == 11
            tops = {round(b["y"]) for b in cards.evaluate_all("cs => cs.map(c => c.getBoundingClientRect().toJSON())")}
            assert len(tops) == 2, tops
            assert cards.evaluate_all("cs => cs.filter(c => [...c.querySelectorAll('.value, .exact')]"
                                      ".some(e => e.scrollWidth > e.clientWidth)).length") == 0
    # Every bar of the top-12 by time names its op's layer first, then the op under it.
    chart = tab.frame.locator('[role="listbox"]').first
    texts = chart.evaluate(SVG_TEXTS)
    for op in body["top_time"]:
        leaf = op["layer"].split("/")[-1]
        label = next((t for t in texts if t.startswith(f"{leaf} · ")), None)
        assert label is not None, (op, texts)
        assert not label.startswith("…")
    assert any(re.fullmatch(r"fc1 · adam_1/\w+_\d+", t) for t in texts), texts  # the kind of op, readable
    tab.page.screenshot(path=os.path.join(shots, "ops-1400.png"))
    assert not tab.errors, tab.errors
    tab.close()


def test_load_bars_sit_on_their_labels_and_the_baseline_label_is_clear(seen_tb, browser, shots):
    """Issue 30 item 6: the Load view's grouped bars sat off their format labels, and the "baseline" label
    overlapped the bars."""
    tab = Tab(browser, seen_tb, shots, height=1200)
    tab.view("load")
    tab.row("load-table", "tflite")
    page = seen_tb.get(f"{API}/loadbench?run=loadbench&tag=loadbench")
    loads = [r for r in page["results"] if r["format"] != "baseline"]
    for chart in tab.frame.locator('.load-charts [role="img"]').all():
        geometry = chart.evaluate("""box => {
          const rect = (e) => e.getBoundingClientRect().toJSON();
          const texts = [...box.querySelectorAll('svg text')]
            .map(t => ({text: t.textContent.replace(/[\\u2066-\\u2069]/g, ''), ...rect(t)}));
          const bars = [...box.querySelectorAll('svg path')].map(rect)
            .filter(r => r.height > 4 && r.height < 30 && r.width > 2);
          return {texts, bars};
        }""")
        labels = {t["text"]: t for t in geometry["texts"]}
        for load in loads:
            label = labels[f"{load['format']} · {load['mode']}"]
            middle = label["y"] + label["height"] / 2
            # one bar on its label's line
            assert sum(abs(b["y"] + b["height"] / 2 - middle) < 3 for b in geometry["bars"]) == 1, (load, label)
        for baseline in (t for t in geometry["texts"] if t["text"].startswith("baseline")):
            overlaps = [b for b in geometry["bars"]
                        if b["x"] < baseline["x"] + baseline["width"] and baseline["x"] < b["x"] + b["width"]
                        and b["y"] < baseline["y"] + baseline["height"] and baseline["y"] < b["y"] + b["height"]]
            assert not overlaps, (baseline, overlaps)
    rss = tab.frame.locator('.load-charts [role="img"]').nth(2)
    playwright.expect(rss).to_have_accessible_name(re.compile(
        r"^Peak RSS per load\. keras · compile=True 728\.88 MiB; .*"
        r"baseline \(import tensorflow, keras\) 584\.29 MiB\.$"))
    tab.page.screenshot(path=os.path.join(shots, "load.png"))
    assert not tab.errors, tab.errors
    tab.close()


def _focused(tab):
    return tab.frame.locator(":focus")


def test_every_action_is_reachable_by_keyboard(demo_tb, browser, shots):
    """Issue 30 item 7: a row that lists its ops or variables, and a bar that finds its op, took no keyboard
    focus and no key."""
    body = demo_tb.get(f"{API}/ops?run=tf1_convnet_adam&tag=step_1")
    tab = Tab(browser, demo_tb, shots, height=1200)
    tab.open("ops", "tf1_convnet_adam", "step_1")
    tab.text("peak-weights", "13,098,536")
    # From the last picker, Tab reaches the chart of the top ops by time; the arrow keys pick a bar, Enter finds its op.
    tab.pick("breakdown-select", "storage", exact=True)
    tab.shown("tf1_convnet_adam", "step_1")  # the item joined with the other breakdown, drawn
    chart = tab.frame.locator('[role="listbox"]').first
    tab.testid("breakdown-select").focus()
    tab.page.keyboard.press("Tab")
    playwright.expect(chart).to_be_focused()
    playwright.expect(chart).to_have_accessible_name(
        re.compile(rf"^Top 12 ops by time of {body['op_count']}: use the arrow keys"))
    tab.page.keyboard.press("ArrowDown")
    second = body["top_time"][1]
    option = chart.locator(f'[id="{chart.get_attribute("aria-activedescendant")}"]')
    playwright.expect(option).to_have_text(re.compile(rf"^2 of 12: .*\(op {re.escape(second['name'])}\)$"))
    tab.page.keyboard.press("Enter")
    playwright.expect(tab.testid("op-table-filter")).to_have_value(f"name={second['name']}")
    tab.row("op-table", second["name"])
    # Tab goes on to the layer tree's rows (one stop); the arrows move, Enter lists the layer's ops.
    tab.testid("op-layer-table-filter").focus()
    for _ in range(40):
        tab.page.keyboard.press("Tab")
        if _focused(tab).evaluate("e => e.classList.contains('table-row')"):
            break
    row = _focused(tab)
    assert row.evaluate("e => e.closest('[data-testid]').dataset.testid") == "op-layer-table"
    while "conv2" not in row.inner_text():
        tab.page.keyboard.press("ArrowDown")
        row = _focused(tab)
    tab.page.keyboard.press("Enter")
    playwright.expect(tab.testid("op-table-filter")).to_have_value("layer^=conv2")
    # The Storage tree: left and right close and open a composite layer; Enter lists a layer's variables.
    tab.open("storage", "convnet_adam/train", "storage")
    tab.row("layer-table", "composite")
    tab.testid("layer-table").locator(".table-row").first.focus()
    model = _focused(tab)
    assert "composite" in model.inner_text() and model.get_attribute("aria-expanded") == "true"
    tab.page.keyboard.press("ArrowLeft")
    tab.testid("layer-table").get_by_text("(5*5*1+1)*32 = 832").wait_for(state="detached")
    playwright.expect(_focused(tab)).to_have_attribute("aria-expanded", "false")  # the row keeps the focus
    tab.page.keyboard.press("ArrowRight")
    while "(3136+1)*1024" not in _focused(tab).inner_text():
        tab.page.keyboard.press("ArrowDown")
    tab.page.keyboard.press(" ")
    playwright.expect(tab.testid("variable-table-filter")).to_have_value("layer^=lenet/fc1")
    tab.text("variable-table-count", "6 of 26 rows")
    assert not tab.errors, tab.errors
    tab.close()


def test_every_chart_has_a_summary_a_screen_reader_reads(demo_tb, browser, shots):
    """Issue 30 item 7: the charts had no text alternative (ECharts' aria off). Each is now an image whose
    name sums it up in words, or a list box of its bars when its bars do something."""
    tab = Tab(browser, demo_tb, shots, height=1200)
    seen = {}
    for view, run, tag in (("storage", "convnet_adam/train", "storage"), ("ops", "lenet_trace", None),
                           ("timeline", "lenet_peak", None), ("growth", "seed004_kept/builds", None)):
        tab.view(view)
        if view == "ops":  # CI read the charts in this gap once: the last item's, hidden while the picked one loads
            held = tab.pick_held(f"/ops?run={run}&", "run-select", run)
            playwright.expect(tab.region()).to_have_attribute("aria-busy", "true")
            held.release()
        else:
            tab.pick("run-select", run, exact=True)
        if tag:
            tab.pick("tag-select", tag, exact=True)
        tab.shown(run, tag)
        charts = tab.frame.locator(".chart").filter(visible=True)
        charts.first.locator("svg").wait_for(timeout=WAIT)
        charts.last.locator("svg").wait_for(timeout=WAIT)
        seen[view] = charts.evaluate_all("""cs => cs.map(c => ({role: c.getAttribute('role'),
          name: c.getAttribute('aria-label'),
          summary: c.getAttribute('aria-describedby')
            ? document.getElementById(c.getAttribute('aria-describedby')).textContent : '',
          options: c.querySelectorAll('[role=option]').length, tabindex: c.getAttribute('tabindex')}))""")
        for chart in seen[view]:
            words = chart["name"] + " " + chart["summary"]
            assert chart["role"] in ("img", "listbox") and re.search(r"\d", words), (view, chart)
            if chart["role"] == "listbox":  # its bars act: reachable, and each bar readable
                assert chart["tabindex"] == "0" and chart["options"] > 0, (view, chart)
    storage, ops, timeline, growth = (seen[v] for v in ("storage", "ops", "timeline", "growth"))
    assert storage[0]["role"] == "listbox"
    assert "lenet/fc1: 36.76 MiB, weights 12.25 MiB, optimizer slots 24.51 MiB" in storage[0]["summary"], storage
    assert [c["role"] for c in ops] == ["listbox", "listbox"] and "fc1 · " in ops[0]["summary"]
    assert timeline[0]["role"] == "img" and re.search(r"peak [\d,]+ B \(.*MiB\) at .*\(.*weights", timeline[0]["name"])
    assert len(growth) == 6 and all(c["role"] == "img" for c in growth)
    live = next(c for c in growth if c["name"].startswith("live variables over builds"))
    assert "keeps growing" in live["name"] and "+22 per build" in live["name"], live
    # What a screen reader gets, from Chromium's accessibility tree.
    playwright.expect(tab.frame.locator('[role="img"]').first).to_have_accessible_name(
        re.compile(r"^RSS over builds, keeps growing\. builds 0–7"))
    assert not tab.errors, tab.errors
    tab.close()


def test_growth_opens_on_what_is_flagged_and_says_where_to_look(demo_tb, browser, shots):
    """Issue 30 item 5: Growth opened on a run with nothing flagged ("2 samples: too few"); "Per build" read
    fractions (2.8, 0.4) for owners that appeared once; 14 graph-op rows read "unknown" without a reason."""
    flagged = {}
    for entry in demo_tb.get(f"{API}/runs")["runs"]:
        for t in entry["tags"]:
            if t["kind"] == "memory":
                answer = demo_tb.get(f"{API}/growth?run={urllib.parse.quote(entry['run'])}&tag={t['tag']}")
                flagged[entry["run"]] = sum(g["flagged"] for g in answer["growth"])
    most = max(flagged, key=flagged.get)
    assert most == "seed004_kept/builds" and flagged["convnet_adam/train"] == 0
    tab = Tab(browser, demo_tb, shots, height=1200)
    tab.view("growth")
    tab.text("growth-summary", "Keeps growing")
    assert tab.testid("run-select").input_value() == most  # not the first run, whose 2 samples flag nothing
    # Explaining tables: an owner that appeared has no rate per build; unknown says why, in words.
    answer = demo_tb.get(f"{API}/growth?run={most}&tag=memory")
    adam = next(r for r in answer["explained_by"]["variables_by_owner"] if r["name"] == "adam_3")
    assert adam["per_step"] not in (None, int(adam["per_step"]))  # the server's average: a fraction
    tab.filter("growth-owners", "name:adam_3")
    row = tab.row("growth-owners", "adam_3")
    assert row.locator('[role="cell"]').nth(3).inner_text() == "appeared", row.inner_text()
    assert str(adam["per_step"]) not in row.inner_text()
    unknown = [r for r in answer["explained_by"]["graph_ops_by_function"] if r["grown"] is None]
    assert len(unknown) >= 1
    rows = f"{len(unknown)} row{'s' if len(unknown) > 1 else ''}"
    tab.text("growth-functions-unknown", f'{rows} read "unknown": missing from the census')
    tab.filter("growth-functions", unknown[0]["name"])
    cells = tab.row("growth-functions", unknown[0]["name"]).locator("i.why")
    assert cells.count() == 3 and all("census" in (c.get_attribute("title") or "") for c in cells.all())
    # An item with nothing flagged says where something is.
    tab.pick("run-select", "convnet_adam/train", exact=True)
    tab.text("growth-summary", "too few")
    tab.text("growth-elsewhere", f"{most} ({flagged[most]} series)")
    tab.testid("growth-elsewhere").locator("button").filter(has_text=most).click()
    tab.text("growth-summary", "Keeps growing")
    assert tab.testid("run-select").input_value() == most
    assert not tab.errors, tab.errors
    tab.close()


def test_a_poll_during_growths_first_scan_still_opens_on_what_is_flagged(demo_tb, browser, shots):
    """Growth opens on the item that flags most once it has scanned them all; the tab's poll (here the
    reload button) coming while that scan waits on the flagged run's answer must not open the first run."""
    tab = Tab(browser, demo_tb, shots, height=1200)
    held = tab.hold("/growth?run=seed004_kept")
    tab.view("growth")
    held.wait()
    tab.reload()
    held.release()
    tab.text("growth-summary", "Keeps growing")
    assert tab.testid("run-select").input_value() == "seed004_kept/builds"
    assert not tab.errors, tab.errors
    tab.close()


def test_a_comparison_unticked_while_it_loads_stays_away(demo_tb, browser, shots):
    """Two runs ticked in Compare, the second unticked before its breakdown came: the answer, when it comes,
    is not drawn, and the hint says one run is ticked."""
    tab = Tab(browser, demo_tb, shots, height=1200)
    tab.view("storage")
    boxes = tab.testid("compare-run")
    boxes.nth(1).wait_for(timeout=WAIT)
    first, second = (boxes.nth(i).get_attribute("value") for i in (0, 1))
    boxes.first.check()
    tab.text("compare-hint", f"Only {first} is ticked")
    held = tab.hold(f"/breakdown?run={urllib.parse.quote(second, safe='')}&")
    boxes.nth(1).check()
    held.wait()
    boxes.nth(1).uncheck()
    held.release()
    assert tab.testid("compare-hint").is_visible()
    assert not tab.testid("compare-table").is_visible()
    assert not tab.errors, tab.errors
    tab.close()


def test_a_checkpoints_layers_read_class_unknown(demo_tb, browser, shots):
    """Issue 30 item 4: the Class column was empty for every layer of a checkpoint."""
    tab = Tab(browser, demo_tb, shots, height=1200)
    tab.open("storage", "tf1_convnet_adam", "checkpoint")
    row = tab.row("layer-table", "conv1")
    cell = row.locator("i.why")
    playwright.expect(cell).to_have_text("unknown")
    assert "checkpoint stores variables" in cell.get_attribute("title")
    tab.pick("run-select", "convnet_adam/train", exact=True)
    tab.row("layer-table", "Conv2D")  # a live model names its classes
    assert tab.testid("layer-table").locator("i.why").count() == 0
    tab.close()


def test_unknown_figures_read_unknown_and_the_optimizer_reads_as_words(demo_tb, browser, shots):
    """Issue 31 items 7 and 13: a layer's Outputs read 0 when its ops' outputs were unknown, composite sums
    added known ops with no marker, Alloc bytes read 0 where unknown; the optimizer config was raw JSON."""
    from tests.support.plugin_harness import layer_rows

    tag = _ops_tag(demo_tb, "lenet_trace")
    body = demo_tb.get(f"{API}/ops?run=lenet_trace&tag={urllib.parse.quote(tag)}")
    tab = Tab(browser, demo_tb, shots, height=1200)
    tab.open("ops", "lenet_trace", tag)
    # a layer whose sum leaves some ops out reads as a floor, with how many; one with none known reads unknown
    floor = next(r for r in layer_rows(body) if r["layer"] and r["output_bytes"] and r["unknown_output_ops"])
    tab.row("op-layer-table", floor["label"]).filter(
        has_text=f"≥ {floor['output_bytes']:,} (+ {floor['unknown_output_ops']} op").wait_for()
    # an op whose allocation the trace did not record: "unknown" with why, never 0
    op = next(o for o in body["ops"]["rows"] if o["alloc_bytes"] is None)
    tab.filter("op-table", f"name={op['name']}")
    cells = tab.row("op-table", op["name"]).locator("i.why")
    cells.first.wait_for()
    titles = cells.evaluate_all("els => els.map(e => [e.textContent, e.title])")
    assert all(text == "unknown" for text, _ in titles), titles
    assert any("allocation" in title for _, title in titles), titles
    tab.page.screenshot(path=os.path.join(shots, "ops-unknown.png"), full_page=True)
    # Storage: the optimizer as its config in words, each setting listed; no JSON
    summary = demo_tb.get(f"{API}/breakdown?run=convnet_adam/train&tag=storage")["optimizer_summary"]
    tab.open("storage", "convnet_adam/train", "storage")
    tab.text("optimizer-summary", summary["text"])
    assert summary["text"].startswith("Adam(learning_rate=")
    tab.testid("optimizer-config").get_by_text("learning_rate").wait_for()
    assert "{" not in tab.testid("optimizer-config").inner_text()
    tab.page.screenshot(path=os.path.join(shots, "storage-optimizer.png"), full_page=True)
    assert not tab.errors, tab.errors
    tab.close()


def test_mirrored_bytes_say_they_sum_the_replicas(seen_tb, browser, shots):
    """Issue 31 item 11: nothing said a MirroredStrategy's bytes are summed over 2 replicas; the "x2" hid at the
    end of a cut Device cell; a [5408,64] float32 kernel read 2,768,896 B (2 x 1,384,448)."""
    tab = Tab(browser, seen_tb, shots, height=1200)
    tab.open("storage", "mirrored/train", "storage")
    tab.text("replicas-note", "every variable has 2 replicas, one per device (CPU:0, CPU:1)")
    for card in ("total-weight", "total-optimizer_slot", "total-all"):
        tab.text(card, "summed over 2 replicas")
    kernel = tab.row("variable-table", "mnist_mirrored/fc1/kernel")
    kernel.filter(has_text="2 × 1,384,448 = 2,768,896").wait_for()  # 5408 x 64 x 4 B on each of 2 devices
    device = kernel.locator('[role="cell"]').last
    assert device.inner_text() == "×2 CPU:0, CPU:1"
    assert device.evaluate("c => c.scrollWidth <= c.clientWidth")  # whole, not cut
    tab.row("layer-table", "(5408+1)*64").filter(has_text="2,769,408 (×2)").wait_for()
    assert tab.testid("variable-table").evaluate(TABLE_FIT)["sideways"] == 0
    assert tab.testid("layer-table").evaluate(TABLE_FIT)["sideways"] == 0
    tab.page.screenshot(path=os.path.join(shots, "mirrored.png"))
    tab.close()


def test_a_profile_that_could_not_start_says_why_in_the_tab(seen_tb, browser, shots):
    """Issue 31 item 12: MemoryCallback(profile_steps=2) beside keras.callbacks.TensorBoard(profile_batch=2): the
    trace failed with a warning on stderr only; the tab showed no ops and no note."""
    tab = Tab(browser, seen_tb, shots, height=1200)
    tab.open("ops", "profiler_taken/train", "ops")
    tab.text("allocations-note", "No profile of steps 2: the profiler could not start")
    tab.text("allocations-note", "keras.callbacks.TensorBoard(profile_batch=2) in the same fit")
    assert not tab.testid("peak-by-category").is_visible() and not tab.testid("op-table").is_visible()
    # ...and the profile the other profiler wrote is a click away
    tab.testid("other-profiles").locator("button").filter(has_text="profile/").click()
    tab.text("op-table-count", "rows")
    assert tab.testid("tag-select").input_value().startswith("profile/")
    assert not tab.errors, tab.errors
    tab.close()


def test_an_xla_step_says_what_kind_of_step_it_is(seen_tb, browser, shots):
    """Issue 27 item 5: Keras on JAX profiled on an H100. The Ops view says which XLA program ran, how often,
    and how its kernels were tied to its instructions; the Timeline its temp allocation; rows read their
    framework ops readably, and kernel time no rule tied to an instruction stands out."""
    def ops(run):
        tag = _ops_tag(seen_tb, run)
        status, text = seen_tb.answer("/ops", run=run, tag=tag)
        assert status == 200, text
        return tag, json.loads(text)

    tag, transformer = ops("keras_jax_transformer/train")
    assert transformer["xla"]["time_us_by_method"].keys() == {"graph_node"}
    tab = Tab(browser, seen_tb, shots, height=1200)
    tab.open("ops", "keras_jax_transformer/train", tag)
    playwright.expect(tab.testid("xla-summary").locator(".xla-headline")).to_have_text(
        "XLA program jit_train_step, 2 runs; kernels in command buffers, tied to instructions by graph node (100%)")
    tab.text("xla-note", "XLA_FLAGS=--xla_gpu_enable_command_buffer=")
    tab.text("meta", "XLA-compiled")
    # An instruction's framework ops, read from its layer: "grad abc,cde->abde/dot_general", not
    # "jit(train_step)/transpose(jvp(transformer_block))/multi_head_attention/query/abc,cde->abde/dot_general".
    row = tab.row("op-table", "gemm_fusion_dot.92")
    assert row.locator('[role="gridcell"], [role="cell"]').nth(1).inner_text() == "grad abc,cde->abde/dot_general"
    assert "jit(train_step)" not in tab.testid("op-table").inner_text()
    fit = tab.testid("op-table").evaluate(TABLE_FIT)  # two outputs' shapes may be cut in the middle, their bytes not
    assert (fit["sideways"], fit["heads"], fit["cut"]) == (0, [], []), fit
    # The same profile without node ids: some kernel time tied to no instruction, and its row stands out.
    tag, stripped = ops("no_node_ids/train")
    share = stripped["xla"]["time_us_by_method"]["unattributed"] / sum(stripped["xla"]["time_us_by_method"].values())
    tab.open("ops", "no_node_ids/train", tag)
    tab.text("xla-unattributed", f"{round(100 * share)}% of kernel time not attributed to an instruction")
    tab.filter("op-table", "type=(not attributed)")
    row = tab.row("op-table", "command_buffer")
    assert "unattributed" in row.get_attribute("class")
    assert row.locator(".badge.unattributed").inner_text() == "NOT ATTRIBUTED"
    # The Timeline: the program's temp allocation and how much of it is live at once.
    tag, lenet = ops("keras_jax_lenet/train")
    temp = lenet["xla"]["temp_allocations"][0]
    tab.open("timeline", "keras_jax_lenet/train", tag)
    mib = lambda b: f"{b / 2**20:.2f} MiB"  # noqa: E731
    tab.text("xla-temp", f"temporaries of jit_train_step: one {mib(temp['allocation_bytes'])} allocation, at most "
                         f"{mib(temp['live_bytes'])} of it live at once ({temp['buffers']} buffers)")
    tab.page.screenshot(path=os.path.join(shots, "xla-timeline.png"))
    assert not tab.errors, tab.errors
    tab.close()


@pytest.fixture(scope="module")
def oom_logdir(tmp_path_factory) -> str:
    """tests/support/oom_run.py: a widening model traced at batch 32, then a fit at batch 2**18 that runs out
    of memory."""
    logdir = str(tmp_path_factory.mktemp("oom_logs"))
    subprocess.run([sys.executable, "-m", "tests.support.oom_run", logdir, logdir + ".json"], cwd=ROOT, check=True,
                   timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_CPU_ALLOCATOR_USE_BFC="true",
                                         KERAS_BACKEND="tensorflow"))
    return logdir


def test_an_oom_says_what_it_asked_for_and_what_if_says_what_would_fit(oom_logdir, browser, shots):
    """Issue 28: the step out of memory is above every view with what it asked for; "What would fit?" opens
    What if on its run, and the figures the view shows are the API's (tb_modelmem.estimate) for the same question."""
    import tb_modelmem

    with open(oom_logdir + ".json") as f:
        truth = json.load(f)
    asked = dict(batch=2**18, budget="16GiB")
    api = tb_modelmem.estimate(oom_logdir, run="train", **asked)
    with TensorBoardProcess(oom_logdir, load_fast=False) as tb:
        tb.wait_for_tab(expect={("train", "oom"), ("train", "ops")})
        tab = Tab(browser, tb, shots, height=1200)
        step = truth["failed_step"]
        tab.text("oom", f"Step {step} ran out of memory allocating 256.00 GiB ([262144,262144] float32)")
        tab.text("oom", "expand")
        assert truth["requested_bytes"] == 256 * 2**30 and truth["raised"] == "ResourceExhaustedError"
        tab.testid("oom-project").click()
        tab.text("whatif-traced", "Adam · float32 · batch 32")
        tab.testid("whatif-batch").fill(str(asked["batch"]))
        tab.testid("whatif-budget").fill(asked["budget"])
        tab.testid("whatif-project").click()
        tab.text("whatif-headline", "at batch 262,144 (traced: ")
        tab.text("whatif-budget-line", f"Largest batch within 16.00 GiB: {api['largest_batch']:,}")
        tab.row("whatif-table", "Peak in use").filter(has_text=f"{api['peak_bytes']:,} B").wait_for(timeout=WAIT)
        # The tiled [32, 262,144] buffer is at the traced peak as the layer's output or as its gradient (which
        # one the executor keeps there differs from machine to machine); either way it carries the batch.
        category = max(("activations", "gradients"), key=lambda c: api["by_category"][c])
        carried = tab.row("whatif-table", category.capitalize())
        assert f"{api['by_category'][category]:,} B" in carried.inner_text()
        assert "scaled" in carried.inner_text() and api["by_category"][category] >= truth["requested_bytes"]
        tab.page.screenshot(path=os.path.join(shots, "whatif.png"))
        # A question that is no question: its error, and the figures of the last answer hidden, not left standing
        tab.testid("whatif-budget").fill("lots")
        tab.testid("whatif-project").click()
        tab.text("error", "not a size: 'lots'")
        assert not tab.testid("whatif-headline").is_visible()
        assert [e for e in tab.errors if "400" not in e] == []
        tab.close()


@pytest.fixture(scope="module")
def what_if_logdir(tmp_path_factory) -> str:
    """Two runs What if is asked about (every CPU allocation recorded). LeNet traced at batch 1: its peak is
    the optimizer's moment, fc1's gradient and update (tens of MB), while its activations are a few hundred
    KB; at batch 1,024 the moment where the activations peak is higher by far (~70% on 2 cores): a peak that
    moves, by design rather than by the executor's op order on the day (the demo's batch-32 run sits on the
    edge). And a causal LM traced at 64 tokens, for the sequence axis."""
    logdir = str(tmp_path_factory.mktemp("what_if"))
    env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    for run, args in (("lenet_1", ["lenet", "1"]),
                      ("lm_64", ["causal_lm", "8", "--seq", "64", "--optimizer", "adamw"])):
        subprocess.run([sys.executable, "-m", "tests.support.projection_run", os.path.join(logdir, run), *args],
                       cwd=ROOT, check=True, timeout=600, capture_output=True, env=env)
    return logdir


@pytest.fixture(scope="module", params=[True, False], ids=["rust-data-server", "python-loader"])
def batch_one_tb(what_if_logdir, request):
    with TensorBoardProcess(what_if_logdir, load_fast=request.param) as tb:
        tb.wait_for_tab(expect=[("lenet_1/train", "ops"), ("lm_64/train", "ops")])
        yield what_if_logdir, tb


def test_what_if_basis_gives_each_projected_figure_where_the_peak_moves(batch_one_tb, browser, shots):
    """Issue 39: on a projection whose peak falls at another moment of the step than the traced one, each
    row is taken at that moment, and the Basis cell beside it says that moment's arithmetic: read from the
    rendered table, every Basis cell gives its Projected cell (to the Basis's printed rounding), and the
    Projected cells are the API's figures for the same question."""
    import tb_modelmem

    logdir, tb = batch_one_tb
    asked = (1024, None)
    api = tb_modelmem.estimate(logdir, run="lenet_1/train", batch=asked[0])
    assert api["peak_moved"], (api["peak_time_us"], api["traced"])
    assert api["band"] is None  # the traced peak's buffers do not say another moment's chunking
    tab = Tab(browser, tb, shots, height=1200)
    tab.open("whatif", "lenet_1/train", "ops")
    tab.text("whatif-traced", "Adam · float32 · batch 1")
    tab.testid("whatif-batch").fill(str(asked[0]))
    tab.testid("whatif-optimizer").select_option(asked[1] or "")
    tab.testid("whatif-project").click()
    tab.text("whatif-moved", f"The projected peak falls {api['peak_time_us'] / 1000:.2f} ms into the trace, the "
             f"traced one at {api['traced']['peak_time_us'] / 1000:.2f} ms")
    tab.row("whatif-table", "Peak in use").filter(has_text=f"{api['peak_bytes']:,} B").wait_for(timeout=WAIT)
    tab.page.screenshot(path=os.path.join(shots, "whatif-moved.png"))
    assert not tab.testid("whatif-band").is_visible()
    rows = tab.testid("whatif-table").locator('.table-rows [role="row"]')
    # beside the traced peak's bytes, what the traced step held then: what each row's figure is made from
    then_of = {line["category"]: line["traced_then_bytes"] for line in api["basis"]}
    checked, thens = {}, []
    for i in range(rows.count()):
        cells = rows.nth(i).locator(".cell")
        category, _, then, projected, how, basis = (cells.nth(k).inner_text().strip() for k in range(6))
        if category == "Peak in use":
            assert f"{api['peak_time_us'] / 1000:.2f} ms into the trace" in basis
            assert then == f"{sum(thens):,} B", then
            continue
        thens.append(int(then.removesuffix(" B").replace(",", "")))
        exact = int(re.match(r"(-?[\d,]+) B", projected).group(1).replace(",", ""))
        value, slack = basis_arithmetic(basis)
        assert abs(value - exact) <= slack + 1, (category, basis, projected)
        # what a user reads is whole: the Basis cell is not cut at the column's edge
        width = cells.nth(5).evaluate("c => [c.scrollWidth, c.clientWidth]")
        assert width[0] <= width[1] + 1, (category, basis, width)
        checked[category] = (exact, how)
    assert sum(exact for exact, _ in checked.values()) == api["peak_bytes"]
    assert sorted(exact for exact, _ in checked.values()) == sorted(v for v in api["by_category"].values())
    assert sorted(thens) == sorted(then_of.values()), (thens, then_of)
    assert sum(how == "scaled" for _, how in checked.values()) >= 3, checked
    # in a 1024 px window the table fits without a sideways scroll; a Basis cut short there reads whole below the
    # table once its row is clicked
    tab.page.set_viewport_size({"width": 1024, "height": 1200})
    tab.page.screenshot(path=os.path.join(shots, "whatif-1024.png"))
    scroller = tab.testid("whatif-table").locator(".table-scroll")
    sizes = scroller.evaluate("s => [s.scrollWidth, s.clientWidth]")
    assert sizes[0] <= sizes[1] + 1, sizes
    cut = [i for i in range(rows.count()) if rows.nth(i).locator(".cell").nth(5).evaluate(
        "c => c.scrollWidth > c.clientWidth + 1")]
    assert cut, "no Basis cell is cut at 1024 px: nothing here checks reading one whole"
    row = rows.nth(cut[0])
    whole = row.locator(".cell").nth(5).get_attribute("title")
    row.click()
    tab.text("whatif-basis", whole)
    assert tab.testid("whatif-basis").inner_text().startswith(row.locator(".cell").nth(0).inner_text().strip())
    tab.close()


def _whatif_rows(tab) -> dict:
    """The What-if table as shown: category -> its Category, Traced, Projected, How and Basis cells (found by
    their headers: where the projected peak moves, a Traced then column stands beside Traced), each Basis cell
    asserted whole (not cut)."""
    table = tab.testid("whatif-table")
    headers = [h.strip() for h in table.locator('[role="columnheader"]').all_inner_texts()]
    at = [headers.index(label) for label in ("Category", "Traced", "Projected", "How", "Basis")]
    rows = table.locator('.table-rows [role="row"]')
    shown = {}
    for i in range(rows.count()):
        cells = [rows.nth(i).locator(".cell").nth(k).inner_text().strip() for k in at]
        shown[cells[0]] = cells
        width = rows.nth(i).locator(".cell").nth(at[-1]).evaluate("c => [c.scrollWidth, c.clientWidth]")
        assert width[0] <= width[1] + 1, (cells, width)
    return shown


def test_what_if_with_sgd_keeps_an_update_buffer_and_every_basis_whole(batch_one_tb, browser, shots):
    """Adam's trace asked for SGD in the tab: the optimizer temporaries' Basis says the update keeps up to one
    buffer of the largest weight (fc1's kernel, [3136,1024] float32 in Keras), whole in its cell as every
    other; the figures are the API's."""
    import tb_modelmem

    logdir, tb = batch_one_tb
    api = tb_modelmem.estimate(logdir, run="lenet_1/train", optimizer="SGD")
    tab = Tab(browser, tb, shots, height=1200)
    tab.open("whatif", "lenet_1/train", "ops")
    tab.testid("whatif-optimizer").select_option("SGD")
    tab.testid("whatif-project").click()
    tab.row("whatif-table", "Peak in use").filter(has_text=f"{api['peak_bytes']:,} B").wait_for(timeout=WAIT)
    tab.page.screenshot(path=os.path.join(shots, "whatif-sgd.png"))
    shown = _whatif_rows(tab)
    assert "lr x grad" in shown["Optimizer temporaries"][4], shown["Optimizer temporaries"]
    assert api["by_category"]["optimizer_temporaries"] <= 3136 * 1024 * 4
    assert shown["Optimizer slots"][2] == "0 B"
    assert [e for e in tab.errors if "400" not in e] == []
    tab.close()


def test_what_if_at_another_sequence_length(batch_one_tb, browser, shots):
    """Issue 38 item 4 in the tab: the traced line says the length the step ran, the Sequence field asks
    another, and the headline and every row are the API's figures for it, the attention scores' basis
    saying they grow with the square of the length."""
    import tb_modelmem

    logdir, tb = batch_one_tb
    api = tb_modelmem.estimate(logdir, run="lm_64/train", seq=256)
    tab = Tab(browser, tb, shots, height=1200)
    tab.open("whatif", "lm_64/train", "ops")
    tab.text("whatif-traced", "AdamW · float32 · batch 8 · sequence 64")
    tab.testid("whatif-seq").fill("256")
    tab.testid("whatif-project").click()
    tab.text("whatif-headline", "at batch 8, sequence 256 (traced: ")
    tab.row("whatif-table", "Peak in use").filter(has_text=f"{api['peak_bytes']:,} B").wait_for(timeout=WAIT)
    tab.page.screenshot(path=os.path.join(shots, "whatif-seq.png"))
    shown = _whatif_rows(tab)
    squared = [cells for cells in shown.values() if "x 16 (seq²)" in cells[4]]
    assert squared, shown
    for category, cells in shown.items():  # each Basis cell is whole and gives its Projected cell
        if category in ("Peak in use", "Unattributed") or "carry the batch" not in cells[4]:
            continue
        value, slack = basis_arithmetic(cells[4])
        assert abs(value - int(re.match(r"(-?[\d,]+) B", cells[2]).group(1).replace(",", ""))) <= slack + 1, cells
    figures = [int(re.match(r"(-?[\d,]+) B", cells[2]).group(1).replace(",", "")) for name, cells in shown.items()
               if name != "Peak in use"]
    assert sorted(figures) == sorted(v for v in api["by_category"].values())
    assert [e for e in tab.errors if "400" not in e] == []
    tab.close()


def test_a_tag_picked_while_the_new_runs_steps_load_keeps_the_new_run(batch_one_tb, browser, shots):
    """A run picked and then a tag before that run's steps have come (CI's browser once picked that quickly):
    the view shows the picked run's step, not the run it replaced."""
    _, tb = batch_one_tb
    tab = Tab(browser, tb, shots, height=1200)
    tab.view("whatif")
    tab.text("whatif-traced", "Adam · float32 · batch 1")  # the first run's step
    held = tab.pick_held("/steps?run=lm_64", "run-select", "lm_64/train")
    tab.pick("tag-select", "ops", exact=True)
    held.release()
    tab.text("whatif-traced", "AdamW · float32 · batch 8 · sequence 64")
    assert tab.testid("run-select").input_value() == "lm_64/train"
    assert tab.errors == []
    tab.close()


def test_the_item_picked_back_while_another_loads_stays_shown(batch_one_tb, browser, shots):
    """lm_64 picked, then lenet_1 again before lm_64's answer came: lenet_1's figures show again at once,
    and lm_64's answer, when it comes, is not drawn under lenet_1's pickers."""
    _, tb = batch_one_tb
    tab = Tab(browser, tb, shots, height=1200)
    tab.open("whatif", "lenet_1/train", "ops")
    tab.text("whatif-traced", "Adam · float32 · batch 1")
    held = tab.pick_held("/whatif?run=lm_64", "run-select", "lm_64/train")
    tab.pick("run-select", "lenet_1/train", exact=True)
    tab.text("whatif-traced", "Adam · float32 · batch 1")
    held.release()
    assert tab.testid("whatif-traced").inner_text() == "Traced step: Adam · float32 · batch 1"
    assert tab.testid("run-select").input_value() == "lenet_1/train"
    assert not tab.frame.locator(".loading").is_visible()
    assert tab.errors == []
    tab.close()


def test_the_last_items_figures_go_while_the_picked_ones_steps_come(batch_one_tb, browser, shots):
    """lm_64 picked while lenet_1 shows: until lm_64's steps come, the region is busy and lenet_1's figures
    are not under lm_64's pickers; lenet_1 picked back before they come shows again at once."""
    _, tb = batch_one_tb
    tab = Tab(browser, tb, shots, height=1200)
    tab.open("whatif", "lenet_1/train", "ops")
    held = tab.pick_held("/steps?run=lm_64", "run-select", "lm_64/train")
    playwright.expect(tab.region()).to_have_attribute("aria-busy", "true")
    assert not tab.testid("whatif-traced").is_visible()
    tab.pick("run-select", "lenet_1/train", exact=True)
    tab.shown("lenet_1/train", "ops")
    tab.text("whatif-traced", "Adam · float32 · batch 1")
    held.release()
    tab.pick("run-select", "lm_64/train", exact=True)
    tab.shown("lm_64/train", "ops")
    tab.text("whatif-traced", "AdamW · float32 · batch 8 · sequence 64")
    assert tab.errors == []
    tab.close()


def test_an_item_no_longer_wanted_is_not_drawn_while_the_picked_ones_steps_come(batch_one_tb, browser, shots):
    """lm_64 picked and loading, then lenet_1 picked: lm_64's answer, coming before lenet_1's steps, is not drawn
    under lenet_1's pickers (a review of the change above found it)."""
    _, tb = batch_one_tb
    tab = Tab(browser, tb, shots, height=1200)
    tab.open("whatif", "lenet_1/train", "ops")
    answer = tab.pick_held("/whatif?run=lm_64", "run-select", "lm_64/train")
    steps = tab.pick_held("/steps?run=lenet_1", "run-select", "lenet_1/train")
    answer.release()
    region = tab.region()
    playwright.expect(region).to_have_attribute("aria-busy", "true")
    assert not tab.testid("whatif-traced").is_visible() and region.get_attribute("data-run") != "lm_64/train"
    steps.release()
    tab.shown("lenet_1/train", "ops")
    tab.text("whatif-traced", "Adam · float32 · batch 1")
    assert tab.errors == []
    tab.close()


def test_a_poll_leaves_the_batch_being_typed_in_the_what_if_form(batch_one_tb, browser, shots):
    """The tab asks for the runs every 20 s while it is open; one coming between typing a batch and pressing
    Project (here the reload button's) leaves the typed batch in its field, and Project asks that batch."""
    import tb_modelmem

    logdir, tb = batch_one_tb
    api = tb_modelmem.estimate(logdir, run="lenet_1/train", batch=64)
    tab = Tab(browser, tb, shots, height=1200)
    tab.open("whatif", "lenet_1/train", "ops")
    tab.text("whatif-traced", "Adam · float32 · batch 1")
    tab.testid("whatif-batch").fill("64")
    tab.reload()
    assert tab.testid("whatif-batch").input_value() == "64"
    tab.testid("whatif-project").click()
    tab.text("whatif-headline", "at batch 64 (traced: ")
    tab.row("whatif-table", "Peak in use").filter(has_text=f"{api['peak_bytes']:,} B").wait_for(timeout=WAIT)
    assert tab.errors == []
    tab.close()


def test_what_if_under_a_mixed_policy_says_what_stays_float32(batch_one_tb, browser, shots):
    """Issue 38 item 3 in the tab: the float32 LM asked under mixed_bfloat16; the activations' Basis cell
    says what the policy leaves wider (normalization, the loss, its float32 copy of the output) and its
    arithmetic gives the Projected cell; every figure is the API's."""
    import tb_modelmem

    logdir, tb = batch_one_tb
    api = tb_modelmem.estimate(logdir, run="lm_64/train", policy="mixed_bfloat16")
    tab = Tab(browser, tb, shots, height=1200)
    tab.open("whatif", "lm_64/train", "ops")
    tab.text("whatif-traced", "AdamW · float32 · batch 8 · sequence 64")
    tab.testid("whatif-policy").select_option("mixed_bfloat16")
    tab.testid("whatif-project").click()
    tab.row("whatif-table", "Peak in use").filter(has_text=f"{api['peak_bytes']:,} B").wait_for(timeout=WAIT)
    tab.page.screenshot(path=os.path.join(shots, "whatif-policy.png"))
    # the band's largest request under the policy is the loss's float32 copy of the logits ([512,8000] traced)
    band = api["band"]
    assert band["copy"] and band["requested_bytes"] == 8 * 64 * 8000 * 4, band
    tab.text("whatif-band", f"to the largest, the loss's float32 copy of {band['op']} ([512,8000] as traced)")
    shown = _whatif_rows(tab)
    wider = [cells for cells in shown.values() if "kept wide (norms, loss, ints, its copy)" in cells[4]]
    assert wider, shown  # on activations or gradients, as the projected peak's moment falls
    for cells in wider:  # each such Basis cell gives its Projected cell
        value, slack = basis_arithmetic(cells[4])
        assert abs(value - int(re.match(r"(-?[\d,]+) B", cells[2]).group(1).replace(",", ""))) <= slack + 1, cells
    figures = [int(re.match(r"(-?[\d,]+) B", cells[2]).group(1).replace(",", "")) for name, cells in shown.items()
               if name != "Peak in use"]
    assert sorted(figures) == sorted(v for v in api["by_category"].values())
    assert [e for e in tab.errors if "400" not in e] == []
    tab.close()


def test_what_a_new_user_trips_over_reads_plainly(demo_tb, browser, shots):
    """Issue 39 item 5 on the demo log dir: one ticked run in Compare says why nothing is compared; a layer
    row some of whose ops have no figure says the unknown ones are ops; Growth's function names that share a
    long prefix show their distinguishing end."""
    from tests.support.plugin_harness import layer_rows

    tab = Tab(browser, demo_tb, shots, height=1200)
    tab.view("storage")
    boxes = tab.testid("compare-run")
    boxes.first.wait_for(timeout=WAIT)
    first = boxes.first.get_attribute("value")
    boxes.first.check()
    tab.text("compare-hint", f"Only {first} is ticked: a comparison needs two runs or more")
    boxes.nth(1).check()
    tab.testid("compare-table").locator('.table-rows [role="row"]').nth(1).wait_for(timeout=WAIT)
    assert not tab.testid("compare-hint").is_visible()

    tag = _ops_tag(demo_tb, "lenet_peak")
    body = demo_tb.get(f"{API}/ops?run=lenet_peak&tag={urllib.parse.quote(tag)}")
    floor = next(r for r in layer_rows(body) if r["output_bytes"] and r["unknown_output_ops"])
    tab.open("ops", "lenet_peak", tag)
    ops = f"{floor['unknown_output_ops']} op{'s' if floor['unknown_output_ops'] > 1 else ''}"
    tab.row("op-layer-table", floor["label"]).filter(
        has_text=f"≥ {floor['output_bytes']:,} (+ {ops} unknown)").wait_for(timeout=WAIT)

    tab.view("growth")
    tab.pick("run-select", "seed004_cleared/builds", exact=True)
    tab.shown("seed004_cleared/builds")  # not the run Growth opened on, nor hidden while this one loads
    table = tab.testid("growth-functions")
    table.locator('.table-rows [role="row"]').filter(has_text="_cond_false_").first.wait_for(timeout=WAIT)
    tab.page.screenshot(path=os.path.join(shots, "growth.png"))
    cells = table.locator('.table-rows [role="row"] .cell:first-child')
    seen = cells.evaluate_all("""cells => cells.filter(c => c.scrollWidth > c.clientWidth).map(c => {
        const range = document.createRange();
        const text = c.querySelector('*') ? c.querySelector('*').firstChild || c.firstChild : c.firstChild;
        const node = text.nodeType === 3 ? text : text.firstChild;
        range.setStart(node, node.length - 1); range.setEnd(node, node.length);
        const end = range.getBoundingClientRect(), box = c.getBoundingClientRect();
        return [c.textContent, end.right <= box.right + 1 && end.left >= box.left - 1];
    })""")
    assert seen, "no function name is wider than its cell: nothing here checks the cut"
    assert all(visible for _, visible in seen), seen  # a cut name keeps its end in view
    tab.close()
