"""Crafted PyTorch files (issue 47; ``tests/support/hostile_torch.py`` writes them): each is one clear
error that runs nothing, none changes how a later file reads in the same process, and the plugin
serves each as its own 422 beside the real files, whose figures stay torch's own (truth.json)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil

import pytest

from tb_modelmem.plugin.sources import torch_files
from tb_modelmem.readers import torch_trace
from tb_modelmem.readers.bounded import InspectError, read_file
from tb_modelmem.readers.model_file import read_path
from tb_modelmem.readers.torch_snapshot import read_snapshot_file
from tb_modelmem.rules import phases
from tb_modelmem.schema.names import NON_TRAINABLE, OPTIMIZER_SLOT, WEIGHT
from tb_modelmem.schema.records import bytes_by_role
from tests.support import hostile_torch
from tests.support.plugin_harness import Served

GOOD = hostile_torch.TRUTH[hostile_torch.GOOD_CHECKPOINT]


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("logs") / "crafted")
    return folder, hostile_torch.write(folder)


def read_as_inspect_would(path):
    """The reader ``inspect`` uses for the file's kind."""
    if path.endswith((".pickle", ".pickle.gz")):
        return read_snapshot_file(path)
    if torch_trace.is_trace_name(path):
        return torch_trace.reduce_trace(torch_trace.load(read_file(path, 1 << 30, "trace")))
    return read_path(path)


def good_checkpoint_roles():
    bd = read_path(os.path.join(hostile_torch.TORCH, hostile_torch.GOOD_CHECKPOINT))
    return {role: size for role, size in bytes_by_role(bd.variables).items()
            if role in (WEIGHT, NON_TRAINABLE, OPTIMIZER_SLOT)}


def test_every_class_of_crafted_file_is_there(crafted):
    _, reasons = crafted
    kinds = {"build_", "hash_bomb_", "costly_key", "laughs_", "bomb.pickle.gz", "shape_past", "offset_past", "cycle",
             "deep_nesting", "z.", "fifo.", "header_past_file.safetensors", "dcp_", "trainer_"}
    assert all(any(name.startswith(kind) for name in reasons) for kind in kinds)
    assert len(reasons) >= 25


def test_each_crafted_file_is_one_error_naming_it_and_a_good_checkpoint_read_after_it_is_exact(crafted):
    """One process, as a server is: every crafted file in turn, then the good checkpoint, to the byte."""
    folder, reasons = crafted
    truth = {WEIGHT: GOOD["parameters"], NON_TRAINABLE: GOOD["buffers"],
             OPTIMIZER_SLOT: sum(v for k, v in GOOD["optimizer_state"].items() if k != "step")}
    assert good_checkpoint_roles() == truth
    for name, reason in reasons.items():
        path = os.path.join(folder, name)
        with pytest.raises(InspectError) as caught:
            read_as_inspect_would(path)
        message = str(caught.value)
        assert re.search(reason, message) and path in message and "\n" not in message, (name, message)
        assert len(message) < 1000, (name, len(message))
        assert good_checkpoint_roles() == truth, f"{name} changed how the next checkpoint reads"


def test_a_truncated_legacy_checkpoint_is_refused_after_the_crafted_ones(crafted, tmp_path):
    """The issue's symptom of shared state: after a BUILD on a stand-in, a damaged file read as whole."""
    folder, reasons = crafted
    for name in [n for n in reasons if n.startswith("build_")]:
        with pytest.raises(InspectError):
            read_path(os.path.join(folder, name))
    cut = tmp_path / "cut.pt"
    data = open(os.path.join(hostile_torch.TORCH, "cnn_state_dict_legacy.pt"), "rb").read()
    cut.write_bytes(data[:-100])
    with pytest.raises(InspectError, match="truncated"):
        read_path(str(cut))


