"""The traced graphs of a tf.function (or a TF1 graph) as ``join.OpGraph``s, with each captured
variable handle named as the breakdown names that variable, and each op's output specs.

Reads names, types, shapes and dtypes only. A tf.function contributes every concrete function
traced so far and the functions they call (nested calls, loop bodies).
"""

from __future__ import annotations

import collections
import inspect
import sys
import threading
import weakref
from typing import Any, Collection, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

from tb_modelmem.readers.graph_info import GraphInfo, OutputSpec
from tb_modelmem.rules.join import OpGraph

_VARIABLE_OPS = frozenset({"VariableV2", "VarHandleOp", "Variable"})


class OutputSpecs(Mapping[str, List[OutputSpec]]):
    """Op name -> its output specs, each read from TensorFlow when first asked: a profile ran
    about half the ops of a training step's graph (ResNet50: 8,356 of 14,481), and reading a
    spec is most of what reading the graph costs. Holds the ops (so their graph) while kept."""

    def __init__(self) -> None:
        self._ops: Dict[str, Any] = {}
        self._read: Dict[str, List[OutputSpec]] = {}

    def add(self, ops: Dict[str, Any]) -> None:
        """A graph's ops by name. The first graph to name an op keeps it (an outer graph's op
        before a function's)."""
        known = self._ops
        known.update({name: op for name, op in ops.items() if name not in known})

    def __getitem__(self, name: str) -> List[OutputSpec]:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def get(self, name: str, default: Any = None) -> Any:
        """The specs of op ``name``, read now if not yet; ``default`` if no graph has it. One
        call where ``in`` and ``[]`` would be two: it is asked for every op a profile ran."""
        found = self._read.get(name)
        if found is None:
            op = self._ops.get(name)
            if op is None:
                return default
            found = self._read[name] = [_spec(t) for t in op.outputs]
        return found

    def read_ahead(self, until: "threading.Event") -> None:
        """Read specs not asked for yet, in graph order, until ``until`` (a threading.Event) is
        set: what ``trace()`` does with the time TensorFlow spends writing the profile. Not
        alongside ``__getitem__``: the caller stops this before asking."""
        for name, op in self._ops.items():
            if until.is_set():
                return
            if name not in self._read:
                self._read[name] = [_spec(t) for t in op.outputs]

    def __contains__(self, name: object) -> bool:
        return name in self._ops

    def __iter__(self) -> Iterator[str]:
        return iter(self._ops)

    def __len__(self) -> int:
        return len(self._ops)


def graph_info(source: Any, variables: Iterable[Any] = (), ran: Optional[Collection[str]] = None) -> GraphInfo:
    """Output specs and op graphs of a tf.function, ConcreteFunction, tf.Graph, or a Python
    function calling tf.functions (Keras 3 ``model.train_function``); call it once before
    profiling so the function is traced. ``variables`` (Keras or tf variables) name the
    handles the graphs capture as the breakdown does; others keep TensorFlow's names.

    ``ran``: the concrete functions the profile saw called (``xspace.functions_run``). A
    tf.function holds every trace it made, and most have two: the first call's, which also
    created the optimizer's slots, and the one every later step runs. Only those that ran are
    read (with the functions they call); if none of them is named there, all are.

    Reading every op through TensorFlow's Python API is most of what a ``trace()`` adds to
    a step, and a loop profiled every N steps asks again for the same graphs: the last
    answers are kept for graphs that are still alive and unchanged (``Graph.version``)."""
    names = variable_names(variables)
    traced = list(_graphs_of(source))
    top = [graph for name, graph in traced if name in (ran or ())] or [graph for _, graph in traced]
    key = (tuple((id(g), getattr(g, "version", None)) for g in top), tuple(sorted(names.items())))
    kept = _RECENT.get(key)
    if kept is not None and all(ref() is g for ref, g in zip(kept[0], top)):
        _RECENT.move_to_end(key)
        return kept[1]
    info = _read_graphs(top, names)
    try:
        refs = [weakref.ref(g) for g in top]
    except TypeError:  # a graph object that cannot be weakly referenced: not kept
        return info
    _RECENT[key] = (refs, info)
    while len(_RECENT) > _KEEP:
        _RECENT.popitem(last=False)
    return info


