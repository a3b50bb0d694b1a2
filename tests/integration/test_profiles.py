"""Issue 8 acceptance: old TF2 log dirs, read in place (profile sessions found by listing the log dir)."""

from __future__ import annotations

import glob
import gzip
import json
import os
import subprocess
import sys

import pytest

from tb_modelmem.plugin.sources.logdir_files import LogdirFiles
from tb_modelmem.plugin.sources.model_info import RunModel
from tb_modelmem.plugin.sources.profiles import ProfileSource
from tb_modelmem.readers.logdir import read_run
from tests import corpus
from tests.support import profile_fixtures, trace_fixtures
from tests.support.layer_time import rows_on_layers
from tests.support.plugin_harness import Served, layer_rows

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """keras-io's mnist_convnet.py with only keras.callbacks.TensorBoard(profile_batch=2)."""
    return corpus.make_logdir("mnist_convnet", "plain", tmp_path_factory.mktemp("plain"))


def test_a_plain_keras_profile_is_an_item_with_its_step_and_no_error(plain):
    served = Served(plain)
    listing = served.tags()
    assert all(info["error"] is None for info in listing.values()), listing  # graph-only tags are not errors
    (key,) = [key for key, info in listing.items() if info["origin"] == "profile"]
    assert key[0] == "train" and key[1].startswith("profile/")
    assert listing[key]["max_step"] == 2  # the trace_export Keras wrote with it ("batch_2")
    assert not [key for key, info in listing.items() if info["origin"] == "run_metadata"]  # "batch_2" holds graphs


def test_a_plain_keras_profile_shows_timed_ops_the_peak_and_the_model_layers(plain):
    served = Served(plain)
    (tag,) = [tag for (run, tag), info in served.tags().items() if info["origin"] == "profile"]
    body = served.json("/ops", run="train", tag=tag)
    ops = served.all_ops("train", tag)
    timed = [op for op in ops if op["time_us"] > 0]
    assert len(timed) >= 100
    assert body["peak_bytes"] > 0 and body["allocations"] == "large" and body["allocations_note"]
    # bytes are measured (the allocator), or unknown (no graph in this log dir): never a 0 claimed
    assert all(op["bytes_source"] == "measured" or op["new_bytes"] is None or op["new_bytes"] == 0 and
               op["op_type"] in ("ReadVariableOp", "Identity", "Reshape")
               for op in ops if op["bytes_source"] != "derived")
    assert any(op["bytes_source"] == "measured" and op["new_bytes"] for op in ops)
    # the layers of the model config the TensorBoard callback wrote; most forward and backward op time is on them
    layers = [row["layer"] for row in layer_rows(body) if row["layer"]]
    assert layers[:3] == ["sequential", "sequential/conv2d", "sequential/max_pooling2d"]
    fraction, elsewhere = rows_on_layers(ops, set(layers))
    assert fraction >= 0.9, (fraction, elsewhere)


