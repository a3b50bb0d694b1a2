"""loadbench on a tiny model: every format measured in fresh processes, recorded to a logdir."""

import glob

import pytest
import tensorflow as tf

from tb_modelmem import cli, loadbench
from tb_modelmem.schema import payload


@pytest.fixture(scope="module")
def tiny_model_path(tmp_path_factory):
    import keras

    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.BatchNormalization(), keras.layers.Dense(4)], name="tiny")
    path = tmp_path_factory.mktemp("tiny") / "tiny.keras"
    model.save(path)
    return str(path)


def _read_loadbench(logdir):
    found = []
    for path in glob.glob(f"{logdir}/events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "modelmem":
                    found.append(payload.decode(tf.make_ndarray(value.tensor)[0]))
    return found


def test_cli_loadbench_measures_every_format_and_writes_the_logdir(tiny_model_path, tmp_path, capsys):
    workdir = tmp_path / "files"
    assert cli.main(["loadbench", tiny_model_path, "--repeats", "1", "--logdir", str(tmp_path / "logs"),
                     "--workdir", str(workdir)]) == 0
    table = capsys.readouterr().out
    (bench,) = _read_loadbench(tmp_path / "logs")
    assert bench.model_name == "tiny.keras"
    assert [(r.format, r.mode) for r in bench.results] == loadbench.RUNS
    for r in bench.results:
        assert r.error == "", (r.format, r.mode, r.error)
        assert r.repeats == 1 and r.peak_rss_bytes > 0
        if r.format != loadbench.BASELINE:
            assert r.file_bytes > 0 and r.load_seconds > 0
        assert r.format in table
    # The optimizer state trained into the file is really there (the point of compile=True vs False).
    from tb_modelmem.readers.model_file import read_path

    saved = read_path(str(workdir / "model.keras"))
    assert any(v.role == "optimizer_slot" for v in saved.variables)
    # ... and the tab's Load view is served the same figures by the backend.
    from tests.support.plugin_harness import Served

    served = Served(str(tmp_path / "logs"))
    ((run, tag),) = [key for key, info in served.tags().items() if info["kind"] == "loadbench"]
    body = served.json("/loadbench", run=run, tag=tag)
    expected = [(r.format, r.file_bytes) for r in bench.results]
    assert [(r["format"], r["file_bytes"]) for r in body["results"]] == expected


def test_a_load_that_fails_reports_the_reason(tmp_path):
    with pytest.raises(RuntimeError) as exc:
        loadbench.measure_once("keras", "compile=False", str(tmp_path / "missing.keras"))
    assert "missing.keras" in str(exc.value) or "not found" in str(exc.value).lower()


@pytest.mark.parametrize("name", ["NoSuchNet", "mobilenet_v2", "__doc__", "imagenet_utils"])
def test_unknown_model_name_is_a_one_line_error(name, capsys):
    """Names of keras.applications submodules and attributes are not model builders."""
    assert cli.main(["loadbench", name, "--repeats", "1"]) == 2
    err = capsys.readouterr().err
    assert err == f"tb-modelmem: error: {name}: neither a saved model path nor a keras.applications model name\n"


def test_without_a_baseline_nothing_is_shown_above_it():
    """A failed import-only child leaves no baseline: 'above baseline' is '-', not the whole peak RSS."""
    from tb_modelmem.schema.records import LoadBench, LoadResult

    bench = LoadBench("tiny.keras", [
        LoadResult(loadbench.BASELINE, "import tensorflow, keras", error="load failed: MemoryError"),
        LoadResult("keras", "compile=True", file_bytes=24_576, load_seconds=0.412, peak_rss_bytes=805_306_368,
                   repeats=3)])
    row = loadbench.format_table(bench).splitlines()[-1].split()
    assert row[:6] == ["keras", "compile=True", "0.02", "0.412", "768.0", "-"], row
