"""Model-file breakdowns (.keras, .h5, .weights.h5, SavedModel) of the seed-001 ConvNet."""

import os
import zipfile

import h5py
import pytest
import tensorflow as tf

from tb_modelmem.readers.checkpoint import InspectError
from tb_modelmem.readers.model_file import read_path
from tb_modelmem.schema.names import NON_TRAINABLE, OPTIMIZER_SLOT, OTHER, WEIGHT
from tests.support.checkpoint_models import SLOT_BYTES, WEIGHT_BYTES, assert_reconciled, by_role, keras_convnet


@pytest.fixture(scope="session")
def saved(tmp_path_factory):
    model = keras_convnet()
    folder = tmp_path_factory.mktemp("files")
    paths = {"keras": folder / "convnet.keras", "h5": folder / "convnet.h5",
             "weights": folder / "convnet.weights.h5", "savedmodel": folder / "savedmodel",
             "tf_savedmodel": folder / "tf_savedmodel"}
    model.save(paths["keras"])
    model.save(paths["h5"])
    model.save_weights(paths["weights"])
    model.export(str(paths["savedmodel"]), verbose=False)
    tf.saved_model.save(model, str(paths["tf_savedmodel"]))  # tracks the optimizer too
    return {k: str(v) for k, v in paths.items()}


@pytest.mark.parametrize("fmt", ["keras", "h5", "weights", "tf_savedmodel"])
def test_same_weight_and_slot_figures_as_the_checkpoints(saved, fmt):
    bd = read_path(saved[fmt])
    roles = by_role(bd)
    assert (roles[WEIGHT], roles[OPTIMIZER_SLOT], roles[NON_TRAINABLE]) == (WEIGHT_BYTES, SLOT_BYTES, 0)
    assert roles[OTHER] == 8 + 4  # Keras 3 iterations (int64) and learning_rate (float32)
    assert_reconciled(bd)


@pytest.mark.parametrize("fmt", ["keras", "h5", "weights"])
def test_every_slot_points_at_a_weight_of_its_shape(saved, fmt):
    bd = read_path(saved[fmt])
    weights = {v.name: v for v in bd.variables if v.role == WEIGHT}
    slots = [v for v in bd.variables if v.role == OPTIMIZER_SLOT]
    assert len(slots) == 2 * len(weights) == 16
    for s in slots:
        assert s.slot in ("momentum", "velocity")
        assert weights[s.slot_of].shape == s.shape


@pytest.mark.parametrize("fmt", ["keras", "h5"])
def test_names_how_the_model_was_compiled(saved, fmt):
    opt = read_path(saved[fmt]).optimizer
    assert opt["class_name"] == "Adam"
    assert opt["config"]["learning_rate"] == pytest.approx(1e-4)


def test_keras_archive_overhead_lines(saved):
    bd = read_path(saved["keras"])
    lines = {o["what"]: o["bytes"] for o in bd.overhead}
    with zipfile.ZipFile(saved["keras"]) as zf:
        assert lines["config.json in the archive"] == zf.getinfo("config.json").compress_size
    assert any(w.startswith("zip container") for w in lines)
    assert any(w.startswith("HDF5 structure") for w in lines)


def test_savedmodel_weights_and_graph_overhead(saved):
    bd = read_path(saved["savedmodel"])
    assert_reconciled(bd)
    assert by_role(bd)[OPTIMIZER_SLOT] == 0  # model.export keeps no optimizer
    # Keras 3.15's export tracks the weights under both `variables` and `_all_variables`, and the
    # checkpoint stores each copy: the file really holds the weights twice, the copy a line of its own.
    assert by_role(bd)[WEIGHT] == WEIGHT_BYTES
    assert [o["bytes"] for o in bd.overhead if o["what"].startswith("_all_variables/")] in ([], [WEIGHT_BYTES])
    assert any(o["what"].startswith("saved_model.pb") and o["bytes"] > 0 for o in bd.overhead)


def test_batchnorm_stats_are_non_trainable_in_a_keras_file(tmp_path):
    path = tmp_path / "bn.keras"
    keras_convnet(batchnorm=True).save(path)
    roles = by_role(read_path(str(path)))
    assert roles[NON_TRAINABLE] == 2 * 32 * 4
    assert roles[OPTIMIZER_SLOT] == 2 * roles[WEIGHT] == 2 * (WEIGHT_BYTES + 2 * 32 * 4)


def test_foreign_zip_and_hdf5_files_are_errors(tmp_path):
    with zipfile.ZipFile(tmp_path / "x.keras", "w") as zf:
        zf.writestr("hello.txt", "not a model")
    with pytest.raises(InspectError, match="not a .keras archive"):
        read_path(str(tmp_path / "x.keras"))
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["data"] = [1, 2, 3]
    with pytest.raises(InspectError, match="not a Keras model"):
        read_path(str(tmp_path / "x.h5"))