def test_with_the_bfc_allocator_every_op_output_is_measured(tmp_path):
    base = tmp_path / "bfc"
    result = subprocess.run([sys.executable, "-m", "tests.corpus.harness", "mnist_convnet",
                             "--logdir", str(base / "logs"), "--out", str(base / "result.json"), "--mode", "plain"],
                            cwd=REPO, capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true", TF_CPP_MIN_LOG_LEVEL="3",
                                     PYTHONPATH=REPO))
    assert result.returncode == 0, result.stderr[-2000:]
    served = Served(str(base / "logs"))
    (tag,) = [tag for (run, tag), info in served.tags().items() if info["origin"] == "profile"]
    body = served.json("/ops", run="train", tag=tag)
    ops = served.all_ops("train", tag)
    assert body["allocations"] == "all"
    # Ground truth from the profile read with TensorFlow's own schema: every op it saw allocate an output.
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = glob.glob(str(base / "logs" / "train" / "plugins" / "profile" / "*" / "*.xplane.pb"))
    space = xplane_pb2.XSpace.FromString(open(path, "rb").read())
    allocating = set()
    for plane in space.planes:
        stat = {k: m.name for k, m in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                if plane.event_metadata[event.metadata_id].name != "MemoryAllocation":
                    continue
                stats = {stat[s.metadata_id]: (stat.get(s.ref_value) if s.HasField("ref_value") else s.str_value)
                         for s in event.stats}
                if stats.get("region_type") == "output" and stats.get("tf_op"):
                    allocating.add(stats["tf_op"].partition(":")[0])
    measured = {op["name"] for op in ops if op["bytes_source"] == "measured"}
    assert len(allocating) >= 50 and allocating <= measured
    peak = body["peak_by_category"]
    assert peak["activations"] > 0 and peak["gradients"] > 0


def test_without_onednn_the_peak_is_unknown_and_the_tab_says_how_to_record_it(tmp_path):
    """TensorFlow's default on AMD CPUs: no oneDNN, and then its default CPU allocator records no
    allocation at all. The ops are still timed; the peak is unknown (never 0), and the note names the
    setting that records every allocation."""
    base = tmp_path / "no_onednn"
    result = subprocess.run([sys.executable, "-m", "tests.corpus.harness", "mnist_convnet",
                             "--logdir", str(base / "logs"), "--out", str(base / "result.json"), "--mode", "plain"],
                            cwd=REPO, capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0", TF_CPU_ALLOCATOR_USE_BFC="false",
                                     TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO))
    assert result.returncode == 0, result.stderr[-2000:]
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = glob.glob(str(base / "logs" / "train" / "plugins" / "profile" / "*" / "*.xplane.pb"))
    space = xplane_pb2.XSpace.FromString(open(path, "rb").read())
    kernels = {plane.event_metadata[e.metadata_id].display_name for plane in space.planes for line in plane.lines
               for e in line.events}
    allocations = sum(1 for plane in space.planes for line in plane.lines for e in line.events
                      if plane.event_metadata[e.metadata_id].name == "MemoryAllocation")
    assert allocations == 0 and "_FusedConv2D" in kernels  # what TensorFlow wrote: no allocator, no oneDNN
    served = Served(str(base / "logs"))
    (tag,) = [tag for (run, tag), info in served.tags().items() if info["origin"] == "profile"]
    body = served.json("/ops", run="train", tag=tag)
    assert body["allocations"] == "none" and "TF_CPU_ALLOCATOR_USE_BFC=true" in body["allocations_note"]
    assert body["peak_bytes"] is None and all(v is None for k, v in body["peak_by_category"].items()
                                              if k not in ("unknown", "step_peak_bytes"))
    assert len([op for op in served.all_ops("train", tag) if op["time_us"] > 0]) >= 50


def _old_memory_profile(tmp_path, attempts: int = 6):
    """The JSON memory profile TF 2.3-2.10 wrote, made by XProf from a fresh LeNet profile, and
    its one allocator. XProf keeps only a few of a small step's allocations, and in about one
    capture in ten none of them is live at the peak (CI met one): such a capture cannot show
    what this test is about, so another is made, at most ``attempts`` in all."""
    import tensorflow as tf

    xprof = pytest.importorskip("xprof.convert.raw_to_tool_data")
    training = trace_fixtures.lenet_train_step(trace_fixtures.lenet_keras())
    for attempt in range(attempts):
        logdir = str(tmp_path / f"capture{attempt}")
        tf.profiler.experimental.start(logdir)
        for _ in range(2):
            training.step(*training.batch)
        tf.profiler.experimental.stop()
        (xplane,) = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
        data, _ = xprof.xspace_to_tool_data([xplane], "memory_profile", {})
        (allocator, profile), = json.loads(data)["memoryProfilePerAllocator"].items()
        if any(int(a["snapshotIndex"]) >= 0 for a in profile.get("activeAllocations", [])):
            return (data if isinstance(data, bytes) else data.encode()), profile
    pytest.fail(f"none of {attempts} LeNet profiles had an allocation of the step live at its peak")