def test_the_plugin_serves_each_crafted_file_as_its_own_422_beside_the_real_ones(crafted):
    folder, reasons = crafted
    logdir = os.path.dirname(folder)
    real = os.path.join(logdir, "real")
    os.makedirs(real, exist_ok=True)
    for name in (hostile_torch.GOOD_CHECKPOINT, hostile_torch.GOOD_SNAPSHOT):
        shutil.copy(os.path.join(hostile_torch.TORCH, name), os.path.join(real, name))
    served = Served(logdir)
    tags = {(run, tag) for run, tag in served.tags()}
    for name, reason in reasons.items():
        is_folder = os.path.isdir(os.path.join(folder, name))
        tag = "torch/" + name + ("/" if is_folder else "")
        assert ("crafted", tag) in tags, name
        route = "/breakdown" if is_folder or name.endswith((".pt", ".safetensors")) else "/ops"
        answer = served.settled(route, run="crafted", tag=tag)
        body = answer.get_data(as_text=True)
        assert answer.status_code == 422 and re.search(reason, body), (name, answer.status_code, body[:300])
        assert folder not in body, body  # the item is named by run and tag, not by a path on the server
    storage = served.json("/breakdown", run="real", tag="torch/" + hostile_torch.GOOD_CHECKPOINT)
    assert storage["totals"][WEIGHT] == GOOD["parameters"] and storage["totals"][NON_TRAINABLE] == GOOD["buffers"]
    timeline = served.json("/timeline", run="real", tag="torch/" + hostile_torch.GOOD_SNAPSHOT)
    assert timeline["peak_bytes"] == hostile_torch.TRUTH[hostile_torch.GOOD_SNAPSHOT]["max_memory_allocated"]


def test_crafted_names_and_events_that_are_still_readable(tmp_path):
    """A lone surrogate in a parameter's name reads escaped (JSON and terminals take it); an optimizer.pt whose
    param group lists a list for a parameter reads with its slots untied, and says why; a trace's
    malformed events (an unhashable pid, Addr or correlation, a 1e308 total, a time of 1e300 us) are
    skipped and counted, and the rest of the trace reads as it does without them."""
    expected = hostile_torch.write_readable(str(tmp_path / "run"))
    bd = read_path(str(tmp_path / "run" / "surrogate_name.pt"))
    names = [v.name for v in bd.variables]
    assert expected["surrogate_name.pt"] in names
    json.dumps(names).encode("utf-8")
    assert bytes_by_role(bd.variables)[WEIGHT] == GOOD["parameters"]
    path = str(tmp_path / "run" / "malformed_events.pt.trace.json")
    trace = torch_trace.reduce_trace(torch_trace.load(read_file(path, 1 << 30, "trace")))
    assert expected["malformed_events.pt.trace.json"] in trace.allocations_note
    events = json.load(open(path))["traceEvents"]
    totals = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"
              and isinstance(e.get("args", {}).get("Total Allocated"), (int, float))
              and e["args"]["Total Allocated"] < 1e300 and e["args"].get("Device Type") == 1]
    assert trace.peak_bytes <= max(totals) and trace.peak_bytes < 1 << 50
    listed = read_path(str(tmp_path / "run" / "listed_lists"))  # a Trainer folder: its optimizer read, untied
    assert any(expected["listed_lists"] in line["what"] for line in listed.overhead), listed.overhead
    assert listed.optimizer is not None and listed.optimizer["config"]["lr"] == 1
    served = Served(str(tmp_path))
    tags = {tag for _, tag in served.tags()}  # a name whose digit int() refuses sorts, and lists, like any other
    assert {"torch/surrogate_name.pt", "torch/a1\u00b2.1.pt.trace.json"} <= tags
    storage = served.json("/breakdown", run="run", tag="torch/surrogate_name.pt")
    assert storage["totals"][WEIGHT] == GOOD["parameters"]
    assert served.json("/ops", run="run", tag="torch/malformed_events.pt.trace.json")["peak_bytes"] == trace.peak_bytes