def test_keras2_savedmodel_metadata_names_the_optimizer(saved, tmp_path):
    """Keras 2 SavedModels keep the compile config in keras_metadata.pb; it is read, and counted."""
    import json
    import shutil

    from tensorflow.python.keras.protobuf import saved_metadata_pb2

    folder = tmp_path / "keras2_savedmodel"
    shutil.copytree(saved["savedmodel"], folder)
    training = {"optimizer_config": {"class_name": "Adam", "config": {"learning_rate": 0.001}}}
    meta = saved_metadata_pb2.SavedMetadata(nodes=[saved_metadata_pb2.SavedObject(
        node_path="root", metadata=json.dumps({"training_config": training}))])
    (folder / "keras_metadata.pb").write_bytes(meta.SerializeToString())
    bd = read_path(str(folder))
    assert bd.optimizer["class_name"] == "Adam"
    assert any(o["what"].startswith("keras_metadata.pb") for o in bd.overhead)
    assert_reconciled(bd)


def test_a_deflated_keras_archive_gives_the_same_breakdown(saved, tmp_path):
    """Keras stores model.weights.h5 uncompressed (read in place); a re-zipped, deflated copy is
    inflated once to a temporary file and must give the same variables."""
    deflated = tmp_path / "deflated.keras"
    with zipfile.ZipFile(saved["keras"]) as zin, zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            zout.writestr(item.filename, zin.read(item.filename))
    stored, inflated = read_path(saved["keras"]), read_path(str(deflated))
    assert [v.to_dict() for v in inflated.variables] == [v.to_dict() for v in stored.variables]
    assert_reconciled(inflated)
    assert any(o["what"] == "zip compression of model.weights.h5" and o["bytes"] < 0 for o in inflated.overhead)


def _bytes_read() -> int:
    """Bytes this process has read through read(2)/pread(2) so far (Linux /proc/self/io)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


def test_inspect_of_a_keras_archive_reads_its_metadata_not_its_values(tmp_path):
    """Issue 7 item 7: a .keras used to be read and CRC-checked whole; now only headers are read."""
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input((2048,)), keras.layers.Dense(2048, name="wide")], name="wide")
    model.compile(keras.optimizers.Adam(), "mse")
    model.train_on_batch(np.zeros((1, 2048), "float32"), np.zeros((1, 2048), "float32"))
    path = str(tmp_path / "wide.keras")
    model.save(path)
    read_path(path)  # imports done
    before = _bytes_read()
    bd = read_path(path)
    read = _bytes_read() - before
    assert sum(v.bytes for v in bd.variables) > 48 << 20  # weights + Adam slots
    assert read < 256 << 10, f"read {read:,} bytes of a {os.path.getsize(path):,}-byte archive"


def test_a_weights_file_names_the_optimizer_its_variables_fit(saved):
    """A .weights.h5 keeps no optimizer class: the one whose build() explains the variables is named."""
    opt = read_path(saved["weights"]).optimizer
    assert opt["class_name"] == "Adam" and opt["recorded_in"].startswith("inferred")


@pytest.mark.parametrize("application, slot_count", [("ResNet50", 428), ("MobileNetV2", 316)])
def test_a_keras_application_weights_file_links_every_adam_slot_to_its_weight(tmp_path, application, slot_count):
    """Issue 31 item 2: ResNet50's .weights.h5 (Adam) had its optimizer "not recorded", none of the
    428 slots linked, all 188,440,656 B charged to a layer named 'adam'. The file keeps no config:
    the layers' order is the order Keras wrote them in, which the data's place does not give
    (HDF5 packs small datasets, a BatchNorm's [64] gamma, into blocks it set aside earlier) nor,
    always, the object headers' (MobileNetV2: one BatchNorm's headers in space HDF5 freed)."""
    import keras
    import numpy as np

    model = getattr(keras.applications, application)(weights=None, input_shape=(32, 32, 3), classes=10)
    model.compile(keras.optimizers.Adam(), "sparse_categorical_crossentropy")
    opt = model.optimizer
    opt.build(model.trainable_variables)  # what the first training step builds
    path = str(tmp_path / f"{application}.weights.h5")
    model.save_weights(path)

    nbytes = lambda v: int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize  # noqa: E731
    stored_as = {id(w): f"{layer.name}/{i}" for layer in model.layers for i, w in enumerate(layer.weights)}
    truth = {(stored_as[id(w)], kind) for kind, found in (("momentum", opt._momentums), ("velocity", opt._velocities))
             for _, w in zip(found, model.trainable_variables)}  # Keras' own lists, in trainable_variables order
    bd = read_path(path)
    assert by_role(bd) == {WEIGHT: sum(map(nbytes, model.trainable_variables)),  # ResNet50: 94,220,328
                           NON_TRAINABLE: sum(map(nbytes, model.non_trainable_variables)),  # BatchNorm statistics
                           OPTIMIZER_SLOT: sum(map(nbytes, opt._momentums + opt._velocities)),  # 188,440,656
                           OTHER: 8 + 4}
    slots = [v for v in bd.variables if v.role == OPTIMIZER_SLOT]
    assert len(slots) == len(truth) == slot_count
    assert {(v.slot_of, v.slot) for v in slots} == truth
    layer_of = {v.name: v.layer for v in bd.variables}
    assert all(v.layer == layer_of[v.slot_of] for v in slots)
    assert bd.optimizer["class_name"] == "Adam"
    assert_reconciled(bd)


def test_a_keras_export_stores_its_weights_twice_and_says_so(tmp_path):
    """Issue 31 item 3: Keras 3's ``model.export()`` (the TF Serving path of the Keras and TF
    guides) tracks each weight under ``variables/N`` and ``_all_variables/N``, and the checkpoint
    stores both: inspect reported twice the model's weights as two "layers". The copy is now its
    own overhead line; the weights are the model's, once, under their Keras names."""
    import keras
    import numpy as np

    model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(256, activation="relu"),
                              keras.layers.BatchNormalization(), keras.layers.Dropout(0.2), keras.layers.Dense(10)],
                             name="mlp")
    folder = tmp_path / "exported"
    model.export(str(folder), verbose=False)

    nbytes = lambda v: int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize  # noqa: E731
    listed = tf.train.list_variables(str(folder / "variables" / "variables"))
    stored = {name: shape for name, shape in listed if name.endswith("VARIABLE_VALUE")}
    copies = [n for n in stored if n.startswith("_all_variables/")]
    # What TF lists: the weights (and the Dropout's RNG state) under variables/, the weights again.
    assert len(stored) == len(model.variables) + len(model.weights) == 9 + 8 and len(copies) == 8
    bd = read_path(str(folder))
    assert by_role(bd) == {WEIGHT: sum(map(nbytes, model.trainable_weights)),
                           NON_TRAINABLE: sum(map(nbytes, model.non_trainable_variables)),  # BN statistics, RNG
                           OPTIMIZER_SLOT: 0, OTHER: 0}
    assert sorted(v.name for v in bd.variables) == sorted(v.path for v in model.variables)
    assert {v.layer for v in bd.variables} == {v.path.rsplit("/", 1)[0] for v in model.variables}  # 4 layers
    copy_lines = [o for o in bd.overhead if "copy" in o["what"]]
    assert len(copy_lines) == 1 and copy_lines[0]["what"].startswith("_all_variables/")
    assert copy_lines[0]["bytes"] == sum(map(nbytes, model.weights)) == 818_216
    on_disk = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(folder) for f in files)
    assert bd.file_bytes == on_disk
    assert_reconciled(bd)


