"""MemoryCallback in real model.fit runs; event files read back and decoded."""

import glob
import os
import warnings

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

from tb_modelmem.callbacks import MemoryCallback
from tb_modelmem.schema import metadata, names, payload, records

X = np.zeros((6, 8), "float32")
Y = np.zeros((6,), "int64")  # 3 batches of 2 per epoch


def model_and_data():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, name="hidden"),
                              keras.layers.Dense(3, name="logits")], name="mlp")
    model.compile(keras.optimizers.Adam(), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def fit(model, callback, epochs=2):
    return model.fit(X, Y, batch_size=2, epochs=epochs, verbose=0, callbacks=[callback])


def written(run_dir, kinds=(metadata.BREAKDOWN, metadata.OPS)):
    """[(step, tag, record)] of the tb_modelmem summaries of ``kinds`` in ``run_dir``."""
    found = []
    for path in sorted(glob.glob(os.path.join(run_dir, "events.out.tfevents.*"))):
        for event in EventFileLoader(path).Load():
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == metadata.PLUGIN_NAME:
                    record = payload.decode(value.tensor.string_val[0])
                    if payload.kind_of(record) in kinds:
                        found.append((event.step, value.tag, record))
    return found


def test_records_once_after_first_batch(tmp_path):
    model = model_and_data()
    fit(model, MemoryCallback(str(tmp_path)))  # 2 epochs x 3 batches
    ((step, tag, found),) = written(tmp_path / "train")
    assert (step, tag) == (1, "storage")
    assert isinstance(found, records.Breakdown) and found.model_name == "mlp"
    weight_bytes = sum(v.bytes for v in found.variables if v.role == names.WEIGHT)
    slot_bytes = sum(v.bytes for v in found.variables if v.role == names.OPTIMIZER_SLOT)
    assert weight_bytes == ((8 + 1) * 16 + (16 + 1) * 3) * 4
    assert slot_bytes == 2 * weight_bytes  # the optimizer was built when the callback recorded
    assert found.optimizer["class_name"] == "Adam"
    assert [layer.derivation for layer in found.layers] == ["(8+1)*16 = 144", "(16+1)*3 = 51"]


def test_records_again_only_when_variables_change(tmp_path):
    model = model_and_data()
    callback = MemoryCallback(str(tmp_path), name="mem", subdir="storage_run")
    fit(model, callback)  # steps 1..6: recorded at 1
    fit(model, callback)  # steps 7..12: same variables, nothing new
    model.get_layer("hidden").trainable = False
    model.compile(keras.optimizers.Adam(), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    fit(model, callback, epochs=1)  # steps 13..15: new optimizer, fewer slots: recorded at 13
    found = written(tmp_path / "storage_run")
    assert [(step, tag) for step, tag, _ in found] == [(1, "mem"), (13, "mem")]
    roles = [{v.name: v.role for v in b.variables} for _, _, b in found]
    assert roles[0]["mlp/hidden/kernel"] == names.WEIGHT
    assert roles[1]["mlp/hidden/kernel"] == names.NON_TRAINABLE
    slots = [sum(v.role == names.OPTIMIZER_SLOT for v in b.variables) for _, _, b in found]
    assert slots == [8, 4]


def test_change_without_new_optimizer_is_recorded_at_epoch_end(tmp_path):
    model = model_and_data()
    callback = MemoryCallback(str(tmp_path))
    fit(model, callback, epochs=1)  # steps 1..3: recorded at 1
    model.get_layer("logits").trainable = False  # no recompile: same optimizer, same slots
    fit(model, callback, epochs=1)  # steps 4..6: noticed when the epoch ends
    found = written(tmp_path / "train")
    assert [step for step, _, _ in found] == [1, 6]
    assert {v.name: v.role for v in found[1][2].variables}["mlp/logits/kernel"] == names.NON_TRAINABLE


def test_capture_failure_warns_and_training_goes_on(tmp_path, monkeypatch):
    def broken(model=None, optimizer=None):
        raise RuntimeError("capture exploded")

    monkeypatch.setattr("tb_modelmem.capture.variables.breakdown_of", broken)
    model = model_and_data()
    with pytest.warns(RuntimeWarning, match="capture exploded"):
        history = fit(model, MemoryCallback(str(tmp_path)), epochs=3)
    assert len(history.history["loss"]) == 3
    assert written(tmp_path / "train") == []


def test_profile_steps_writes_one_op_trace_at_the_last_profiled_step(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a tiny MLP the CPU allocator records nothing of is no reason to warn
        fit(model_and_data(), MemoryCallback(str(tmp_path), profile_steps=(2, 3)), epochs=2)
    traces = [(step, tag, rec) for step, tag, rec in written(str(tmp_path / "train")) if tag == "ops"]
    assert [(step, type(rec).__name__) for step, _, rec in traces] == [(3, "OpTrace")]
    trace = traces[0][2]
    assert len(trace.ops) and trace.source == "xspace"
    assert trace.allocations in ("none", "large") and trace.allocations_note  # ...but the trace says what it lacks


def test_profile_window_cut_short_by_the_end_of_fit_is_still_written(tmp_path):
    fit(model_and_data(), MemoryCallback(str(tmp_path), profile_steps=(5, 100)), epochs=2)  # 6 batches in all
    assert [step for step, tag, _ in written(str(tmp_path / "train")) if tag == "ops"] == [6]


@pytest.mark.parametrize("bad", [(0, 2), (3, 2), -1])
def test_bad_profile_steps_fail_early_like_profile_batch(bad):
    with pytest.raises(ValueError, match="profile_steps"):
        MemoryCallback("unused", profile_steps=bad)


def test_unwritable_log_dir_with_profile_steps_warns_and_leaves_the_profiler_idle(tmp_path):
    """A log dir that is a file: no writer can be made. Training still runs every epoch and
    the profiled window is still closed, so a later profile can start."""
    import tensorflow as tf

    not_a_dir = tmp_path / "a_file"
    not_a_dir.write_text("not a directory")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = fit(model_and_data(), MemoryCallback(str(not_a_dir), profile_steps=(1, 2)), epochs=2)
    assert len(history.history["loss"]) == 2
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("could not record 'storage'" in m and "not a directory" in m.lower() for m in messages)
    assert any("could not record 'ops'" in m and "not a directory" in m.lower() for m in messages)
    assert not any("no default summary writer" in m for m in messages)  # the reason was given, not a wrong one
    assert not any("{{function_node" in m or "[Op:" in m for m in messages)  # TensorFlow's decoration is gone
    assert sum("could not record 'memory'" in m for m in messages) == 1  # said once, not every sample
    tf.profiler.experimental.start(str(tmp_path / "next_profile"))  # raises AlreadyExistsError if left running
    tf.profiler.experimental.stop(save=False)


def test_steps_count_batches_when_one_call_runs_several(tmp_path):
    """steps_per_execution=3: Keras calls the batch hooks once per 3 batches (begin 0, end 2);
    the step still counts batches, like the TensorBoard callback's, and profile_steps too."""
    model = model_and_data()
    model.compile(keras.optimizers.Adam(), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=3)
    fit(model, MemoryCallback(str(tmp_path), profile_steps=(4, 6)), epochs=2)  # 2 calls of 3 batches
    assert [(step, tag) for step, tag, _ in written(str(tmp_path / "train"))] == [(3, "storage"), (6, "ops")]


def test_memory_is_sampled_at_train_begin_every_n_batches_and_at_train_end(tmp_path):
    fit(model_and_data(), MemoryCallback(str(tmp_path), memory_every=2), epochs=2)  # 6 batches
    samples = written(tmp_path / "train", kinds=(metadata.MEMORY,))
    steps = [step for step, _, _ in samples]
    assert steps[0] == 0 and steps[-1] == 6 and {2, 4} <= set(steps), steps
    assert {tag for _, tag, _ in samples} == {"memory"}
    first, last = samples[0][2], samples[-1][2]
    assert first.label == "train begin" and last.label == "train end"
    assert first.live_variables is not None and last.live_variables is not None  # censuses at the ends
    assert all(s.rss_bytes > 0 for _, _, s in samples)
    # the model and Adam were alive at train end: their variables are in the census
    model_bytes = ((8 + 1) * 16 + (16 + 1) * 3) * 4
    assert last.live_variable_bytes >= 3 * model_bytes


def test_memory_sampling_off(tmp_path):
    fit(model_and_data(), MemoryCallback(str(tmp_path), memory_every=0), epochs=1)
    assert written(tmp_path / "train", kinds=(metadata.MEMORY,)) == []


def test_gan_trained_with_its_own_optimizers_is_recorded_with_both(tmp_path):
    """keras-io's DCGAN-with-train_step pattern: compile() leaves Keras' default optimizer unused."""
    import tensorflow as tf

    class GAN(keras.Model):
        def __init__(self):
            super().__init__()
            self.d = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)], name="disc")
            self.g = keras.Sequential([keras.Input((2,)), keras.layers.Dense(4)], name="gen")

        def compile(self, d_optimizer, g_optimizer):
            super().compile()
            self.d_optimizer, self.g_optimizer = d_optimizer, g_optimizer

        def train_step(self, data):
            noise = tf.random.normal((tf.shape(data)[0], 2))
            with tf.GradientTape() as tape:
                d_loss = tf.reduce_mean(self.d(self.g(noise)) - self.d(data))
            self.d_optimizer.apply_gradients(zip(tape.gradient(d_loss, self.d.trainable_weights),
                                                 self.d.trainable_weights))
            with tf.GradientTape() as tape:
                g_loss = -tf.reduce_mean(self.d(self.g(noise)))
            self.g_optimizer.apply_gradients(zip(tape.gradient(g_loss, self.g.trainable_weights),
                                                 self.g.trainable_weights))
            return {"d_loss": d_loss, "g_loss": g_loss}

    gan = GAN()
    gan.compile(keras.optimizers.Adam(), keras.optimizers.Adam())
    gan.fit(np.zeros((4, 4), "float32"), batch_size=2, epochs=1, verbose=0, callbacks=[MemoryCallback(str(tmp_path))])
    ((_, _, found),) = written(tmp_path / "train")
    by_role = records.bytes_by_role(found.variables)
    expected_slots = sum(int(np.prod(v.shape)) * 4 for o in (gan.d_optimizer, gan.g_optimizer) for v in o.variables
                         if len(v.shape))
    assert by_role[names.OPTIMIZER_SLOT] == expected_slots == 2 * by_role[names.WEIGHT]


