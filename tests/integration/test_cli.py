"""tb-modelmem inspect: report, --json, --logdir, and one-line errors with exit code 2."""

import glob
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from tb_modelmem import cli
from tb_modelmem.schema import payload
from tests.support.checkpoint_models import SEED_DATA_BYTES, SLOT_BYTES, WEIGHT_BYTES, save_tf1_convnet


@pytest.fixture(scope="module")
def tf1_prefix(tmp_path_factory):
    return save_tf1_convnet(str(tmp_path_factory.mktemp("tf1")))


def test_inspect_json_reports_seed_figures(tf1_prefix, capsys):
    assert cli.main(["inspect", tf1_prefix, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["by_role"] == {"weight": WEIGHT_BYTES, "non_trainable": 0, "optimizer_slot": SLOT_BYTES, "other": 8}
    assert report["total_bytes"] == SEED_DATA_BYTES
    assert report["file_bytes"] == report["total_bytes"] + report["overhead_bytes"]
    assert report["reconciled"] is True


def test_inspect_table_shows_roles_optimizer_and_reconciliation(tf1_prefix, capsys):
    assert cli.main(["inspect", os.path.dirname(tf1_prefix)]) == 0
    out = capsys.readouterr().out
    assert "26,197,072" in out and "13,098,536" in out
    assert "AdamOptimizer" in out
    assert "reconciled to the byte" in out


def test_inspect_logdir_writes_a_breakdown_summary(tf1_prefix, tmp_path, capsys):
    assert cli.main(["inspect", tf1_prefix, "--logdir", str(tmp_path)]) == 0
    capsys.readouterr()
    records = []
    for path in glob.glob(str(tmp_path / "model.ckpt" / "events.out.tfevents.*")):  # the run is the file's name
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "modelmem":
                    records.append(payload.decode(tf.make_ndarray(value.tensor)[0]))
    assert len(records) == 1
    assert sum(v.bytes for v in records[0].variables if v.role == "optimizer_slot") == SLOT_BYTES


def _bad_inputs(tf1_prefix, folder):
    prefix_data = tf1_prefix + ".data-00000-of-00001"
    with open(prefix_data, "rb") as f:
        head = f.read(4096)
    (folder / "truncated.keras").write_bytes(b"PK\x03\x04" + head)
    (folder / "truncated.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + head)
    (folder / "notes.txt").write_text("not a model")
    (folder / "empty").mkdir()
    (folder / "folder.keras").mkdir()
    (folder / "zero_bytes.keras").write_bytes(b"")
    (folder / "bad.ckpt.index").write_bytes(head[:300])
    (folder / "bad.ckpt.data-00000-of-00001").write_bytes(head)
    import zipfile

    import h5py

    with zipfile.ZipFile(folder / "checkpoint_zip.keras", "w") as zf:  # a zip of something else
        zf.write(tf1_prefix + ".index", "model.ckpt.index")
    with h5py.File(folder / "not_keras.h5", "w") as h5:
        h5["measurements"] = [1.0, 2.0, 3.0]
    return [str(folder / n) for n in ("truncated.keras", "truncated.h5", "notes.txt", "empty", "folder.keras",
                                      "zero_bytes.keras", "checkpoint_zip.keras", "not_keras.h5", "bad.ckpt",
                                      "does-not-exist")]


def test_bad_inputs_give_one_line_and_exit_code_2(tf1_prefix, tmp_path, capsys):
    for path in _bad_inputs(tf1_prefix, tmp_path):
        assert cli.main(["inspect", path]) == 2, path
        captured = capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("tb-modelmem: error: "), (path, captured.err)


def test_truncated_checkpoint_data_in_a_real_process(tf1_prefix, tmp_path):
    """The console entry point never shows a traceback (TF's own C++ log lines aside)."""
    for suffix in (".index", ".data-00000-of-00001"):
        with open(tf1_prefix + suffix, "rb") as src:
            (tmp_path / ("m.ckpt" + suffix)).write_bytes(src.read()[:1 << 20])
    proc = subprocess.run([sys.executable, "-m", "tb_modelmem.cli", "inspect", str(tmp_path / "m.ckpt")],
                          capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("tb-modelmem: error: ")
    assert "truncated" in proc.stderr


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["inspect"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_no_arguments_prints_the_usage_and_exits_2():
    """Issue 30 item 8: ``tb-modelmem`` alone said only that a command was missing; it must show
    the usage, as ``git`` or ``pip`` with no arguments do, and exit 2 like every usage error."""
    proc = subprocess.run([sys.executable, "-m", "tb_modelmem.cli"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("usage: tb-modelmem ")
    for command in ("inspect", "loadbench"):  # each command, with what it does
        assert any(line.split()[:1] == [command] and len(line.split()) > 1 for line in proc.stderr.splitlines())
    assert "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    """A real .keras, a real legacy .h5 and a real SavedModel of the seed-001 ConvNet + Adam."""
    from tests.support.checkpoint_models import keras_convnet

    folder = tmp_path_factory.mktemp("model_files")
    model = keras_convnet()
    model.save(folder / "convnet.keras")
    model.save(folder / "convnet.h5")
    model.export(str(folder / "savedmodel"), verbose=False)
    return folder


def test_several_files_inspected_into_one_logdir_each_stay_a_run(model_files, tf1_prefix, tmp_path, capsys):
    """Issue 31 item 4: ``inspect FILE --logdir DIR`` for several files into one DIR wrote each to
    run ".", tag "inspect", step 0, and the tab showed one of them. Each file is now a run named
    after it (compared side by side in the Storage view); ``--run`` names it otherwise."""
    from tests.support.plugin_harness import Served

    logdir = tmp_path / "logs" / "files"
    files = {"convnet.keras": model_files / "convnet.keras", "convnet.h5": model_files / "convnet.h5",
             "savedmodel": model_files / "savedmodel"}
    for path in [*files.values(), tf1_prefix]:
        assert cli.main(["inspect", str(path), "--logdir", str(logdir)]) == 0
    keras_file = str(model_files / "convnet.keras")
    assert cli.main(["inspect", keras_file, "--logdir", str(logdir), "--run", "adam/keras"]) == 0
    assert capsys.readouterr().err == ""

    on_disk = {name: sum(os.path.getsize(os.path.join(root, f)) for root, _, names in os.walk(path) for f in names)
               if os.path.isdir(path) else os.path.getsize(path) for name, path in files.items()}
    on_disk["model.ckpt"] = sum(os.path.getsize(p) for p in glob.glob(tf1_prefix + ".*")) + \
        os.path.getsize(os.path.join(os.path.dirname(tf1_prefix), "checkpoint"))
    on_disk["adam/keras"] = on_disk["convnet.keras"]
    served = Served(str(tmp_path / "logs"))
    assert set(served.tags()) == {(f"files/{run}", "inspect") for run in on_disk}
    for run, size in on_disk.items():
        assert served.json("/breakdown", run=f"files/{run}", tag="inspect")["file_bytes"] == size, run


def test_inspecting_a_second_file_of_the_same_name_says_how_to_keep_both(model_files, tmp_path, capsys):
    import shutil

    other = tmp_path / "other" / "convnet.keras"
    other.parent.mkdir()
    shutil.copy(model_files / "convnet.keras", other)
    assert cli.main(["inspect", str(model_files / "convnet.keras"), "--logdir", str(tmp_path / "logs")]) == 0
    assert capsys.readouterr().err == ""
    assert cli.main(["inspect", str(other), "--logdir", str(tmp_path / "logs")]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "convnet.keras" in err and "--run" in err


@pytest.mark.parametrize("run", ["", "/abs", "../outside", "a/../../b"])
def test_a_run_outside_the_logdir_is_a_usage_error(tf1_prefix, tmp_path, capsys, run):
    assert cli.main(["inspect", tf1_prefix, "--logdir", str(tmp_path), "--run", run]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert os.listdir(tmp_path) == []


def _rewrite_keras(src, dst, **members):
    """A copy of the .keras archive ``src`` with some members replaced (bytes or str)."""
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            if item.filename not in members:
                zout.writestr(item, zin.read(item.filename))
        for name, data in members.items():
            zout.writestr(name, data)
    return str(dst)


def _broken_model_files(model_files, folder):
    """Real files broken in their structure, each still a zip / HDF5 / SavedModel on the outside."""
    import shutil
    import zipfile

    import h5py

    keras_path, h5_path = model_files / "convnet.keras", model_files / "convnet.h5"
    with zipfile.ZipFile(keras_path) as zf:
        weights = zf.read("model.weights.h5")
    paths = {
        "config.json is a JSON list": _rewrite_keras(keras_path, folder / "list_config.keras", **{
            "config.json": "[1, 2]"}),
        "config.json is not JSON": _rewrite_keras(keras_path, folder / "not_json.keras", **{
            "config.json": "{'class_name': 'Sequential'"}),
    }
    (folder / "w.h5").write_bytes(weights)
    with h5py.File(folder / "w.h5", "r+") as h5:
        group = next(name for name in _vars_groups(h5))
        del h5[group + "/0"]
        h5.create_group(group + "/0")  # a group where a weight's dataset belongs
    paths["a weight is a group"] = _rewrite_keras(keras_path, folder / "group_weight.keras", **{
        "model.weights.h5": (folder / "w.h5").read_bytes()})
    for what, edit in (("a listed layer is missing", lambda h5: h5.__delitem__("model_weights/conv1")),
                       ("a listed optimizer weight is missing",
                        lambda h5: h5.__delitem__("optimizer_weights/" + _first_optimizer_weight(h5)))):
        path = folder / (what.replace(" ", "_") + ".h5")
        shutil.copy(h5_path, path)
        with h5py.File(path, "r+") as h5:
            edit(h5)
        paths[what] = str(path)
    shutil.copytree(model_files / "savedmodel", folder / "junk_savedmodel")
    (folder / "junk_savedmodel" / "saved_model.pb").write_bytes(b"\xff\xff\xff\xff not a SavedModel")
    paths["saved_model.pb is junk"] = str(folder / "junk_savedmodel")
    return paths


def _vars_groups(h5):
    found = []
    h5.visititems(lambda name, obj: found.append(name) if name.endswith("/vars") and len(obj) else None)
    return [name for name in found if not name.startswith("optimizer")]


def _first_optimizer_weight(h5):
    group = h5["optimizer_weights"]
    names = [n.decode() if isinstance(n, bytes) else n for n in group.attrs["weight_names"]]
    return next(n for n in names if group[n].shape != ())


def test_structurally_broken_model_files_are_one_line_naming_the_file(model_files, tmp_path, capsys):
    for what, path in _broken_model_files(model_files, tmp_path).items():
        assert cli.main(["inspect", path]) == 2, what
        captured = capsys.readouterr()
        assert captured.out == "", what
        lines = captured.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"tb-modelmem: error: {path}: "), (what, captured.err)
        assert "object has no attribute" not in lines[0] and "Unable to synchronously" not in lines[0], lines[0]


def test_wrong_typed_metadata_is_ignored_and_the_weights_still_read(model_files, tmp_path, capsys):
    """A config whose optional parts have the wrong JSON type: the variables are still the file's."""
    import shutil
    import zipfile

    import h5py

    with zipfile.ZipFile(model_files / "convnet.keras") as zf:
        config = json.loads(zf.read("config.json"))
    paths = [_rewrite_keras(model_files / "convnet.keras", tmp_path / "odd.keras", **{
        "config.json": json.dumps({**config, "compile_config": 5, "config": "convnet"})})]
    shutil.copy(model_files / "convnet.h5", tmp_path / "odd.h5")
    with h5py.File(tmp_path / "odd.h5", "r+") as h5:
        h5.attrs["training_config"] = "[2]"
        h5.attrs["model_config"] = '"a string"'
    paths.append(str(tmp_path / "odd.h5"))
    for path in paths:
        assert cli.main(["inspect", path, "--json"]) == 0, capsys.readouterr().err
        report = json.loads(capsys.readouterr().out)
        assert (report["by_role"]["weight"], report["by_role"]["optimizer_slot"]) == (WEIGHT_BYTES, SLOT_BYTES), path
        assert report["optimizer"] is None and report["reconciled"] is True


def test_symlinks_are_followed_and_dangling_ones_are_one_line(model_files, tmp_path, capsys):
    link = tmp_path / "link.keras"
    link.symlink_to(model_files / "convnet.keras")
    assert cli.main(["inspect", str(link), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["by_role"]["optimizer_slot"] == SLOT_BYTES
    (tmp_path / "dangling.keras").symlink_to(tmp_path / "gone.keras")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for path in (tmp_path / "dangling.keras", tmp_path / "loop"):
        assert cli.main(["inspect", str(path)]) == 2
        assert capsys.readouterr().err == f"tb-modelmem: error: {path}: no such file or folder\n"


def test_a_garbage_checkpoint_state_file_falls_back_to_the_one_index(tf1_prefix, tmp_path, capsys):
    import shutil

    for suffix in (".index", ".data-00000-of-00001"):
        shutil.copy(tf1_prefix + suffix, tmp_path / ("model.ckpt-1" + suffix))
    (tmp_path / "checkpoint").write_bytes(b"\xff\xfe not a CheckpointState {{{")
    assert cli.main(["inspect", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total_bytes"] == SEED_DATA_BYTES and report["reconciled"] is True


def test_a_checkpoint_state_file_pointing_nowhere_is_named(tmp_path, capsys):
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-9"\n')
    assert cli.main(["inspect", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"tb-modelmem: error: {tmp_path}: no TensorFlow checkpoint in this folder "
                                       "(its 'checkpoint' file names no checkpoint here and 0 *.index files)\n")


def test_a_logdir_that_is_a_file_is_one_line_naming_it(tf1_prefix, tmp_path, capsys):
    logdir = tmp_path / "logs"
    logdir.write_text("a file, not a folder")
    assert cli.main(["inspect", tf1_prefix, "--logdir", str(logdir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tb-modelmem: error: {logdir}/model.ckpt: cannot write summaries there (")
    assert "Not a directory" in err and str(logdir) in err and err.count("\n") == 1


@pytest.mark.parametrize("optimizer_config, shown", [
    ("adam", "optimizer: adam()"),
    ({"class_name": "Adam", "config": "learning_rate=0.001"}, "optimizer: Adam()"),
    ({"class_name": ["Adam"], "config": {"learning_rate": 0.001}},
     "optimizer: class not recorded(learning_rate=0.001)"),
])
def test_an_odd_optimizer_config_in_a_legacy_h5_is_shown_as_far_as_it_goes(model_files, tmp_path, capsys,
                                                                         optimizer_config, shown):
    import shutil

    import h5py

    path = tmp_path / "odd_optimizer.h5"
    shutil.copy(model_files / "convnet.h5", path)
    with h5py.File(path, "r+") as h5:
        training = json.loads(h5.attrs["training_config"])
        h5.attrs["training_config"] = json.dumps({**training, "optimizer_config": optimizer_config})
    assert cli.main(["inspect", str(path)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert shown + "  [training_config attribute]" in out.splitlines()
    assert "reconciled to the byte" in out


def test_a_reader_that_goes_away_ends_it_quietly(tf1_prefix):
    """``tb-modelmem inspect X | head``: the pipe closes before the report is written; like cat,
    no message and the status of a process stopped by SIGPIPE, not a traceback or exit 2."""
    proc = subprocess.Popen([sys.executable, "-m", "tb_modelmem.cli", "inspect", tf1_prefix, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the CLI has imported anything
    _, err = proc.communicate(timeout=120)
    assert err.decode() == ""
    assert proc.returncode == cli.EXIT_PIPE_CLOSED == 141
    shell = subprocess.run(f"{sys.executable} -m tb_modelmem.cli inspect {tf1_prefix} | head -n 2",
                           shell=True, capture_output=True, text=True, timeout=120)
    assert shell.stderr == "" and len(shell.stdout.splitlines()) == 2