def likely_run(source: Any) -> Set[str]:
    """The concrete functions a profiled step most likely ran, known before its profile is read:
    the latest trace of each tf.function ``source`` calls (TensorFlow numbers its functions in
    the order it traces them, "__inference_train_step_41238"). ``trace()`` reads those graphs
    while TensorFlow writes the profile; the profile's own list (``xspace.functions_run``)
    then decides which are used, so a wrong guess costs time, never a figure."""
    if hasattr(source, "_list_all_concrete_functions"):
        names = [_function_name(f) for f in source._list_all_concrete_functions()]
        newest = max(filter(None, names), key=_trace_number, default=None)
        return {newest} if newest else set()
    if inspect.isfunction(source) or inspect.ismethod(source):
        return set().union(*map(likely_run, _wrapped_tf_functions(source)))
    return {name for name, _ in _graphs_of(source) if name}


def _trace_number(function_name: str) -> int:
    number = function_name.rpartition("_")[2]
    return int(number) if number.isdigit() else -1


_KEEP = 2  # graph infos kept: a training step's, and one more (an evaluation step, a GAN's other step)
_RECENT: "collections.OrderedDict[Any, Tuple[List[Any], GraphInfo]]" = collections.OrderedDict()


def _read_graphs(top: List[Any], names: Dict[int, str]) -> GraphInfo:
    pending, seen = list(top), set()
    outputs = OutputSpecs()
    graphs: List[OpGraph] = []
    while pending:
        graph = pending.pop(0)  # outer graphs first: an inner capture is an outer placeholder
        if id(graph) in seen:
            continue
        seen.add(id(graph))
        for v in getattr(graph, "variables", ()):
            names.setdefault(id(_handle(v)), _tf_name(v))
        graphs.append(_op_graph(graph, names, outputs))
        pending.extend(f.graph for f in getattr(graph, "_functions", {}).values()
                       if getattr(f, "graph", None) is not None)
    return GraphInfo(outputs, graphs)


def variables_of(model: Any, optimizer: Any = None) -> List[Any]:
    """Every variable object of ``model`` and ``optimizer``, as ``summary.variables`` takes them
    (Keras model or layer, tf.Module, tf.train.Checkpoint, nested list or dict of variables)."""
    import keras

    tf = sys.modules.get("tensorflow")  # used only where the process has it (Keras on torch or JAX has not)
    if tf is not None and isinstance(model, tf.train.Checkpoint):
        found: List[Any] = []
        for obj in tf.train.TrackableView(model).descendants():
            if isinstance(obj, (keras.layers.Layer, keras.optimizers.Optimizer)):
                found += list(obj.variables)
            elif isinstance(obj, (tf.Variable, keras.Variable)):
                found.append(obj)
    elif isinstance(model, keras.layers.Layer) or (tf is not None and isinstance(model, tf.Module)):
        found = list(model.variables)
        optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
    else:
        found = keras.tree.flatten(model)
    for each in optimizer if isinstance(optimizer, (list, tuple)) else [optimizer]:
        if each is not None:
            found += list(each.variables)
    return found


def variable_names(variables: Iterable[Any]) -> Dict[int, str]:
    """id(resource handle) -> the variable's name as the breakdown records it (a Keras
    variable's path, a tf.Variable's name without ":0")."""
    import keras

    names: Dict[int, str] = {}
    for var in variables:
        if isinstance(var, keras.Variable):
            storage = getattr(var, "_value", None)
            if storage is not None:
                names[id(_handle(storage))] = var.path
        else:
            names[id(_handle(var))] = _tf_name(var)
    return names


def _op_graph(graph: Any, names: Dict[int, str], outputs: OutputSpecs) -> OpGraph:
    """The graph's dataflow, in one pass over its ops, which also go to ``outputs`` (their specs
    are read when asked)."""
    ops: Dict[str, Any] = {}
    types: Dict[str, str] = {}
    inputs: Dict[str, List[str]] = {}
    variables: Dict[str, str] = {}
    for op in graph.get_operations():
        name, kind = op.name, op.type
        types[name] = kind
        inputs[name] = [t.op.name for t in op.inputs]
        if kind in _VARIABLE_OPS:  # a TF1 variable, or a handle created in the graph
            variables[name] = name
        ops[name] = op
    outputs.add(ops)
    for external, internal in getattr(graph, "captures", ()):
        name = names.get(id(external))
        if name is not None:
            variables[internal.op.name] = name
            names[id(internal)] = name  # a function called from this graph captures it again
    return OpGraph(types, inputs, variables)


def _handle(var: Any) -> Any:
    return getattr(var, "handle", var)


def _tf_name(var: Any) -> str:
    name = getattr(var, "name", "")
    return name.rpartition(":")[0] if ":" in name else name