def test_fit_that_raises_inside_the_profile_window_leaves_no_profiler_running_and_no_temp_dir(tmp_path, monkeypatch):
    """Keras calls no on_train_end when a step raises: the window must still be closed, its temp dir removed."""
    import tempfile

    private = tmp_path / "tmp"  # the raw profile's temp dir goes here: no other process's come and go in it
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))

    import tensorflow as tf

    def batches():
        for i in range(6):
            if i == 3:
                raise ValueError("the data source broke at batch 4")
            yield np.zeros((2, 8), "float32"), np.zeros((2,), "int64")

    data = tf.data.Dataset.from_generator(batches, output_signature=(
        tf.TensorSpec((2, 8), tf.float32), tf.TensorSpec((2,), tf.int64)))
    model = model_and_data()
    with warnings.catch_warnings(record=True) as caught, pytest.raises(Exception, match="data source broke"):
        warnings.simplefilter("always")
        model.fit(data, epochs=1, verbose=0, callbacks=[MemoryCallback(str(tmp_path), profile_steps=(2, 5))])
    (cut,) = [str(w.message) for w in caught if "tb_modelmem" in str(w.message)]  # said once
    assert "profile of steps 2-5 was cut short at step 4" in cut and "in model.train_function" in cut, cut
    assert os.listdir(private) == []  # the window's temp dir was removed
    tf.profiler.experimental.start(str(tmp_path / "next_profile"))  # AlreadyExistsError if left running
    tf.profiler.experimental.stop(save=False)
    assert getattr(model.train_function, "__wrapped__", None) is None  # Keras' own function is back