def test_a_tf_2_3_to_2_10_memory_profile_shows_its_peak_and_live_allocations(tmp_path):
    data, profile = _old_memory_profile(tmp_path)
    session = profile_fixtures.session_dir(str(tmp_path / "logs"), "old")
    with open(os.path.join(session, "worker0.memory_profile.json.gz"), "wb") as f:
        f.write(gzip.compress(data))
    served = Served(str(tmp_path / "logs"))
    ((run, tag), info), = [(k, v) for k, v in served.tags().items()]
    assert "memory profile" in info["note"]
    body = served.json("/ops", run=run, tag=tag)
    assert body["peak_bytes"] == int(profile["profileSummary"]["peakStats"]["peakBytesInUse"])
    assert body["timed"] is False  # a memory profile has no op times: none are made up
    timeline = served.json("/timeline", run=run, tag=tag)
    live = [b for b in timeline["buffers"] if b["op"] and b["shape"] not in ("", "unknown")]
    assert sum(b["bytes"] for b in timeline["buffers"]) == body["peak_bytes"]
    assert live and all(b["dtype"] and b["region"] for b in live)
    active = [profile["memoryProfileSnapshots"][int(a["snapshotIndex"])]["activityMetadata"]["tfOpName"]
              for a in profile["activeAllocations"] if int(a["snapshotIndex"]) >= 0]
    assert sorted(b["op"] for b in live) == sorted(active)


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory):
    """Two profiled processes (TensorFlow profiler servers) traced into one session by client.trace."""
    logdir = str(tmp_path_factory.mktemp("two_hosts"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_CPU_ALLOCATOR_USE_BFC="true", PYTHONPATH=REPO)
    workers = [subprocess.Popen([sys.executable, "-m", "tests.support.profile_worker", str(port), str(units), "60"],
                                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
               for port, units in ((6311, 256), (6312, 2048))]
    try:
        for worker in workers:
            assert worker.stdout.readline().strip() == "ready"
        script = ("import tensorflow as tf; tf.profiler.experimental.client.trace("
                  f"'grpc://localhost:6311,grpc://localhost:6312', {logdir!r}, 3000)")
        result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
    finally:
        for worker in workers:
            worker.kill()
    return logdir


TWO_HOSTS_READ = """
import json, sys
from tests.support.plugin_harness import Served
served = Served(sys.argv[1])
((run, tag), info), = list(served.tags().items())
hosts = served.hosts(run, tag)
ops = {host: served.json("/ops", run=run, tag=tag, host=host)["host"] for host in info["hosts"]}
print(json.dumps({"info": info, "hosts": hosts, "ops": ops}))
"""


def test_a_two_host_session_shows_both_hosts_side_by_side(two_hosts):
    # Read in a child process: twice a CI worker running this read died of a segfault (the first in a reduce
    # thread beside JAX's gc callback, the second with its stacks cut off), which ended the whole run. Here
    # a crash fails this test alone, with the child's stacks (faulthandler) in the message.
    child = subprocess.run([sys.executable, "-X", "faulthandler", "-c", TWO_HOSTS_READ, two_hosts], cwd=REPO,
                           env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3"),
                           capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stderr[-6000:]
    answer = json.loads(child.stdout.splitlines()[-1])
    info, hosts = answer["info"], answer["hosts"]
    assert info["hosts"] == ["localhost_6311", "localhost_6312"]
    assert hosts["errors"] == [] and {row["host"] for row in hosts["rows"]} == set(info["hosts"])
    peaks = {row["host"]: row["peak_bytes"] for row in hosts["rows"]}
    assert peaks["localhost_6312"] > peaks["localhost_6311"]  # the wider model's host: the imbalance shows
    assert answer["ops"] == {host: host for host in info["hosts"]}


def test_profiles_are_found_through_tensorboards_filesystem_layer(tmp_path, lenet_xplane_bytes):
    """Not only local paths: an fsspec filesystem (gs:// works the same way) is listed and read alike."""
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/logs/run1/plugins/profile/2026_01_01_00_00_00/host0.xplane.pb", lenet_xplane_bytes)
    source = ProfileSource(LogdirFiles("memory://logs", reload_seconds=1), RunModel(_NoData()))
    (item,) = source.list(None, "")
    assert (item.run, item.tag, item.hosts) == ("run1", "profile/2026_01_01_00_00_00", ["host0"])
    trace = source.locate(None, "", item, None, None).build(_Job())
    assert len(trace.ops) > 100


def test_the_tab_opens_on_the_session_the_command_line_reads(tmp_path, profiled_lenet):
    """A run profiled twice (``tf.profiler`` names each session by its start) opens on its newest session, the one
    ``tb-modelmem estimate`` projects: the tab listed the oldest first."""
    for session in ("2026_01_02_00_00_00", "2026_01_01_00_00_00", "2026_01_01_12_00_00"):
        profile_fixtures.copy_profile(profiled_lenet.path, str(tmp_path), "train", session=session)
    (run,) = Served(str(tmp_path)).json("/runs")["runs"]
    assert [t["tag"] for t in run["tags"] if t["kind"] == "ops"] == [
        "profile/2026_01_02_00_00_00", "profile/2026_01_01_12_00_00", "profile/2026_01_01_00_00_00"]
    assert read_run(str(tmp_path), "train").source == "profile 2026_01_02_00_00_00 host worker0"


def test_a_profile_over_the_size_limit_is_a_clear_error_for_that_item(tmp_path, lenet_xplane_bytes):
    session = profile_fixtures.session_dir(str(tmp_path), "big")
    session = tmp_path / "big" / "plugins" / "profile" / "2026_01_01_00_00_00"
    (session / "host0.xplane.pb").write_bytes(lenet_xplane_bytes)
    served = Served(str(tmp_path), max_profile_bytes=1024)
    (tag,) = [tag for (_, tag) in served.tags()]
    response = served.settled("/ops", run="big", tag=tag)
    assert response.status_code == 422
    assert "--modelmem_max_profile_mb" in response.get_data(as_text=True)
    assert os.listdir(session) == ["host0.xplane.pb"]


def test_a_big_profile_is_reduced_off_the_request_thread(tmp_path, lenet_xplane_bytes):
    source = tmp_path / "small.xplane.pb"
    source.write_bytes(lenet_xplane_bytes)
    session = profile_fixtures.session_dir(str(tmp_path / "logs"), "long")
    size = profile_fixtures.big_xplane(str(source), os.path.join(session, "host0.xplane.pb"), 40 * 2**20)
    served = Served(str(tmp_path / "logs"))
    served.plugin.store._sync_wait = 0.0  # a request's 1 s wait made this depend on the machine's speed
    (tag,) = [tag for (_, tag) in served.tags()]
    first = served.get("/ops", run="long", tag=tag)
    assert first.status_code == 202, size  # reducing: the request did not wait for it
    assert json.loads(first.get_data())["state"] == "reducing"
    assert served.json("/runs")["runs"]  # the rest of the tab keeps answering meanwhile
    body = served.json("/ops", run="long", tag=tag)
    assert body["op_count"] > 100


class _NoData:
    """A data provider with nothing in it (the profile source asks it for model configs)."""

    def list_blob_sequences(self, *args, **kwargs):
        return {}

    def read_blob_sequences(self, *args, **kwargs):
        return {}


class _Job:
    def report(self, *args) -> None:
        pass


def test_a_log_dir_of_profiles_only_activates_the_tab(tmp_path, lenet_xplane_bytes):
    """tf.profiler.experimental.start(logdir) writes no event file: the tab still shows."""
    session = profile_fixtures.session_dir(str(tmp_path), ".")
    with open(os.path.join(session, "host0.xplane.pb"), "wb") as f:
        f.write(lenet_xplane_bytes)
    served = Served(str(tmp_path))
    assert served.plugin.is_active()
    assert [(run, tag.split("/")[0]) for run, tag in served.tags()] == [(".", "profile")]
