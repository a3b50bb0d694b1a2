"""A serialized GraphDef (with its function library) as ``join.OpGraph``s and output specs. No TF.

Old log dirs keep their traced graphs as GraphDefs: a TF1 ``FileWriter(graph=...)`` run graph,
or the function graphs of a TF2 ``trace_export``. Variables are the graph's own variable ops
(TF1) or a function's resource arguments (TF2, named by the argument). Output shapes come
from ``_output_shapes`` attributes where the writer added them.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

from tensorboard.compat.proto import graph_pb2, types_pb2

from tb_modelmem.readers.dtypes import dtype_name, dtype_size
from tb_modelmem.readers.graph_info import GraphInfo, OutputSpec
from tb_modelmem.rules.join import OpGraph

_VARIABLE_OPS = frozenset({"VariableV2", "VarHandleOp", "Variable"})
_DTYPE_ATTRS = ("T", "dtype", "out_type", "DstT", "Tout")

def graph_info_from_graph_defs(graph_defs: Iterable[graph_pb2.GraphDef]) -> GraphInfo:
    """Op graphs and output specs of GraphDefs and every function in their libraries."""
    outputs: Dict[str, List[OutputSpec]] = {}
    info = GraphInfo(outputs)
    seen_functions = set()
    for graph_def in graph_defs:
        info.graphs.append(_graph(graph_def.node, (), outputs))
        for function in graph_def.library.function:
            if function.signature.name in seen_functions:
                continue
            seen_functions.add(function.signature.name)
            args = [(a.name, a.type) for a in function.signature.input_arg]
            info.graphs.append(_graph(function.node_def, args, outputs))
    return info


def parse_graph_def(data: bytes) -> Optional[graph_pb2.GraphDef]:
    """A GraphDef from its bytes, None if they are not one."""
    try:
        graph_def = graph_pb2.GraphDef.FromString(data)
    except Exception:  # DecodeError, or a foreign blob under the graph plugin's name
        return None
    return graph_def if graph_def.node or graph_def.library.function else None


def _graph(nodes: Iterable, args: Iterable[Tuple[str, int]], outputs: Dict[str, List[OutputSpec]]) -> OpGraph:
    types: Dict[str, str] = {}
    inputs: Dict[str, List[str]] = {}
    variables: Dict[str, str] = {}
    for name, dtype in args:
        types[name], inputs[name] = "_Arg", []
        if dtype == types_pb2.DT_RESOURCE:
            variables[name] = name
    for node in nodes:
        types[node.name] = node.op
        inputs[node.name] = [_source(i) for i in node.input if not i.startswith("^")]
        if node.op in _VARIABLE_OPS:
            variables[node.name] = node.name
        specs = _specs(node)
        if specs is not None:
            outputs.setdefault(node.name, specs)
    return OpGraph(types, inputs, variables)


def _source(tensor: str) -> str:
    """The node an input names: "node", "node:1" (GraphDef) or "node:out_name:0" (FunctionDef)."""
    return tensor.split(":", 1)[0]


def _specs(node: Any) -> Optional[List[OutputSpec]]:
    shapes = node.attr["_output_shapes"].list.shape if "_output_shapes" in node.attr else None
    if not shapes:
        return None
    dtype = next((node.attr[a].type for a in _DTYPE_ATTRS if a in node.attr and node.attr[a].type), 0)
    if not dtype_size(dtype) and dtype not in (types_pb2.DT_RESOURCE, types_pb2.DT_VARIANT):
        return None  # an element size we cannot know: the output's bytes stay unknown
    out = []
    for shape in shapes:
        dims = None if shape.unknown_rank else tuple(None if d.size < 0 else int(d.size) for d in shape.dim)
        out.append((dims, dtype_name(dtype) if dtype else "", dtype_size(dtype)))
    return out
