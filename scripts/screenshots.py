"""Regenerate the README's screenshots from a demo log dir (real TensorBoard, real Chromium).

    python demo/make_logdir.py --logdir demo_logs && python scripts/screenshots.py --logdir demo_logs

Each view is shot once its figures are on screen (a test id holding text), not after a fixed
sleep, so a slow first reduction cannot leave a "Loading..." in the README.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NamedTuple, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS
from tests.support.tensorboard_process import TensorBoardProcess

WAIT = 120_000  # ms


class Shot(NamedTuple):
    view: str  # the view's tab (test id view-<view>)
    run: Optional[str]
    tag: Optional[str]
    ready: str  # test id of an element that holds the view's figures once they are rendered
    height: int  # viewport height, px
    name: str


SHOTS = [
    Shot("storage", "convnet_adam/train", None, "layer-table", 1250, "screenshot-storage.png"),
    Shot("ops", "tf1_convnet_adam", "step_1", "op-layer-table", 1500, "screenshot-ops.png"),
    Shot("timeline", "lenet_peak", "ops", "buffer-table", 1250, "screenshot-timeline.png"),
    Shot("growth", "seed004_kept/builds", "memory", "growth-models", 1500, "screenshot-growth.png"),
    Shot("ops", "gpt2_trainer", "ops", "op-layer-table", 1500, "screenshot-pytorch-ops.png"),
    Shot("load", None, None, "load-table", 1000, "screenshot-load.png"),
]


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logdir", default="demo_logs")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--out", default=os.path.join(root, "docs"))
    args = parser.parse_args()
    with TensorBoardProcess(args.logdir, load_fast=True) as tb, sync_playwright() as p:
        tb.wait_for_tab(expect_tags=4)
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1250})
        page.goto(f"{tb.url}/#modelmem")
        page.locator("iframe").first.wait_for(timeout=WAIT)
        page.screenshot()  # headless Chromium lays the plugin's iframe out once a frame is painted
        frame = page.frame_locator("iframe").first
        for shot in SHOTS:
            testid = lambda name: frame.locator(f'[data-testid="{name}"]')  # noqa: E731
            if not testid(f"view-{shot.view}").count() and shot.view == "load":
                print("skipped", shot.name, "(no load benchmark in this log dir)")
                continue
            page.set_viewport_size({"width": 1400, "height": shot.height})
            testid(f"view-{shot.view}").click(timeout=WAIT)
            if shot.run:
                testid("run-select").select_option(shot.run)
            if shot.tag:
                testid("tag-select").select_option(shot.tag)
            testid(shot.ready).locator('[role="row"]').nth(1).wait_for(timeout=WAIT)
            frame.locator("main").evaluate("() => window.scrollTo(0, 0)")
            page.wait_for_timeout(1500)  # charts animate in
            path = os.path.join(args.out, shot.name)
            page.screenshot(path=path)
            print("wrote", path)
        browser.close()


if __name__ == "__main__":
    main()
