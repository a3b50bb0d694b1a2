"""The paged tables' filter and order (views.Pager): what the tab's filter boxes send."""

from tb_modelmem.plugin.views import Pager


def pager() -> Pager:
    return Pager({"name": ["a/MatMul", "b/Conv2D", "c/Relu", "d/Add"],
                  "layer": ["m/conv1", "m/conv10", "m/conv1/inner", ""],
                  "op_type": ["MatMul", "_MklFusedConv2D", "Relu", "AddV2"],
                  "time_us": [3.0, 1.0, 2.0, None]}, "time_us")


def names(page) -> list:
    return [row["name"] for row in page["rows"]]


def test_path_prefix_exact_and_empty_filters():
    p = pager()
    assert names(p.page(query="layer^=m/conv1", sort="name", order="asc")) == ["a/MatMul", "c/Relu"]  # not conv10
    assert names(p.page(query="layer=m/conv10")) == ["b/Conv2D"]
    assert names(p.page(query="layer=")) == ["d/Add"]  # ops on no layer
    assert names(p.page(query="layer:conv1", sort="name", order="asc")) == ["a/MatMul", "b/Conv2D", "c/Relu"]


def test_terms_combine_and_any_column_matches_any_case():
    p = pager()
    assert names(p.page(query="type:fused")) == ["b/Conv2D"]  # the Type column's label works too
    assert names(p.page(query="RELU")) == ["c/Relu"]
    assert names(p.page(query="layer^=m relu")) == ["c/Relu"]


def test_order_puts_unknown_values_last_both_ways():
    p = pager()
    assert names(p.page(sort="time_us", order="desc")) == ["a/MatMul", "c/Relu", "b/Conv2D", "d/Add"]
    assert names(p.page(sort="time_us", order="asc")) == ["b/Conv2D", "c/Relu", "a/MatMul", "d/Add"]
    assert p.page(offset=3, limit=5)["rows"] == [{"name": "d/Add", "layer": "", "op_type": "AddV2", "time_us": None}]
