"""``tb-modelmem inspect`` needs no TensorFlow: run with ``import tensorflow`` failing, it gives the
same report as with TensorFlow importable, and TensorFlow's own readers agree with its figures."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tests.support.checkpoint_models import keras_convnet, save_tf1_convnet

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLOCKER = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoTensorFlow(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in ("tensorflow", "keras", "tf_keras", "tensorflow_io"):
                raise ImportError(f"{name} is blocked in this test")

    sys.meta_path.insert(0, NoTensorFlow())
    """
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A TF1 checkpoint, a TF2 checkpoint, a .keras, a legacy .h5, a .weights.h5 and a SavedModel."""
    folder = tmp_path_factory.mktemp("files")
    model = keras_convnet(batchnorm=True)
    paths = {"tf1": save_tf1_convnet(str(folder)),
             "tf2": tf.train.Checkpoint(model=model, optimizer=model.optimizer).save(str(folder / "tf2" / "ckpt")),
             "keras": str(folder / "m.keras"), "h5": str(folder / "m.h5"), "weights": str(folder / "m.weights.h5"),
             "savedmodel": str(folder / "savedmodel")}
    model.save(paths["keras"])
    model.save(paths["h5"])
    model.save_weights(paths["weights"])
    tf.saved_model.save(model, paths["savedmodel"])
    blocker = folder / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    return paths, model, str(blocker)


def inspect_json(path, blocker=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [blocker, ROOT])), TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-m", "tb_modelmem.cli", "inspect", path, "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_the_blocker_really_blocks(files):
    _, _, blocker = files
    env = dict(os.environ, PYTHONPATH=blocker)
    done = subprocess.run([sys.executable, "-c", "import tensorflow"], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "blocked in this test" in done.stderr


def tf_reader_bytes(prefix):
    """Bytes of every numeric tensor of a checkpoint, by TensorFlow's own reader."""
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    return sum(int(np.prod(shape)) * dtypes[k].size for k, shape in reader.get_variable_to_shape_map().items()
               if dtypes[k] not in (tf.string, tf.variant, tf.resource))


def checkpoint_files_bytes(prefix):
    folder, base = os.path.split(prefix)
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)
               if f.startswith(base + ".") or f == "checkpoint")


@pytest.mark.parametrize("fmt", ["tf1", "tf2", "keras", "h5", "weights", "savedmodel"])
def test_inspect_without_tensorflow_gives_the_same_figures(files, fmt):
    paths, model, blocker = files
    without = inspect_json(paths[fmt], blocker)
    assert without == inspect_json(paths[fmt])
    assert without["reconciled"] is True
    if fmt in ("tf1", "tf2"):
        assert without["total_bytes"] == tf_reader_bytes(paths[fmt])
        assert without["file_bytes"] == checkpoint_files_bytes(paths[fmt])
    elif fmt == "savedmodel":
        prefix = os.path.join(paths[fmt], "variables", "variables")
        assert without["total_bytes"] == tf_reader_bytes(prefix)
        assert without["file_bytes"] == sum(os.path.getsize(os.path.join(root, f))
                                            for root, _, names in os.walk(paths[fmt]) for f in names)
    else:
        keras_bytes = sum(int(np.prod(v.shape)) * tf.as_dtype(v.dtype).size
                          for v in model.variables + model.optimizer.variables)
        assert without["total_bytes"] == keras_bytes
        assert without["file_bytes"] == os.path.getsize(paths[fmt])
    if fmt != "tf1":
        weights = sum(int(np.prod(v.shape)) * 4 for v in model.trainable_variables)
        assert without["by_role"]["weight"] == weights
        assert without["by_role"]["optimizer_slot"] == 2 * weights


def test_inspect_writes_a_logdir_without_tensorflow(files, tmp_path):
    """``inspect --logdir`` writes through the package's own event writer (it imported TensorFlow before: a
    new user without it got "No module named 'tensorflow'"); TensorBoard's own loader reads the summary back,
    and the plugin's reader gives the file's figures."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    from tb_modelmem.schema import payload

    paths, _, blocker = files
    logdir = tmp_path / "logs"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([blocker, ROOT]), TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-m", "tb_modelmem.cli", "inspect", paths["keras"], "--logdir",
                           str(logdir)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    events = [os.path.join(root, f) for root, _, names in os.walk(logdir) for f in names if "tfevents" in f]
    assert len(events) == 1
    values = [v for e in EventFileLoader(events[0]).Load() for v in e.summary.value]
    assert [v.metadata.plugin_data.plugin_name for v in values] == ["modelmem"]
    breakdown = payload.decode(values[0].tensor.string_val[0])
    assert sum(v.bytes for v in breakdown.variables) == inspect_json(paths["keras"])["total_bytes"]
