"""tb_modelmem.trace (tracing.py): profile real LeNet steps into an op-trace summary; never stop training."""

from __future__ import annotations

import glob
import os
import shutil

import pytest
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

import tb_modelmem
from tb_modelmem.schema import metadata, payload
from tb_modelmem.schema.names import DERIVED
from tb_modelmem.schema.records import OpTrace
from tb_modelmem.tracing import Trace
from tests.support import trace_fixtures
from tests.support.trace_fixtures import CONV1_BYTES


@pytest.fixture(scope="module")
def lenet():
    """(train_step, batch): a traced LeNet training step, batch 1."""
    return trace_fixtures.lenet_train_step(trace_fixtures.lenet_keras())


def profiler_is_idle() -> bool:
    """True if nobody holds the profiler (starting and stopping one works)."""
    import tensorflow as tf

    try:
        tf.profiler.experimental.start(os.devnull + "_unused")
    except tf.errors.AlreadyExistsError:
        return False
    tf.profiler.experimental.stop(save=False)
    return True


def conv1(record: OpTrace):
    (op,) = [op for op in record.ops if op.fused == ["Conv2D", "BiasAdd", "Relu"] and
             op.output_bytes == CONV1_BYTES and not op.name.startswith("gradient_tape/")]
    return op


def test_trace_writes_the_op_table_at_the_step_and_cleans_up(tmp_path, lenet):
    import tensorflow as tf

    train_step, batch, _ = lenet
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    with tf.summary.create_file_writer(str(tmp_path / "logs")).as_default():
        with tb_modelmem.trace("ops", step=3, function=train_step, tmpdir=str(profiles)) as t:
            train_step(*batch)
            train_step(*batch)
    assert os.listdir(profiles) == []
    (path,) = glob.glob(str(tmp_path / "logs" / "events.out.tfevents.*"))
    written = [(e.step, v) for e in EventFileLoader(path).Load() for v in e.summary.value
               if v.metadata.plugin_data.plugin_name == metadata.PLUGIN_NAME]
    assert [(step, v.tag) for step, v in written] == [(3, "ops")]
    record = payload.decode(written[0][1].tensor.string_val[0])
    trace_fixtures.assert_stored_as(record, t.record)
    assert (conv1(record).output_bytes, conv1(record).bytes_source, record.steps) == (CONV1_BYTES, DERIVED, 2)
    assert 0 < len(payload.encode(record)) < t.xplane_bytes


def test_start_stop_api_for_callbacks(lenet):
    import tensorflow as tf

    train_step, batch, _ = lenet
    window = Trace("ops", step=1, function=train_step)
    assert window.start() and window.active
    train_step(*batch)
    with tf.summary.create_noop_writer().as_default(), pytest.warns(RuntimeWarning, match="was not written"):
        record = window.stop()
    assert record is window.record and conv1(record).calls == 1
    assert not window.active and window.stop() is None


def test_a_window_of_keras_fit_steps_from_a_callback(tmp_path):
    import numpy as np
    import tensorflow as tf

    model = trace_fixtures.lenet_keras()
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    class ProfileSteps(tf.keras.callbacks.Callback):
        """What a ``profile_steps=(2, 3)`` option does: start before step 2, stop after step 3."""

        def on_train_batch_begin(self, batch, logs=None):
            if batch == 2:
                self.window = Trace("ops", step=batch, function=self.model.train_function)
                self.window.start()

        def on_train_batch_end(self, batch, logs=None):
            if batch == 3:
                self.window.stop()

    callback = ProfileSteps()
    with tf.summary.create_file_writer(str(tmp_path)).as_default():
        model.fit(np.ones((6, 28, 28, 1), np.float32), np.zeros((6,), np.int32), batch_size=1, verbose=0,
                  callbacks=[callback])
    record = callback.window.record
    assert record.steps == 2 and conv1(record).calls == 2
    # Keras 3 traces a layer under a uniquified scope; the row still names the layer owning the kernel.
    assert conv1(record).layer.endswith(f"{model.name}/{model.layers[0].name}")


def test_profiler_already_running_warns_and_the_step_runs(tmp_path, lenet):
    import tensorflow as tf

    train_step, batch, _ = lenet
    tf.profiler.experimental.start(str(tmp_path / "theirs"))
    try:
        with pytest.warns(RuntimeWarning, match="could not start the profiler"):
            with tb_modelmem.trace("ops", step=0, function=train_step) as t:
                loss = train_step(*batch)
        assert loss.shape == () and t.record is None
    finally:
        tf.profiler.experimental.stop()  # still theirs to stop: trace() left it running


