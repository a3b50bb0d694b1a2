"""The paged tables' filter and order (views.Pager): what the tab's filter boxes send; the layer tree
answers carry, column by column (views.layer_tree); who owns a variable and what counts as a
parameter in a served breakdown (views.BreakdownView)."""

from tb_modelmem.plugin.views.breakdown import BreakdownView
from tb_modelmem.plugin.views.pager import Pager
from tb_modelmem.plugin.views.trees import appended, layer_tree
from tb_modelmem.schema.names import NON_TRAINABLE, OPTIMIZER_SLOT, OTHER, WEIGHT
from tb_modelmem.schema.records import Breakdown, VariableRecord


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


def test_double_quotes_keep_a_term_with_spaces_whole():
    p = Pager({"name": ["aten::div (optimizer)", "aten::div", "aten::mul (optimizer)"]}, "name")
    assert names(p.page(query='name="aten::div (optimizer)"')) == ["aten::div (optimizer)"]
    assert names(p.page(query='op=aten::div')) == ["aten::div"]  # unquoted: exact, so not the optimizer's
    assert names(p.page(query='"div (opt"')) == ["aten::div (optimizer)"]
    assert names(p.page(query='name="aten::mul (optimizer)')) == ["aten::mul (optimizer)"]  # unclosed: to the end


def test_order_puts_unknown_values_last_both_ways():
    p = pager()
    assert names(p.page(sort="time_us", order="desc")) == ["a/MatMul", "c/Relu", "b/Conv2D", "d/Add"]
    assert names(p.page(sort="time_us", order="asc")) == ["b/Conv2D", "c/Relu", "a/MatMul", "d/Add"]
    assert p.page(offset=3, limit=5)["rows"] == [{"name": "d/Add", "layer": "", "op_type": "AddV2", "time_us": None}]


def test_no_page_is_longer_than_max_page_on_any_path():
    from tb_modelmem.plugin.views.pager import FIRST_PAGES, MAX_PAGE

    big = Pager({"name": [f"op{i}" for i in range(FIRST_PAGES + 10)], "time_us": list(range(FIRST_PAGES + 10))},
                "time_us")
    assert len(big.page(limit=FIRST_PAGES)["rows"]) == MAX_PAGE  # the heap path of an unsorted first screen
    assert len(big.page(limit=FIRST_PAGES, query="op")["rows"]) == MAX_PAGE  # the filtered path


def test_answers_slower_than_the_wait_are_202_then_200_and_joined(tmp_path):
    """Every build (record, its view, the breakdown it joins, the answer) may outlast the request's wait:
    each is a 202 ("still reducing"), never a 500, and the trace is not kept unjoined meanwhile."""
    import time

    from tests.support.hostile_logdir import write_hostile_logdir
    from tests.support.plugin_harness import Served

    served = Served(write_hostile_logdir(str(tmp_path)))
    served.plugin.store._sync_wait = 0.0  # no build finishes within the request
    statuses = []
    for _ in range(200):
        response = served.get("/ops", run="good", tag="ops")
        statuses.append(response.status_code)
        if response.status_code != 202:
            break
        time.sleep(0.05)
    assert statuses[0] == 202 and statuses[-1] == 200, statuses
    assert set(statuses) == {200, 202}
    assert served.json("/ops", run="good", tag="ops")["breakdown"]["tag"] == "storage"


def test_layer_tree_rows_are_depth_first_and_composites_add_their_descendants():
    # "m" is a composite of two leaves, one nested a level deeper; "x" stands alone.
    tree = layer_tree(["m/a", "m/b/c", "x"],
                      {"params": [10, 5, 7], "class_name": ["Dense", "Conv2D", "Add"],
                       "bytes": {"weight": [40, 20, 28], "optimizer_slot": [80, None, 0]}},
                      sums=("params", "time_us"), nested=("bytes",))
    columns = tree["columns"]
    assert tree["length"] == 5
    assert columns["layer"] == ["m", "m/a", "m/b", "m/b/c", "x"]
    assert columns["label"] == ["m", "a", "b", "c", "x"]
    assert columns["depth"] == [0, 1, 1, 2, 0]
    assert columns["leaf"] == [False, True, False, True, True]
    assert columns["params"] == [15, 10, 5, 5, 7]  # m = a + c; m/b = c
    assert columns["time_us"] == [0, 0, 0, 0, 0]  # a sum no path has is 0, not missing
    assert columns["class_name"] == [None, "Dense", None, "Conv2D", "Add"]  # composites have no own class
    assert columns["bytes"] == {"weight": [60, 40, 20, 20, 28], "optimizer_slot": [80, 80, None, None, 0]}


