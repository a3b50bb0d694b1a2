"""PyTorch memory snapshots (tests/fixtures/torch, made by make_torch_fixtures.py from a real CPU run):
the peak against the fixture script's truth and against a plain-Python count of the dict itself, and
pickles that try to run code, refused with nothing run. No torch needed."""

from __future__ import annotations

import gzip
import json
import os
import pickle

import pytest

from tb_modelmem.readers.bounded import InspectError
from tb_modelmem.readers.safe_pickle import UnsafePickle
from tb_modelmem.readers.torch_snapshot import SOURCE, load_snapshot, read_snapshot_file
from tb_modelmem.schema.names import BEFORE_WINDOW, UNATTRIBUTED_CATEGORY

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "torch")
TRUTH = json.load(open(os.path.join(HERE, "truth.json")))
CUDA_STYLE, PROFILE = "cnn_adam_cuda_style.pickle.gz", "cnn_adam_profile.pickle"


def _raw(name: str) -> dict:
    with open(os.path.join(HERE, name), "rb") as f:
        data = f.read()
    return pickle.loads(gzip.decompress(data) if name.endswith(".gz") else data)  # our own fixture: trusted


def plain_peak(snapshot: dict) -> int:
    """max_memory_allocated of the window, counted from the dict alone: what was allocated at the dump,
    walked back over the window to its start, then forward, a free counting at free_requested."""
    (trace,) = [t for t in snapshot["device_traces"] if t]
    at_dump = sum(b["size"] for s in snapshot["segments"] for b in s["blocks"] if b["state"] == "active_allocated")
    deltas = [e["size"] if e["action"] == "alloc" else -e["size"] for e in trace
              if e["action"] in ("alloc", "free_requested")]
    running = at_dump - sum(deltas)
    peak = running
    for d in deltas:
        running += d
        peak = max(peak, running)
    return peak


@pytest.mark.parametrize("name,truth_key", [(CUDA_STYLE, "max_memory_allocated"), (PROFILE, "peak_bytes")])
def test_peak_equals_plain_count_and_recorded_truth(name, truth_key):
    trace = read_snapshot_file(os.path.join(HERE, name))
    assert trace.source == SOURCE
    assert trace.peak_bytes == plain_peak(_raw(name)) == TRUTH[name][truth_key]
    assert max(trace.timeline.bytes) == trace.peak_bytes
    # every byte live at the peak is a buffer, in one category or its own unattributed/before-window row
    assert sum(trace.peak_buffers.column("bytes")) == trace.peak_bytes


def test_cuda_style_segments_and_categories():
    trace = read_snapshot_file(os.path.join(HERE, CUDA_STYLE))
    truth = TRUTH[CUDA_STYLE]
    (alloc,) = trace.allocators
    assert alloc["reserved_at_dump_bytes"] == truth["reserved_at_end"] == 4 * 2**20
    assert alloc["max_reserved_bytes"] == truth["max_reserved"]
    assert alloc["allocated_at_dump_bytes"] == truth["allocated_at_end"]
    assert alloc["fragmentation_at_peak"] == round((alloc["reserved_at_peak_bytes"] - trace.peak_bytes)
                                                   / alloc["reserved_at_peak_bytes"], 4)
    by = {}
    for size, category in zip(trace.peak_buffers.column("bytes"), trace.peak_buffers.column("category")):
        by[category] = by.get(category, 0) + size
    # what was allocated before the window (the parameters, Adam's state, the batch) has no stack in the
    # fixture: its own row, as big as torch's own categories for those say, never folded into another
    torch_cats = truth["peak_by_torch_category"]
    assert by[UNATTRIBUTED_CATEGORY] == (torch_cats["parameter"] + torch_cats["optimizer_state"] + torch_cats["input"]
                                + torch_cats["unknown"])
    # forward outputs kept for backward: torch calls some "autograd_detail" (saved for backward), we activations
    assert by["activations"] >= torch_cats["activation"]
    assert set(by) <= {"activations", "gradients", "temporaries", "optimizer_temporaries", UNATTRIBUTED_CATEGORY}
    ops = dict(zip(trace.ops.column("name"), trace.ops.column("alloc_bytes")))
    assert "make_torch_fixtures.py:59 train_step [optim.adam]" in ops
    assert sum(ops.values()) == sum(e["size"] for e in _raw(CUDA_STYLE)["device_traces"][0] if e["action"] == "alloc")


