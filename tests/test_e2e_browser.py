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
import statistics
import subprocess
import sys
import time
import urllib.parse

import pytest

from tests.tensorboard_process import TensorBoardProcess

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
API = "/data/plugin/modelmem"
WAIT = 60_000  # ms; a cold TensorBoard decodes and reduces on first request
RLO = "\u202e"


@pytest.fixture(scope="module")
def demo_logdir(tmp_path_factory) -> str:
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


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian chromium is missing: run scripts/setup_env.sh (apt-get install chromium)")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


class Tab:
    """The Model Memory tab of one TensorBoard in a fresh page: its frame, console errors and API traffic."""

    def __init__(self, browser, tb: TensorBoardProcess, shots: str):
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.errors, self.responses, self.requests = [], [], []
        self.in_flight, self.most_in_flight = {}, {}  # URL -> requests on the wire (now, at most)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", self._sent)
        self.page.on("requestfinished", self._done)
        self.page.on("requestfailed", self._done)
        self.page.on("response", lambda r: self.responses.append(r) if API in r.url else None)
        self.page.goto(f"{tb.url}/#modelmem", wait_until="domcontentloaded")
        self.page.locator("iframe").first.wait_for(timeout=WAIT)
        self.page.screenshot(path=os.path.join(shots, "first-paint.png"))  # lays the iframe out
        self.frame = self.page.frame_locator("iframe").first

    def _sent(self, request) -> None:
        if API in request.url and "/index.js" not in request.url:
            self.requests.append(request.url)
            self.in_flight[request.url] = self.in_flight.get(request.url, 0) + 1
            self.most_in_flight[request.url] = max(self.most_in_flight.get(request.url, 0), self.in_flight[request.url])

    def _done(self, request) -> None:
        if request.url in self.in_flight:
            self.in_flight[request.url] -= 1

    def testid(self, testid: str):
        return self.frame.locator(f'[data-testid="{testid}"]')

    def view(self, name: str) -> None:
        self.testid(f"view-{name}").click(timeout=WAIT)

    def pick(self, testid: str, wanted: str, exact: bool = False) -> None:
        """Select the option whose value is (or contains) `wanted` in a picker, once it has one: a
        picker fills in after the pick before it (a new run's tags come with its listing)."""
        select = self.testid(testid)
        select.wait_for(timeout=WAIT)
        deadline = time.monotonic() + WAIT / 1000
        while True:
            values = select.locator("option").evaluate_all("os => os.map(o => o.value)")
            found = [v for v in values if (v == wanted if exact else wanted in v)]
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert found, f"no option {wanted!r} in {testid}: {values}"
        select.select_option(found[0])

    def open(self, view: str, run: str, tag: str) -> None:
        """Show ``view`` of the item at (run, tag), picked as a user picks it."""
        self.view(view)
        self.pick("run-select", run, exact=True)
        self.pick("tag-select", tag, exact=True)

    def text(self, testid: str, contains, timeout: int = WAIT) -> None:
        self.testid(testid).filter(has_text=contains).first.wait_for(timeout=timeout)

    def filter(self, table: str, query: str) -> None:
        self.testid(f"{table}-filter").fill(query)

    def row(self, table: str, contains: str, timeout: int = WAIT):
        row = self.testid(table).locator('[role="row"]').filter(has_text=contains).first
        row.wait_for(timeout=timeout)
        return row

    def close(self) -> None:
        csp = [e for e in self.errors if "Content Security Policy" in e]
        self.page.close()
        assert not csp, csp


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
    if body["allocations"] != "all":
        tab.text("allocations-note", "TF_CPU_ALLOCATOR_USE_BFC")
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
    from tests.plugin_harness import write_events
    from tests.test_plugin_bad_input import XSS, _good, _raw_summary

    write_events(os.path.join(str(tmp_path), "run"), [(1, summary.pb("storage", _good())),
                                                      (1, _raw_summary("garbage", [b"\x00not zlib"]))])
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
    from tests.plugin_harness import write_events
    from tests.test_plugin_bad_input import _good, _raw_summary

    long_name = "n" * 10_000
    long_tag = "t" * 10_000
    breakdown = Breakdown(source="test", model_name=long_name,
                          optimizer={"class_name": "Adam", "config": {"k" * 10_000: 1}},
                          variables=[VariableRecord(name=f"{long_name}/kernel", layer=long_name, shape=[3, 4],
                                                    dtype="float32", bytes=48, role=WEIGHT)])
    evil = f"evil{RLO}run"
    write_events(os.path.join(str(tmp_path), evil), [
        (1, summary.pb("storage", _good())),
        (1, _raw_summary("future", [b"x"], content=b'{"version": 99, "kind": "breakdown"}'))])
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
def growth_logdir(tmp_path_factory):
    """The seed-004 loops of demo/growth_loops.py, each in a fresh process as tests/test_growth.py runs
    them: models kept in a list (keep/builds) and freed with clear_session (clear/builds). Returns the
    log dir and each loop's TRUTH.json (gc counts and the model's own variables, taken without tb_modelmem)."""
    base = tmp_path_factory.mktemp("growth")
    logdir, truth = str(base / "logs"), {}
    for mode in ("keep", "clear"):  # one after the other: one TensorFlow process at a time
        out = str(base / f"{mode}.json")
        result = subprocess.run([sys.executable, "-m", "demo.growth_loops", mode, os.path.join(logdir, mode), out],
                                cwd=ROOT, capture_output=True, text=True, timeout=600,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        assert result.returncode == 0, result.stderr[-3000:]
        with open(out) as f:
            truth[mode] = json.load(f)
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
    from tests.plugin_harness import write_events
    from tests.trace_fixtures import synthetic_run_metadata

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
    from tests.plugin_harness import write_events
    from tests.test_plugin_bad_input import _good

    session = os.path.join(str(tmp_path), "workers", "plugins", "profile", "2026_01_01_00_00_00")
    os.makedirs(session)
    for host, scale in (("worker_a", 1.0), ("worker_b", 2.0)):
        with open(os.path.join(session, f"{host}.xplane.pb"), "wb") as f:
            f.write(_synthetic_profile(25_000, scale))
    write_events(os.path.join(str(tmp_path), "workers"), [(1, summary.pb("storage", _good()))])
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
