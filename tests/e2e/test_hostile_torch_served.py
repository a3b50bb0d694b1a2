"""Crafted PyTorch files on a real TensorBoard (issue 47's acceptance): while every crafted item is
asked for at once, ``/data/plugins_listing`` keeps answering within 5 s and a good trace beside them
within 30 s; every crafted item ends in a 4xx within 30 s (none left at 202); a good checkpoint read
after them gives torch's own bytes; TensorBoard stays under 1.5 GB RSS. One loader suffices: these
files are listed from the log dir, not read through the data provider."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import psutil
import pytest

from tb_modelmem.schema.names import WEIGHT
from tests.support import hostile_torch
from tests.support.paths import FIXTURES
from tests.support.tensorboard_process import TensorBoardProcess

GOOD_TRACE = "resnet50_adamw_b32.pt.trace.json.gz"
LISTING_S, GOOD_S, CRAFTED_S, MAX_RSS = 5.0, 30.0, 30.0, 1.5e9


def ask(tb: TensorBoardProcess, route: str, run: str, tag: str, within: float):
    """(status, body, seconds) of one item, polled as the tab polls while it answers 202."""
    url = f"{tb.url}/data/plugin/modelmem{route}?{urllib.parse.urlencode({'run': run, 'tag': tag})}"
    start = time.monotonic()
    while True:
        try:
            with urllib.request.urlopen(url, timeout=within) as response:
                status, body = response.status, response.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read().decode("utf-8", "replace")
        if status != 202 or time.monotonic() - start > within:
            return status, body, time.monotonic() - start
        time.sleep(0.2)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile_torch")
    reasons = hostile_torch.write(str(root / "crafted"))
    os.makedirs(root / "good")
    shutil.copy(os.path.join(FIXTURES, "torch_h100", GOOD_TRACE), root / "good" / GOOD_TRACE)
    shutil.copy(os.path.join(hostile_torch.TORCH, hostile_torch.GOOD_CHECKPOINT),
                root / "good" / hostile_torch.GOOD_CHECKPOINT)
    return str(root), reasons


def test_crafted_torch_items_never_hold_up_the_server(logdir):
    root, reasons = logdir
    with TensorBoardProcess(root, load_fast=False) as tb:
        tb.wait_for_tab(expect_tags=len(reasons) + 2)
        process = psutil.Process(tb.pid)
        listing_times, rss = [], [process.memory_info().rss]
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                start = time.monotonic()
                try:
                    tb.get("/data/plugins_listing")
                    listing_times.append(time.monotonic() - start)
                except Exception:
                    listing_times.append(float("inf"))
                rss.append(sum(p.memory_info().rss for p in [process] + process.children(recursive=True)))
                time.sleep(0.25)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            folders = {n for n in reasons if os.path.isdir(os.path.join(root, "crafted", n))}
            breakdowns = folders | {n for n in reasons if n.endswith((".pt", ".safetensors"))}
            crafted = {name: pool.submit(ask, tb, "/breakdown" if name in breakdowns else "/ops", "crafted",
                                         "torch/" + name + ("/" if name in folders else ""), CRAFTED_S)
                       for name in reasons}
            good = pool.submit(ask, tb, "/ops", "good", "torch/" + GOOD_TRACE, GOOD_S)
            answers = {name: future.result() for name, future in crafted.items()}
            good_status, good_body, good_seconds = good.result()
        checkpoint = ask(tb, "/breakdown", "good", "torch/" + hostile_torch.GOOD_CHECKPOINT, GOOD_S)
        stop.set()
        watcher.join()
    for name, (status, body, seconds) in answers.items():
        assert 400 <= status < 500 and re.search(reasons[name], body), (name, status, body[:300])
        assert seconds < CRAFTED_S, (name, seconds)
    assert good_status == 200 and good_seconds < GOOD_S, (good_status, good_body[:300])
    assert checkpoint[0] == 200, checkpoint[1][:300]
    assert json.loads(checkpoint[1])["totals"][WEIGHT] == hostile_torch.TRUTH["cnn_adam.pt"]["parameters"]
    assert listing_times and max(listing_times) < LISTING_S, sorted(listing_times)[-5:]
    assert max(rss) < MAX_RSS, max(rss)
    print(f"\nplugins_listing worst {max(listing_times):.2f} s over {len(listing_times)} asks; good trace "
          f"{good_seconds:.1f} s; worst crafted {max(s for _, _, s in answers.values()):.1f} s; "
          f"TensorBoard peak RSS {max(rss) / 2**20:.0f} MiB")
