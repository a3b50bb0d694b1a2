"""Issue 9 acceptance: memory over repeated model builds and over steps (seed 004), each loop in a
fresh process, figures checked against gc counts taken by the same process without tb_modelmem."""

from __future__ import annotations

import os

import pytest

from tb_modelmem.rules.growth import slope, trend
from tests.support.plugin_harness import Served

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(mode: str, growth_loop):
    logdir, truth = growth_loop(mode)
    body = Served(logdir).json("/growth", run="train" if mode == "fit" else "builds", tag="memory")
    return truth, body, {g["series"]: g for g in body["growth"]}


def _increment(values):
    """The growth per build the process measured itself (all increments equal, or their median)."""
    return slope(list(range(len(values))), values)


@pytest.fixture(scope="module")
def keep(growth_loop):
    return _run("keep", growth_loop)


@pytest.fixture(scope="module")
def clear(growth_loop):
    return _run("clear", growth_loop)


def test_models_kept_in_a_list_grow_22_variables_per_build(keep):
    truth, body, growth = keep
    assert growth["live_variables"]["flagged"] and growth["live_variables"]["per_step"] == 22
    assert _increment(truth["variables"]) == 22 == truth["model_variables"]
    # its bytes: the model's variables, Adam's slots and counters, and the loss tracker's two
    assert growth["live_variable_bytes"]["per_step"] == truth["model_bytes"]
    named = {m["name"] for m in body["explained_by"]["models"]}
    assert set(truth["kept_models"]) <= named  # every surviving model is named
    assert growth["live_models"]["flagged"] and growth["live_models"]["per_step"] == 1


def test_clear_session_frees_the_variables_but_the_traced_graphs_stay(clear):
    truth, body, growth = clear
    assert not growth["live_variables"]["flagged"] and truth["variables"] == [0] * len(truth["variables"])
    assert growth["rss_bytes"]["flagged"] and growth["rss_bytes"]["per_step"] > 2**20
    assert growth["graph_ops"]["flagged"]
    assert growth["graph_ops"]["per_step"] == _increment(truth["operations"])  # gc.get_objects(), independently
    functions = body["explained_by"]["graph_ops_by_function"]
    assert functions[0]["name"] == "one_step_on_data"  # Keras' traced train step is what survives


def test_tf1_graphs_built_into_the_default_graph_grow_its_operations(growth_loop):
    truth, _, growth = _run("tf1", growth_loop)
    assert growth["graph_ops"]["flagged"]
    assert growth["graph_ops"]["per_step"] == _increment(truth["operations"])


def test_a_plain_fit_over_epochs_flags_nothing(growth_loop):
    _, body, growth = _run("fit", growth_loop)
    assert body["samples"] >= 10
    assert [name for name, g in growth.items() if g["flagged"]] == []
    assert growth["live_variables"]["per_step"] == 0 and growth["graph_ops"]["per_step"] == 0
    labels = [entry["label"] for entry in body["labels"]]
    assert labels[0] == "train begin" and labels[-1] == "train end"


def test_a_warm_up_jump_is_not_growth_and_a_steady_rise_is():
    steps = list(range(12))
    assert not trend("graph_ops", steps, [0] + [900] * 11, 1.0)["flagged"]  # the train function traced once
    assert trend("graph_ops", steps, [900 * s for s in steps], 1.0)["flagged"]
    assert not trend("rss_bytes", steps, [100, 400, 90, 410, 95, 405, 100, 400, 90, 410, 95, 405], 1.0)["flagged"]
    assert "too few" in trend("live_variables", [0, 1], [0, 22], 0.5)["reason"]


def test_a_line_below_an_earlier_census_cut_has_unknown_growth_not_its_whole_count():
    """The census keeps its top lines and sums the rest into "(other)": a line that appears at the
    last sample may have been below the cut at the first, so its growth is unknown, and "(other)"
    keeps one name (it compares across samples whatever its tail holds)."""
    from tb_modelmem.capture.process import _top
    from tb_modelmem.rules.growth import _movers
    from tb_modelmem.schema.names import OTHER_LINE
    from tb_modelmem.schema.records import Count

    first = _top([Count(name=f"t{i}", count=100 - i) for i in range(50)], by="count", n=40)
    last = _top([Count(name="risen", count=500)] + [Count(name=f"t{i}", count=100 - i) for i in range(45)],
                by="count", n=40)
    assert first[-1].name == last[-1].name == OTHER_LINE
    rows = {m["name"]: m for m in _movers(first, last, steps=2)}
    assert rows["risen"]["grown"] is None and rows["risen"]["new"] is None  # unknown, not +500
    assert OTHER_LINE not in rows or rows[OTHER_LINE]["grown"] == last[-1].count - first[-1].count
