"""Regenerate the README's screenshots from a demo log dir (real TensorBoard, real Chromium).

    python demo/make_logdir.py --logdir demo_logs && python demo/screenshots.py --logdir demo_logs
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.tensorboard_process import TensorBoardProcess  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
# view test id -> (run to pick, tag to pick or None, file name)
SHOTS = [("view-storage", "convnet_adam/train", None, "screenshot-storage.png"),
         ("view-ops", "lenet_trace", None, "screenshot-ops.png"),
         ("view-timeline", "tf1_convnet_adam", "ops", "screenshot-timeline.png"),
         ("view-load", None, None, "screenshot-load.png")]


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--logdir", default="demo_logs")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(__file__)), "docs"))
    args = parser.parse_args()
    with TensorBoardProcess(args.logdir, load_fast=True) as tb, sync_playwright() as p:
        tb.wait_for_tab(expect_tags=4)
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1250})
        page.goto(f"{tb.url}/#modelmem")
        frame = page.frame_locator("iframe").first
        for view, run, tag, name in SHOTS:
            tab = frame.locator(f'[data-testid="{view}"]')
            tab.wait_for(timeout=60_000)
            tab.click()
            if run:
                frame.locator('[data-testid="run-select"]').select_option(run)
            if tag:
                frame.locator('[data-testid="tag-select"]').select_option(tag)
            page.wait_for_timeout(2500)  # charts animate in
            page.screenshot(path=os.path.join(args.out, name))
            print("wrote", os.path.join(args.out, name))
        browser.close()


if __name__ == "__main__":
    main()
