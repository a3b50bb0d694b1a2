"""End to end: the demo's log dir, a real `tensorboard` process (both loaders), a real Chromium.

Chromium is Debian's (/usr/bin/chromium) driven by Playwright; TensorBoard loads our ES
module in an iframe under its CSP, so anything inline or from a CDN would fail here.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.tensorboard_process import TensorBoardProcess

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def demo_logdir(tmp_path_factory) -> str:
    logdir = str(tmp_path_factory.mktemp("demo_logs"))
    subprocess.run([sys.executable, os.path.join(ROOT, "demo", "make_logdir.py"), "--logdir", logdir,
                    "--loadbench", "none"], check=True, timeout=900,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    return logdir


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian chromium is missing: run scripts/setup_env.sh (apt-get install chromium)")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


def _open_tab(browser, tb: TensorBoardProcess):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    console_errors = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: console_errors.append(str(e)))
    page.goto(f"{tb.url}/#modelmem", wait_until="domcontentloaded")
    frame = page.frame_locator("iframe").first
    return page, frame, console_errors


def _select_run(frame, run_substring: str) -> None:
    select = frame.locator('[data-testid="run-select"]')
    select.wait_for(timeout=60_000)
    value = next(v for v in select.locator("option").evaluate_all("os => os.map(o => o.value)") if run_substring in v)
    select.select_option(value)


@pytest.mark.parametrize("load_fast", [True, False], ids=["rust-data-server", "python-loader"])
def test_storage_view_shows_seed001_figures(demo_logdir, browser, load_fast):
    with TensorBoardProcess(demo_logdir, load_fast=load_fast) as tb:
        tb.wait_for_tab(expect_tags=4)
        page, frame, console_errors = _open_tab(browser, tb)
        _select_run(frame, "tf1_convnet_adam")
        frame.locator('[data-testid="total-weight"]').filter(has_text="13,098,536").wait_for(timeout=60_000)
        frame.locator('[data-testid="total-optimizer_slot"]').filter(has_text="26,197,072").wait_for()
        frame.locator('[data-testid="total-all"]').filter(has_text="37.48 MiB").wait_for()
        _select_run(frame, "convnet_adam")
        frame.locator('[data-testid="total-optimizer_slot"]').filter(has_text="26,197,072").wait_for()
        layer_table = frame.locator('[data-testid="layer-table"]')
        for derivation in ("(5*5*1+1)*32 = 832", "(5*5*32+1)*64 = 51,264", "3,212,288", "10,250"):
            layer_table.get_by_text(derivation, exact=False).first.wait_for()
        page.screenshot(path=os.path.join(str(demo_logdir), f"storage-{load_fast}.png"), full_page=True)
        assert not [e for e in console_errors if "Content Security Policy" in e], console_errors
        page.close()


def test_ops_view_shows_a_plain_tf1_log_dir(demo_logdir, browser):
    """tf1_convnet_adam/step_1 was written by FileWriter.add_run_metadata alone (issue 3)."""
    with TensorBoardProcess(demo_logdir, load_fast=True) as tb:
        tb.wait_for_tab(expect_tags=4)
        page, frame, console_errors = _open_tab(browser, tb)
        frame.locator('[data-testid="view-ops"]').click()
        _select_run(frame, "tf1_convnet_adam")
        frame.locator('[data-testid="tag-select"]').select_option("step_1")
        frame.locator('[data-testid="op-table-filter"]').fill("conv1/Relu")
        ops = frame.locator('[data-testid="op-table"]')
        ops.get_by_text("100,352", exact=False).first.wait_for(timeout=60_000)
        ops.get_by_text("[1,28,28,32]", exact=False).first.wait_for()
        page.screenshot(path=os.path.join(str(demo_logdir), "ops.png"))
        assert not console_errors, console_errors
        page.close()


def test_bad_items_show_a_message_and_names_stay_text(tmp_path, browser):
    from tests.test_plugin_bad_input import XSS, _good, _raw_summary
    from tests.plugin_harness import write_events
    from tb_modelmem import summary

    write_events(os.path.join(str(tmp_path), "run"), [(1, summary.pb("storage", _good())),
                                                      (1, _raw_summary("garbage", [b"\x00not zlib"]))])
    with TensorBoardProcess(str(tmp_path), load_fast=False) as tb:
        tb.wait_for_tab(expect_tags=2)
        page, frame, _ = _open_tab(browser, tb)
        dialogs = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        frame.locator('[data-testid="tag-select"]').wait_for(timeout=60_000)
        frame.locator('[data-testid="tag-select"]').select_option("garbage")
        frame.locator('[data-testid="error"]').filter(has_text="corrupt or foreign").first.wait_for(timeout=30_000)
        frame.locator('[data-testid="tag-select"]').select_option("storage")
        frame.locator('[data-testid="total-weight"]').filter(has_text="48 B").wait_for(timeout=30_000)
        frame.locator('[data-testid="variable-table"]').get_by_text(f"{XSS}/kernel").first.wait_for()
        assert frame.locator("img").count() == 0 and not dialogs
        page.close()


def test_a_20000_op_table_renders_only_the_rows_in_view(tmp_path, browser):
    from tb_modelmem import summary
    from tb_modelmem.capture.run_metadata import reduce_run_metadata
    from tests.plugin_harness import write_events
    from tests.trace_fixtures import synthetic_run_metadata

    trace = reduce_run_metadata(synthetic_run_metadata(20_000))
    last = trace.ops[-1].name
    write_events(os.path.join(str(tmp_path), "big"), [(1, summary.pb("ops", trace))])
    with TensorBoardProcess(str(tmp_path), load_fast=True) as tb:
        tb.wait_for_tab()
        page, frame, console_errors = _open_tab(browser, tb)
        frame.locator('[data-testid="view-ops"]').click()
        table = frame.locator('[data-testid="op-table"]')
        table.get_by_text("20,000 rows", exact=False).first.wait_for(timeout=60_000)
        assert 0 < table.locator(".table-row").count() < 200  # virtualised: the DOM holds the rows in view
        frame.locator('[data-testid="op-table-filter"]').fill(last)
        table.locator(".table-row").filter(has_text=last).first.wait_for()
        assert not console_errors, console_errors
        page.close()