def test_unwritable_tmpdir_warns_and_the_step_runs(tmp_path, lenet):
    train_step, batch, _ = lenet
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    with pytest.warns(RuntimeWarning, match="could not start the profiler"):
        with tb_modelmem.trace("ops", step=0, tmpdir=str(not_a_dir / "sub")) as t:
            loss = train_step(*batch)
    assert loss.shape == () and t.record is None
    assert profiler_is_idle()


def test_profile_dir_lost_mid_step_warns_and_releases_the_profiler(lenet):
    train_step, batch, _ = lenet
    with pytest.warns(RuntimeWarning, match="could not record the trace"):
        with tb_modelmem.trace("ops", step=0) as t:
            train_step(*batch)
            profile_dir = t._dir
            shutil.rmtree(profile_dir)
            open(profile_dir, "w").close()  # the profiler can no longer write there
    os.remove(profile_dir)
    assert t.record is None and profiler_is_idle()


def test_exception_in_the_body_propagates_unchanged(tmp_path, lenet):
    train_step, batch, _ = lenet
    error = ValueError("the step itself failed")
    with pytest.raises(ValueError) as raised, pytest.warns(RuntimeWarning, match="was not written"):
        with tb_modelmem.trace("ops", step=0, tmpdir=str(tmp_path)):
            train_step(*batch)
            raise error
    assert raised.value is error
    assert os.listdir(tmp_path) == [] and profiler_is_idle()


def test_full_memory_trace_must_come_before_tensorflow_starts(monkeypatch):
    """In a fresh process it takes effect (the BFC allocator records every allocation); here it is too late."""
    import subprocess
    import sys

    import tensorflow as tf

    import tb_modelmem

    tf.constant(1)  # this process's TensorFlow has started
    # undone after the test with what the call sets: later subprocesses inherit the environment
    monkeypatch.setenv("TF_CPU_ALLOCATOR_USE_BFC", "false")
    with pytest.warns(RuntimeWarning, match="came after TensorFlow started"):
        assert tb_modelmem.enable_full_memory_trace() is False
    script = ("import tb_modelmem; ok = tb_modelmem.enable_full_memory_trace(); import tensorflow as tf; "
              "x = tf.zeros([1024]); print(ok, tf.config.experimental.get_memory_info('CPU:0')['current'] >= 4096)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env={k: v for k, v in os.environ.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"})
    assert result.stdout.split() == ["True", "True"], result.stderr[-2000:]  # only BFC keeps CPU statistics


def test_a_step_traced_again_reuses_its_graph_reading_until_the_graph_changes(lenet):
    """A loop profiled every N steps reads its graphs once; a retraced function or a TF1 graph
    that grew is read again (the cache never answers for graphs it did not read)."""
    import tensorflow as tf

    from tb_modelmem.capture import opgraph

    train_step, batch, _ = lenet
    first = opgraph.graph_info(train_step)
    assert opgraph.graph_info(train_step) is first
    assert set(first.outputs) == set(opgraph._read_graphs([g for _, g in opgraph._graphs_of(train_step)], {}).outputs)

    @tf.function
    def scaled(x):
        return x * 2.0

    scaled(tf.ones([2]))
    one = opgraph.graph_info(scaled)
    scaled(tf.ones([3, 3]))  # a second signature: a second concrete function
    two = opgraph.graph_info(scaled)
    assert two is not one and len(two.graphs) == len(one.graphs) + 1

    graph = tf.Graph()
    with graph.as_default():
        tf.constant(1.0, name="a")
    before = opgraph.graph_info(graph)
    with graph.as_default():
        tf.constant(2.0, name="b")
    after = opgraph.graph_info(graph)
    assert "b" not in before.outputs and "b" in after.outputs