def _augmented_convnet():
    """keras-io's "Image classification from scratch" shape: a data-augmentation Sequential inside a
    Functional model, then Conv2D / BatchNormalization / Dense, compiled with Adam and trained a step."""
    import keras
    import numpy as np

    augmentation = keras.Sequential([keras.layers.RandomFlip("horizontal"), keras.layers.RandomRotation(0.1)],
                                    name="data_augmentation")
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Rescaling(1.0 / 255)(augmentation(inputs))
    x = keras.layers.Conv2D(16, 3, strides=2, padding="same")(x)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.Activation("relu")(x)
    x = keras.layers.SeparableConv2D(32, 3, padding="same")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Dropout(0.25)(x)), name="classifier")
    model.compile(keras.optimizers.Adam(3e-4), "binary_crossentropy")
    model.train_on_batch(np.zeros((2, 32, 32, 3), "float32"), np.zeros((2, 1), "float32"))
    return model


def test_layer_classes_come_from_the_file_where_it_names_them(tmp_path):
    """Issue 30 item 4: the Class column was empty for every layer of a .keras file, whose config
    names each layer's class. Filled from the config (.keras, legacy .h5); left "" (shown as
    unknown) where the file does not say: a .weights.h5, a TF2 checkpoint."""
    from tb_modelmem.rules.rollup import layer_rollup

    model = _augmented_convnet()
    truth = {layer.name: type(layer).__name__ for layer in model._flatten_layers(include_self=False)
             if layer.weights and not layer._layers}
    assert set(truth.values()) == {"Conv2D", "BatchNormalization", "SeparableConv2D", "Dense"}
    paths = {"keras": tmp_path / "m.keras", "h5": tmp_path / "m.h5", "weights": tmp_path / "m.weights.h5"}
    model.save(paths["keras"])
    model.save(paths["h5"])
    model.save_weights(paths["weights"])
    prefix = tf.train.Checkpoint(model=model, optimizer=model.optimizer).save(str(tmp_path / "ckpt"))
    for fmt in ("keras", "h5"):
        bd = read_path(str(paths[fmt]))
        assert {row.name: row.class_name for row in bd.layers} == truth, fmt
        shown = {row["name"]: row["class_name"] for row in layer_rollup(bd) if row["params"]}
        assert shown == truth, fmt
        assert sum(row.params for row in bd.layers) == model.count_params()
    for path in (str(paths["weights"]), prefix):
        assert {row["class_name"] for row in layer_rollup(read_path(path))} == {""}, path