def test_the_listing_reads_a_small_trace_within_its_cap(tmp_path):
    """A run's newest traces that hold no ops are listed after the first that holds some (the one the CLI reads):
    each is read as the log dir is listed while it is small, ``SMALL_TRACE_BYTES`` on disk and inflated. A 55 KB
    gzip of 20,000 ops nested at one instant (1.9 MB of JSON) is taken to hold ops, unread past the cap; read when
    opened, it is one op, its nest walked at once (the innermost op was searched for down the nest, quadratic:
    6.9 s for these 20,000, about an hour for what 64 KiB of gzip holds)."""
    run = tmp_path / "run"
    run.mkdir()
    nested = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10**6 - i}
              for i in range(20_000)]
    memory = {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5, "s": "t",
              "args": {"Total Allocated": 64, "Bytes": 64, "Device Id": -1, "Device Type": 0, "Addr": 1}}
    files = {"w.1.pt.trace.json": {"traceEvents": [dict(nested[0], dur=10), memory]},  # one op: holds ops
             "w.2.pt.trace.json.gz": {"traceEvents": nested + [memory]},
             "w.3.pt.trace.json": {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1}]}}  # no op
    for age, (name, trace) in enumerate(reversed(files.items())):
        data = json.dumps(trace).encode()
        (run / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        os.utime(run / name, (1e9 - age, 1e9 - age))
    snapshot = run / hostile_torch.GOOD_SNAPSHOT  # the newest file, which the CLI does not read: after the traces
    shutil.copy(os.path.join(hostile_torch.TORCH, hostile_torch.GOOD_SNAPSHOT), snapshot)
    os.utime(snapshot, (2e9, 2e9))
    assert os.path.getsize(run / "w.2.pt.trace.json.gz") < torch_files.SMALL_TRACE_BYTES  # small on disk
    assert len(json.dumps(files["w.2.pt.trace.json.gz"])) > 20 * torch_files.SMALL_TRACE_BYTES
    served = Served(str(tmp_path))
    listed = [(tag, info["note"]) for (_, tag), info in served.tags("run").items()]
    assert [tag for tag, _ in listed] == ["torch/w.2.pt.trace.json.gz", "torch/w.1.pt.trace.json",
                                          "torch/w.3.pt.trace.json", "torch/" + hostile_torch.GOOD_SNAPSHOT]
    assert "holds no ops" in listed[2][1] and "holds no ops" not in listed[0][1] + listed[1][1]
    nest = torch_trace.reduce_trace(torch_trace.load(read_file(str(run / "w.2.pt.trace.json.gz"), 1 << 30, "trace")))
    assert len(nest.ops) == 1 and nest.peak_bytes == 64


def test_a_crafted_module_nest_gives_each_op_a_bounded_layer_path():
    """600 nested ``nn.Module:`` ranges of 100-character names around three ops made each op a 51,711-character
    layer path of its own (a million such ops, about 10 MB gzipped, would have held 50 GB): at most 512 ranges are
    kept open, and a path keeps its innermost ``MAX_LAYER_PATH`` characters."""
    names = [f"{i:03d}" + "m" * 97 for i in range(600)]
    ranges = [{"ph": "X", "cat": "python_function", "name": "nn.Module: " + name, "pid": 1, "tid": 1, "ts": i,
               "dur": 10**6 - 2 * i} for i, name in enumerate(names)]
    ops = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1000 + 10 * i, "dur": 5}
           for i in range(3)]
    trace = torch_trace.reduce_trace({"traceEvents": ranges + ops})
    layers = list(trace.ops.column("layer"))  # the three ops' one row
    assert layers and all(len(layer) == phases.MAX_LAYER_PATH for layer in layers), [len(x) for x in layers]
    innermost = names[torch_trace.MAX_OPEN_RANGES - 1]  # the last range kept open
    assert all(layer.endswith("/" + innermost) for layer in layers)
