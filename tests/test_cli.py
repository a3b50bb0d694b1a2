"""tb-modelmem inspect: report, --json, --logdir, and one-line errors with exit code 2."""

import glob
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from tb_modelmem import cli, payload
from tests.test_checkpoint import SEED_DATA_BYTES, SLOT_BYTES, WEIGHT_BYTES, save_tf1_convnet


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
    for path in glob.glob(str(tmp_path / "events.out.tfevents.*")):
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
    (folder / "bad.ckpt.index").write_bytes(head[:300])
    (folder / "bad.ckpt.data-00000-of-00001").write_bytes(head)
    return [str(folder / n) for n in ("truncated.keras", "truncated.h5", "notes.txt", "empty", "bad.ckpt",
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
