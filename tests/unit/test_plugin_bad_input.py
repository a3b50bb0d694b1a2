"""Bad input never takes anything down: each faulty item gets a clear error, the rest works."""

from __future__ import annotations

import json
import os
import zlib

import pytest

from tb_modelmem import summary
from tb_modelmem.schema.names import WEIGHT
from tests.support.bad_input import XSS, good_breakdown, raw_summary
from tests.support.plugin_harness import Served, write_events


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    logdir = str(tmp_path_factory.mktemp("logs"))
    future_payload = zlib.compress(json.dumps({"schema": 99, "kind": "breakdown", "data": {}}).encode())
    good = summary.pb("storage", good_breakdown())
    write_events(os.path.join(logdir, "good"), [(1, good),
                                                (2, raw_summary("garbage", [b"\x00not zlib"])),
                                                (2, raw_summary("future_schema", [future_payload])),
                                                (2, raw_summary("future_meta", [good.value[0].tensor.string_val[0]],
                                                                content=b'{"version": 99, "kind": "breakdown"}')),
                                                (2, raw_summary("foreign_meta", [b"x"], content=b"\x08\x01")),
                                                (2, raw_summary("empty", []))])
    truncated = write_events(os.path.join(logdir, "truncated"), [(s, good) for s in range(5)])
    with open(truncated, "r+b") as f:
        f.truncate(os.path.getsize(truncated) - 7)
    return Served(logdir)


def test_good_item_served_with_names_as_data(served):
    body = served.json("/breakdown", run="good", tag="storage")
    assert body["totals"][WEIGHT] == 48
    assert body["variables"]["rows"][0]["name"] == f"{XSS}/kernel"  # JSON data; the tab renders it as text
    assert served.get("/breakdown", run="good", tag="storage").headers["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("tag, reason", [
    ("garbage", "corrupt or foreign"),
    ("future_schema", "newer tb_modelmem"),
    ("future_meta", "newer tb_modelmem"),
    ("foreign_meta", "not tb_modelmem metadata"),
    ("empty", "empty"),
])
def test_each_bad_item_gets_a_clear_422(served, tag, reason):
    response = served.settled("/breakdown", run="good", tag=tag)
    assert response.status_code == 422
    assert reason in response.get_data(as_text=True)


def test_listing_shows_errors_per_tag_and_keeps_the_rest(served):
    tags = served.tags()
    assert "newer tb_modelmem" in tags[("good", "future_meta")]["error"]
    assert tags[("good", "storage")]["error"] is None and tags[("good", "storage")]["kind"] == "breakdown"


def test_truncated_event_file_keeps_records_before_the_cut(served):
    steps = served.json("/steps", run="truncated", tag="storage")["steps"]
    assert [s["step"] for s in steps] == [0, 1, 2, 3]  # the last, cut record is dropped, nothing else
    assert served.json("/breakdown", run="truncated", tag="storage", step=3)["totals"][WEIGHT] == 48


@pytest.mark.parametrize("params, code", [
    ({}, 400),
    ({"run": "good"}, 400),
    ({"run": "good", "tag": "storage", "step": "abc"}, 400),
    ({"run": "good", "tag": "storage", "step": "-1"}, 400),
    ({"run": "good", "tag": "storage", "step": "7"}, 404),
    ({"run": "nope", "tag": "storage"}, 404),
    ({"run": "good", "tag": "x" * 5000}, 404),  # long names are fine (TensorBoard keeps them)...
    ({"run": "good", "tag": "x" * 70_000}, 400),  # ...up to a bound
    ({"run": "good", "tag": "storage", "offset": "-3"}, 400),
    ({"run": "good", "tag": "storage", "limit": "lots"}, 400),
])
def test_bad_queries_are_4xx_never_500(served, params, code):
    response = served.settled("/breakdown", **params)
    assert response.status_code == code, response.get_data(as_text=True)
    assert response.get_data(as_text=True).strip()


@pytest.mark.parametrize("path", ["/../setup.py", "/index.js/../../setup.py", "/%2e%2e/setup.py",
                                  "/static/../../setup.py", "/records.py"])
def test_no_path_outside_the_allowlist_is_served(served, path):
    response = served.client.get("/data/plugin/modelmem" + path)
    assert response.status_code == 404
    assert b"def " not in response.get_data()


def test_a_listing_that_fails_once_keeps_that_sources_items(tmp_path, monkeypatch):
    """A data provider call that fails now and then (a busy data server) does not make a run's
    items vanish from the pickers until the next listing: the source's last items stay."""

    write_events(str(tmp_path / "run"), [(0, summary.pb("storage", good_breakdown()))])
    served = Served(str(tmp_path))
    assert ("run", "storage") in served.tags()
    source = served.plugin._sources[0]

    def fails(*args, **kwargs):
        raise RuntimeError("the data server did not answer")

    monkeypatch.setattr(source, "list", fails)
    served.plugin._listing.clear()  # the next request lists again (as after LISTING_SECONDS)
    assert ("run", "storage") in served.tags()
    assert served.json("/breakdown", run="run", tag="storage")["variable_count"] == len(good_breakdown().variables)
