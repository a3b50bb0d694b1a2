"""join.Joiner's work done ahead of the profile (Joiner.prepare) never decides for the profile's names."""

from __future__ import annotations

from tb_modelmem.join import GraphAnalysis, Joiner, OpGraph, Vocabulary
from tb_modelmem.records import FORWARD


def test_a_join_prepared_before_the_names_is_redone_when_the_names_change_the_renaming_rule():
    """A model with layers "dense", "dense_1" and "flatten". Its traced scope "dense_1" is either
    layer "dense_1" (scopes named as the layers) or layer "dense" renamed (Keras 3 adds one
    "_N" to each scope): the trace's other scopes decide. Prepared with no names, nothing says
    the scopes were renamed. A profile whose "flatten" ran as "flatten_1" says they were."""
    vocabulary = Vocabulary(["dense", "dense_1", "flatten"])
    graphs = [OpGraph({"dense_1/MatMul": "MatMul"}, {"dense_1/MatMul": []})]
    Joiner.prepare(vocabulary, graphs)

    renamed = Joiner.reused(vocabulary, graphs, ["flatten_1/Reshape", "dense_1/MatMul"])
    assert renamed.assign("dense_1/MatMul", "MatMul") == ("dense", FORWARD)
    assert renamed.assign("flatten_1/Reshape", "Reshape") == ("flatten", FORWARD)

    as_named = Joiner.reused(vocabulary, graphs, ["flatten/Reshape", "dense_1/MatMul"])
    assert as_named.assign("dense_1/MatMul", "MatMul") == ("dense_1", FORWARD)
    # the prepared join is kept for the names that keep its rule; the renamed one is its own
    assert len(GraphAnalysis.reused(vocabulary, graphs).joined) == 2