class RaiseAt(keras.callbacks.Callback):
    """A user's callback that raises at the end of one batch (an epoch's batch index, as Keras passes it)."""

    def __init__(self, batch, error):
        super().__init__()
        self.batch, self.error = batch, error

    def on_train_batch_end(self, batch, logs=None):
        if batch == self.batch:
            raise self.error


@pytest.mark.parametrize("ours_first", [True, False], ids=["memory-callback-first", "memory-callback-last"])
@pytest.mark.parametrize("error", [ValueError("the user's callback failed"), KeyboardInterrupt()],
                         ids=["ValueError", "KeyboardInterrupt"])
def test_another_callback_raising_inside_the_window_closes_it_with_one_warning(tmp_path, error, ours_first,
                                                                               monkeypatch):
    """Issue 30 item 9: a user's callback raises at batch 3 of profile_steps=(2, 5) (Ctrl-C there raises
    KeyboardInterrupt the same way). fit ends without on_train_end; the profiler used to stay on, and the
    user's next tf.profiler.experimental.start failed with "Another profiler is running"."""
    import tempfile

    import tensorflow as tf

    private = tmp_path / "tmp"  # the raw profile's temp dir goes here: no other process's come and go in it
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    model = model_and_data()
    ours, theirs = MemoryCallback(str(tmp_path), profile_steps=(2, 5)), RaiseAt(2, error)  # batch index 2: step 3
    with warnings.catch_warnings(record=True) as caught, pytest.raises(type(error)):
        warnings.simplefilter("always")
        model.fit(X, Y, batch_size=2, epochs=2, verbose=0, callbacks=[ours, theirs] if ours_first else [theirs, ours])
    (cut,) = [str(w.message) for w in caught if "tb_modelmem" in str(w.message)]  # said once
    assert "profile of steps 2-5 was cut short at step 3" in cut, cut
    assert f"{type(error).__name__}" in cut and "on_train_batch_end" in cut and "not recorded" in cut, cut
    tf.profiler.experimental.start(str(tmp_path / "next_profile"))  # AlreadyExistsError if left running
    tf.profiler.experimental.stop(save=False)
    assert os.listdir(private) == []  # the window's temp dir was removed
    assert getattr(model.train_function, "__wrapped__", None) is None  # Keras' own function is back...
    assert "evaluate" not in vars(model)  # ...its evaluate the class's again...
    assert not [n for n in vars(ours._callbacks) if n.startswith("on_")]  # ...and fit's callback list unwrapped
    assert [tag for _, tag, _ in written(str(tmp_path / "train"))] == ["storage"]  # no trace of a cut window
    # the next fit profiles as asked
    fit(model, MemoryCallback(str(tmp_path / "again"), profile_steps=(2, 3)), epochs=1)
    assert [(step, tag) for step, tag, _ in written(str(tmp_path / "again" / "train"))] == [(1, "storage"), (3, "ops")]