def test_a_models_own_layer_holds_the_layers_not_under_its_path():
    """A PyTorch model's own layer is its class name, beside its modules' paths: it sums them (rows checked
    against real models in test_pytorch_corpus); a model whose layers are under its name is left as it is."""
    own = {"params": [0, 10, 5]}
    tree = layer_tree(["Net", "conv", "fc/inner"], own, sums=("params",), root="Net")
    columns = tree["columns"]
    assert columns["layer"] == ["Net", "conv", "fc", "fc/inner"] and columns["depth"] == [0, 1, 1, 2]
    assert columns["params"] == [15, 10, 5, 5] and columns["whole_model"] == [True, False, False, False]
    keras = layer_tree(["m/a", "m/b"], {"params": [1, 2]}, sums=("params",), root="m")
    assert keras["columns"]["depth"] == [0, 1, 1] and "whole_model" not in keras["columns"]


def test_a_path_thousands_of_layers_deep_is_one_row_per_level_without_recursion():
    deep = "/".join(f"l{i}" for i in range(5000))
    tree = layer_tree([deep], {"params": [3]}, sums=("params",))
    assert tree["length"] == 5000
    assert tree["columns"]["params"] == [3] * 5000
    assert tree["columns"]["depth"][-1] == 4999


def test_rows_appended_to_a_column_table_keep_every_field_of_both():
    table = {"length": 2, "columns": {"layer": ["a", "b"], "bytes": {"weight": [1, 2]}}}
    both = appended(table, [{"layer": "", "group": "(optimizer)", "bytes": {"other": 5}}])
    assert both == {"length": 3, "columns": {"layer": ["a", "b", ""], "bytes": {"weight": [1, 2, None],
                                                                                "other": [None, None, 5]},
                                             "group": [None, None, "(optimizer)"]}}


def _variable(name: str, layer: str, shape: list, role: str, slot_of=None) -> VariableRecord:
    count = 1
    for dim in shape:
        count *= dim
    return VariableRecord(name, layer, shape, "float32", 4 * count, role, slot_of=slot_of)


def test_slots_are_charged_to_their_weights_layer_and_rng_state_is_no_parameter():
    variables = [
        _variable("enc/dense/kernel", "enc/dense", [8, 4], WEIGHT),  # 32 params, 128 B
        _variable("enc/bn/moving_mean", "enc/bn", [4], NON_TRAINABLE),  # 4 params, 16 B
        _variable("enc/dropout/seed_generator_state", "enc/dropout", [2], NON_TRAINABLE),  # state, not a param
        _variable("enc/my_seed_generator_state", "enc", [3], WEIGHT),  # only named like it: 3 params
        _variable("adam/enc_dense_kernel_m", "adam", [8, 4], OPTIMIZER_SLOT, "enc/dense/kernel"),  # to enc/dense
        _variable("adam/iteration", "adam", [], OTHER),  # no weight: stays on its own scope
    ]
    view = BreakdownView(Breakdown(source="keras", variables=variables))
    assert view.total_params == 32 + 4 + 3
    columns = view.layer_table["columns"]
    rows = dict(zip(columns["layer"], zip(columns["total_bytes"], columns["bytes"]["optimizer_slot"])))
    assert rows["enc/dense"] == (128 + 128, 128)  # its kernel and the kernel's slot
    assert rows["adam"] == (4, 0)  # the counter only
    assert rows["enc"] == (128 + 128 + 16 + 8 + 12, 128)  # a composite: itself and every layer under it
    assert view.totals == {WEIGHT: 128 + 12, NON_TRAINABLE: 16 + 8, OPTIMIZER_SLOT: 128, OTHER: 4}

    # A foreign writer that names a weight on a non-slot row: that row keeps its own layer.
    foreign = variables + [_variable("enc/extra", "enc/extra", [1], WEIGHT, "enc/dense/kernel")]
    rows = BreakdownView(Breakdown(source="keras", variables=foreign)).layer_table["columns"]
    assert dict(zip(rows["layer"], rows["total_bytes"]))["enc/extra"] == 4