def test_profile_snapshot_uses_torchs_own_categories():
    trace = read_snapshot_file(os.path.join(HERE, PROFILE))
    by = {}
    for size, category in zip(trace.peak_buffers.column("bytes"), trace.peak_buffers.column("category")):
        by[category] = by.get(category, 0) + size
    torch_cats = TRUTH[PROFILE]["peak_by_torch_category"]
    assert by["activations"] == torch_cats["activation"]
    assert by["gradients"] == torch_cats["gradient"]
    assert by["temporaries"] == torch_cats["autograd_detail"] + torch_cats.get("temporary", 0)
    assert by[BEFORE_WINDOW] + by[UNATTRIBUTED_CATEGORY] == (torch_cats["parameter"] + torch_cats["optimizer_state"]
                                                     + torch_cats["input"] + torch_cats["unknown"])
    assert "reserved memory is unknown" in trace.allocators[0]["reserved_note"]


class _RunsShell:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


@pytest.mark.parametrize("gz", [False, True])
def test_hostile_pickle_runs_nothing(tmp_path, gz):
    marker = tmp_path / "ran"
    payload = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 512,
                                                   "frames": _RunsShell(f"touch {marker}")}]]}
    data = pickle.dumps(payload)
    path = tmp_path / ("evil.pickle.gz" if gz else "evil.pickle")
    path.write_bytes(gzip.compress(data) if gz else data)
    with pytest.raises(UnsafePickle, match=r"refused: it names (posix|os)\.system"):
        read_snapshot_file(str(path))
    assert not marker.exists()


# ids name the case: the bytes would make a gzip's header time part of the id, and two test workers that
# collect in different seconds would then disagree on the tests (pytest-xdist refuses to run).
@pytest.mark.parametrize("data,match", [
    (b"\x80\x04\x95", "not a readable pickle"),  # truncated
    (pickle.dumps([1, 2, 3])[:-1], "not a readable pickle"),
    (pickle.dumps({"not": "a snapshot"}), "not a PyTorch memory snapshot"),
    (pickle.dumps({"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": -5}]]}),
     "expected bytes >= 0"),
    (gzip.compress(pickle.dumps({"segments": []}), mtime=0)[:-9], "truncated gzip"),
], ids=["truncated", "cut pickle", "foreign dict", "negative size", "truncated gzip"])
def test_faults_are_one_clear_error(tmp_path, data, match):
    path = tmp_path / "bad.pickle"
    path.write_bytes(data)
    with pytest.raises(InspectError, match=match):
        read_snapshot_file(str(path))


def test_gzip_bomb_is_refused():
    bomb = gzip.compress(b"\0" * (4 << 20))
    with pytest.raises(InspectError, match="inflates past"):
        load_snapshot(bomb, "bomb.pickle.gz", limit=1 << 20)


def test_log_dir_files_served_in_place(tmp_path):
    """A snapshot, a checkpoint and a hostile pickle in a log dir: the first two shown, the third its own error."""
    import shutil

    from tests.support.plugin_harness import Served

    run = tmp_path / "torch_run"
    run.mkdir()
    shutil.copy(os.path.join(HERE, CUDA_STYLE), run / CUDA_STYLE)
    shutil.copy(os.path.join(HERE, "cnn_adam.pt"), run / "cnn_adam.pt")
    marker = tmp_path / "ran"
    (run / "evil.pickle").write_bytes(pickle.dumps({"segments": _RunsShell(f"touch {marker}")}))
    served = Served(str(tmp_path))
    assert served.plugin.is_active()
    tags = {t["tag"]: t for r in served.json("/runs")["runs"] for t in r["tags"]}
    assert {"torch/" + CUDA_STYLE, "torch/cnn_adam.pt", "torch/evil.pickle"} <= set(tags)
    ops = served.json("/ops", run="torch_run", tag="torch/" + CUDA_STYLE)
    assert ops["source"] == SOURCE
    timeline = served.json("/timeline", run="torch_run", tag="torch/" + CUDA_STYLE)
    assert max(timeline["bytes"]) == timeline["peak_bytes"] == TRUTH[CUDA_STYLE]["max_memory_allocated"]
    storage = served.json("/breakdown", run="torch_run", tag="torch/cnn_adam.pt")
    assert storage["source"] == "pytorch checkpoint"
    bad = served.settled("/ops", run="torch_run", tag="torch/evil.pickle")
    assert bad.status_code == 422 and "refused" in bad.get_data(as_text=True)
    assert not marker.exists()