def test_a_profiler_already_running_is_said_where_the_ops_would_be(tmp_path):
    """Issue 31 item 12: MemoryCallback(profile_steps=2) beside keras.callbacks.TensorBoard(profile_batch=2),
    which starts the profiler first. The trace cannot start; the user used to get a warning on stderr and a
    tab with no ops and no word. Now the tag holds a record saying why, where the table would have been."""
    model = model_and_data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(X, Y, batch_size=2, epochs=2, verbose=0, callbacks=[
            keras.callbacks.TensorBoard(str(tmp_path), profile_batch=2),
            MemoryCallback(str(tmp_path), profile_steps=2)])
    assert len(history.history["loss"]) == 2  # training went on
    assert any("could not start the profiler" in str(w.message) for w in caught)  # stderr still says it
    ((step, record),) = [(step, rec) for step, tag, rec in written(str(tmp_path / "train")) if tag == "ops"]
    assert step == 2 and len(record.ops) == 0 and record.allocations == "none" and record.source == "no profile"
    note = record.allocations_note
    assert note.startswith("No profile of steps 2: the profiler could not start (") and "Another profiler" in note, note
    assert "keras.callbacks.TensorBoard(profile_batch=2) in the same fit" in note and '"profile/..."' in note, note
    # ...and the profile it names is there, where TensorBoard's callback wrote it
    assert glob.glob(os.path.join(str(tmp_path), "train", "plugins", "profile", "*", "*.xplane.pb"))


FULL_DISK_SCRIPT = r"""
import os, resource, signal, sys, warnings
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import keras, numpy as np
from tb_modelmem.callbacks import MemoryCallback
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk


class FillTheDisk(keras.callbacks.Callback):
    # After the first epoch no file may grow: every write fails, as when the file system fills up.
    def on_epoch_end(self, epoch, logs=None):
        if epoch == 0:
            sizes = [os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(sys.argv[1]) for f in fs]
            limit = max(sizes)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dense(3)])
model.compile(keras.optimizers.Adam(), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model.fit(np.zeros((6, 8), "float32"), np.zeros((6,), "int64"), batch_size=2, epochs=4, verbose=0,
              callbacks=[FillTheDisk(), MemoryCallback(sys.argv[1], memory_every=1)])
ours = [str(w.message) for w in caught if "tb_modelmem" in str(w.message)]
print("WARNINGS", len(ours))
for message in ours:
    print("WARNING", message)
print("TRAINED", len(model.history.history["loss"]))
"""


def test_a_full_disk_mid_training_is_said_once_and_training_goes_on(tmp_path):
    """Issue 12: summaries lost to a full disk were lost with no warning. The file system "fills" after
    epoch 1 (RLIMIT_FSIZE: every write past it fails); memory samples keep being written every batch."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FULL_DISK_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=600, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "TRAINED 4" in lines, done.stdout  # all four epochs ran
    assert "WARNINGS 1" in lines, done.stdout  # once, not per write
    assert "not reaching" in done.stdout and "disk full" in done.stdout, done.stdout