def test_only_the_traces_of_a_function_that_ran_are_read(tmp_path, lenet):
    """The first call of a training step that creates the optimizer's slots leaves TensorFlow
    with two traces of it; a profiled step runs only the later one, and only its graphs (with
    the functions it calls) are read. Reading both cost a ResNet50 step twice the graph work."""
    import tensorflow as tf

    from tb_modelmem.capture import opgraph
    from tb_modelmem.readers import xspace

    train_step, batch, _ = lenet
    traces = {f.name.decode(): f for f in train_step._list_all_concrete_functions()}
    assert len(traces) == 2, sorted(traces)
    called = train_step.get_concrete_function(*batch).name.decode()  # TensorFlow's answer: the trace a step calls
    folder = str(tmp_path / "profile")
    tf.profiler.experimental.start(folder)
    train_step(*batch)
    tf.profiler.experimental.stop()
    (path,) = glob.glob(os.path.join(folder, "**", "*.xplane.pb"), recursive=True)
    ran = xspace.functions_run(xspace.load_xspace(path))
    assert called in ran and not ran & (set(traces) - {called}), (called, ran)

    info = opgraph.graph_info(train_step, ran=ran)
    only_called = opgraph._read_graphs([traces[called].graph], {})
    both = opgraph._read_graphs([f.graph for f in traces.values()], {})
    assert set(info.outputs) == set(only_called.outputs)
    assert set(info.outputs) < set(both.outputs)
    assert opgraph.graph_info(train_step, ran={"__inference_nothing_that_ran_1"}).outputs.keys() == both.outputs.keys()


def test_two_traces_of_the_same_step_give_the_same_table(tmp_path, lenet):
    """The second reduction reuses the first one's graph analysis; every op lands on the same
    layer and phase (whether the allocator reported an op's bytes may differ run to run)."""
    import tensorflow as tf

    train_step, batch, _ = lenet
    records = []
    with tf.summary.create_file_writer(str(tmp_path)).as_default():
        for step in (1, 2):
            with tb_modelmem.trace("ops", step=step, function=train_step) as t:
                train_step(*batch)
            records.append(t.record)
    # The CPU profiler now and then drops an event at a window's edge (CI lost step 1's first
    # Identity and ReadVariableOp once), so the ops both traces saw are compared.
    places = [dict(zip(r.ops.column("name"), zip(r.ops.column("layer"), r.ops.column("phase")))) for r in records]
    both = places[0].keys() & places[1].keys()
    assert len(both) >= 0.95 * max(len(p) for p in places), [sorted(p.keys() - both) for p in places]
    assert {n: places[0][n] for n in both} == {n: places[1][n] for n in both}
    assert sum(1 for n in both if places[0][n][1] == "forward") > 5


def test_the_graphs_read_before_the_profile_are_a_guess_the_profile_overrules(tmp_path):
    """trace() reads the newest trace of a tf.function while TensorFlow writes the profile; when
    the step ran an older trace (another input shape), the table takes that trace's shapes."""
    import tensorflow as tf

    from tb_modelmem.capture import opgraph

    weights = tf.Variable(tf.ones([3, 4]))

    @tf.function
    def project(x):
        return tf.matmul(x, weights, name="project")

    small, large = tf.ones([2, 3]), tf.ones([5, 3])
    project(small)
    project(large)  # the newest trace: the guess
    (guess,) = opgraph.likely_run(project)
    assert guess == project.get_concrete_function(large).name.decode()

    with tf.summary.create_file_writer(str(tmp_path)).as_default():
        with tb_modelmem.trace("ops", step=0, function=project) as window:
            project(small)
    (op,) = [op for op in window.record.ops if op.name == "project"]  # a MatMul (oneDNN's _MklMatMul here)
    assert op.bytes_source == DERIVED
    assert (op.output_shape, op.output_bytes) == ("[2,4]", 2 * 4 * 4)  # float32 [2, 4], not [5, 4]


def test_a_model_that_cannot_be_read_warns_once_and_the_trace_is_still_written(tmp_path, lenet):
    """Reading the model fails in the thread that reads it during the profile export, silently,
    and again after: one warning, and the table is written with the ops' scope names."""
    import tensorflow as tf

    class Unreadable:
        @property
        def variables(self):
            raise RuntimeError("no variables here")

    train_step, batch, _ = lenet
    with tf.summary.create_file_writer(str(tmp_path)).as_default():
        with pytest.warns(RuntimeWarning) as caught:
            with tb_modelmem.trace("ops", step=1, function=train_step, model=Unreadable()) as window:
                train_step(*batch)
    messages = [str(w.message) for w in caught]
    assert sum("could not read the model's layers" in m for m in messages) == 1, messages
    assert window.record is not None and len(window.record.ops) > 20
    assert glob.glob(str(tmp_path / "events.out.tfevents.*"))