def _spec(tensor: Any) -> OutputSpec:
    raw = getattr(tensor, "_shape", None)  # a graph tensor's (dims, unknown rank) as the C API gives them:
    if type(raw) is tuple and len(raw) == 2:  # 1.6x faster than building a TensorShape per output
        dims, unknown_rank = raw  # an unknown dimension is -1
        dims = None if unknown_rank else tuple(dims) if -1 not in dims else tuple(None if d < 0 else d for d in dims)
    else:
        dims = None if tensor.shape.rank is None else tuple(tensor.shape.as_list())
    dtype = tensor.dtype
    found = _DTYPES.get(id(dtype))  # by identity: hashing a DType runs Python code, and it computes its
    if found is None or found[0] is not dtype:  # name and size anew on every read (1.3 µs an output)
        found = _DTYPES[id(dtype)] = (dtype, dtype.name, int(dtype.size))
    return dims, found[1], found[2]


# id(DType) -> (the DType, held so its id is never another's; its name; bytes per element)
_DTYPES: Dict[int, Tuple[Any, str, int]] = {}


def _graphs_of(source: Any) -> Iterator[Tuple[Optional[str], Any]]:
    """(concrete function name or None, graph) of each graph ``source`` runs."""
    if hasattr(source, "get_operations"):  # tf.Graph / FuncGraph
        yield None, source
    elif hasattr(source, "graph") and hasattr(source.graph, "get_operations"):  # ConcreteFunction
        yield _function_name(source), source.graph
    elif hasattr(source, "_list_all_concrete_functions"):  # tf.function: every signature traced so far
        yield from ((_function_name(f), f.graph) for f in source._list_all_concrete_functions())
    elif inspect.isfunction(source) or inspect.ismethod(source):  # Python code calling tf.functions
        yield from (found for f in _wrapped_tf_functions(source) for found in _graphs_of(f))
    else:
        raise TypeError(f"expected a tf.function, ConcreteFunction, tf.Graph or a Python function calling "
                        f"tf.functions, got {type(source).__name__}")


def _function_name(function: Any) -> Optional[str]:
    name = getattr(function, "name", None)
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else name


def model_in(function: Any, depth: int = 3) -> Any:
    """What a training function trains, when the caller does not say: the Keras models and
    optimizers it closes over (Keras 3's ``model.train_function``, closures) or names as
    globals (a tutorial's ``train_step`` using ``generator``, ``generator_optimizer``...).
    One model: that model; several, or models with optimizers of their own (a GAN): a
    ``tf.train.Checkpoint`` of them all; none (or no Keras in this process: a flax or plain JAX step): None."""
    keras = sys.modules.get("keras")
    if keras is None:
        return None
    found: Dict[str, Any] = {}
    pending, seen = [(function, depth)], set()
    while pending:
        fn, left = pending.pop(0)
        fn = getattr(fn, "_python_function", getattr(fn, "__func__", fn))
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        cells = [(name, c) for name, c in zip(getattr(getattr(fn, "__code__", None), "co_freevars", ()),
                                              getattr(fn, "__closure__", None) or ())]
        values = []
        for name, cell in cells:
            try:
                values.append((name, cell.cell_contents))
            except ValueError:
                continue
        names = getattr(getattr(fn, "__code__", None), "co_names", ())
        scope = getattr(fn, "__globals__", {})
        values += [(name, scope[name]) for name in names if name in scope]
        for name, value in values:
            if isinstance(value, (keras.Model, keras.optimizers.Optimizer)):
                found.setdefault(name if name.isidentifier() else f"object_{len(found)}", value)
            elif left > 1 and (inspect.isfunction(value) or hasattr(value, "_python_function")):
                pending.append((value, left - 1))
    models = {k: v for k, v in found.items() if isinstance(v, keras.Model)}
    optimizers = {k: v for k, v in found.items() if k not in models and getattr(v, "built", True)}
    own = {id(getattr(m, "optimizer", None)) for m in models.values()}
    if len(models) == 1 and all(id(o) in own for o in optimizers.values()):
        return next(iter(models.values()))
    if not models:
        return None
    import tensorflow as tf

    return tf.train.Checkpoint(**models, **optimizers)


def _wrapped_tf_functions(fn: Any, depth: int = 3) -> Iterator[Any]:
    """tf.functions a Python function closes over, looking ``depth`` closures deep."""
    fn = getattr(fn, "__func__", fn)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if hasattr(inner, "_list_all_concrete_functions"):
            yield inner
        elif depth > 1 and inspect.isfunction(inner):
            yield from _wrapped_tf_functions(inner, depth - 1)
