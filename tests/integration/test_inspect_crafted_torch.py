"""Crafted PyTorch files through ``tb-modelmem inspect`` (issue 47): each run in a fresh process under a
1 GiB address-space limit and a 30 s timeout ends in exit 2 with one line on stderr naming the file,
and nothing it holds runs. The worst time and peak RSS are printed at the end."""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.support import hostile_torch
from tests.support.inspect_runner import ADDRESS_SPACE, TIMEOUT_S, report_worst, run_inspect

MEASURED = {}  # name -> (seconds, peak RSS bytes)


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("crafted"))
    return folder, hostile_torch.write(folder)


@pytest.mark.parametrize("name", sorted(hostile_torch.CASES))
def test_crafted_torch_file_is_one_line_naming_it_exit_2(name, crafted):
    folder, reasons = crafted
    path = os.path.join(folder, name)
    code, out, err, seconds, rss = run_inspect(path)
    MEASURED[name] = (seconds, rss)
    lines = err.splitlines()
    assert code == 2 and out == "" and len(lines) == 1, (name, code, err[-2000:])
    assert lines[0].startswith("tb-modelmem: error: ") and path in lines[0], lines[0]
    assert re.search(reasons[name], lines[0]), (name, lines[0])
    assert "Traceback" not in err and "MemoryError" not in err
    assert seconds < TIMEOUT_S and rss < ADDRESS_SPACE, (name, seconds, rss)


def test_the_real_torch_files_inspect_exactly_under_the_same_limits():
    for name in (hostile_torch.GOOD_CHECKPOINT, hostile_torch.GOOD_SNAPSHOT):
        code, out, err, seconds, rss = run_inspect(os.path.join(hostile_torch.TORCH, name))
        assert code == 0, (name, err[-2000:])
        MEASURED[f"(real {name})"] = (seconds, rss)
    code, out, _, _, _ = run_inspect(os.path.join(hostile_torch.TORCH, hostile_torch.GOOD_CHECKPOINT), "--json")
    assert json.loads(out)["by_role"]["weight"] == hostile_torch.TRUTH["cnn_adam.pt"]["parameters"]


def test_worst_time_and_memory_are_reported():
    if not MEASURED:
        pytest.skip("no case ran")
    worst_seconds, worst_rss = report_worst(MEASURED, "crafted PyTorch files through inspect")
    assert worst_seconds < TIMEOUT_S and worst_rss < ADDRESS_SPACE
