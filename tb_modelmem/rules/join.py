"""Which layer of the model, and which phase of the step, each traced op belongs to. No TF.

Decided by what an op reads and writes, not by the last component of its name:
- an op that reads or updates a variable belongs to the layer owning that variable (a slot
  to its weight's layer), so ``adam/AssignSubVariableOp_18`` is charged to ``dense_2``;
- the scopes of those ops teach how the trace renamed each layer (Keras 3 traces the
  layer ``layer_normalization`` as ``transformer_block_1/layer_normalization_1``, and a
  shared layer's second call as ``dense_3``); other ops of a scope follow it, and layers
  without variables are found by walking the model's layer tree with the same renaming;
- what is left takes the layer its consumers (else its producers) agree on: the optimizer's
  temporaries feed one weight's update, a gradient sum feeds one layer's backward pass.
Ops that belong to no layer keep an empty layer and say what they are through their phase
(loss, metrics, input, executor, the optimizer's own counters).

The same rules serve every source: a live tf.function (``capture.opgraph``), a GraphDef from
an old log dir, or op names alone (old RunMetadata), each giving as much as its data allows.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import re
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, TypeVar

from tb_modelmem.schema.names import (
    BACKWARD,
    EXECUTOR,
    FORWARD,
    INPUT,
    LOSS,
    METRICS,
    OPTIMIZER,
    OPTIMIZER_SLOT,
    UNATTRIBUTED_TYPE,
    WEIGHT,
)
from tb_modelmem.schema.records import Breakdown

_T = TypeVar("_T")
_SUFFIX = re.compile(r"_\d+$")
_CALL = re.compile(r"^(StatefulPartitionedCall|PartitionedCall|TPUPartitionedCall)(_\d+)?$")
_LOOP_PART = re.compile(r"^(body|cond)$")
# Op types that only move a function's arguments and results around.
_EXECUTOR_TYPES = frozenset({"_Retval", "_DeviceRetval", "NoOp", "_Send", "_Recv", "_HostSend", "_HostRecv",
                             "StatefulPartitionedCall", "PartitionedCall", "_SOURCE", "_SINK", "Const",
                             "VarHandleOp", "VariableV2", "Variable", "VarIsInitializedOp"})
# The step's logging: summaries written between steps (a TensorBoard callback's), and TF1's, serialized
# in the step they log (a tf.summary.image of the batch, a histogram of a gradient under "gradients/").
_SUMMARY_TYPES = frozenset({"ScalarSummary", "HistogramSummary", "ImageSummary", "AudioSummary", "AudioSummaryV2",
                            "TensorSummary", "TensorSummaryV2", "MergeSummary", "WriteSummary", "WriteScalarSummary",
                            "WriteHistogramSummary", "WriteImageSummary", "WriteAudioSummary", "WriteRawProtoSummary",
                            "WriteGraphSummary", "FlushSummaryWriter", "CreateSummaryFileWriter", "SummaryWriter",
                            "CloseSummaryWriter"})
_INPUT_TYPES = frozenset({"IteratorGetNext", "OptionalGetValue", "IteratorGetNextSync", "_Arg", "_DeviceArg",
                          "Placeholder", "MultiDeviceIteratorGetNextFromShard", "_EagerConst", "OptionalHasValue",
                          "IteratorGetNextAsOptional", "AnonymousIteratorV3", "MakeIterator"})
# Ops that pass a variable's value on unchanged: their consumers read the variable too.
_VALUE_TYPES = frozenset({"ReadVariableOp", "Identity", "Cast", "_MklToTf", "Enter", "Switch"})
_WRITE_PREFIXES = ("Assign", "ResourceApply", "ResourceSparseApply", "Apply", "SparseApply", "ResourceScatter",
                   "ScatterUpdate", "ScatterAdd", "ScatterSub")
_UPDATE_PREFIXES = _WRITE_PREFIXES[1:]  # types only an optimizer's update runs (metrics and moving averages assign too)
# Ops that test values rather than compute them (a LossScaleOptimizer checks each gradient with
# IsFinite and All): one that reads gradients computes none, so it is not the backward pass.
_TEST_TYPES = frozenset({"IsFinite", "IsInf", "IsNan", "All", "Any"})
# A loss's scope: Keras' compiled loss, or a loss object called in a custom training loop, which
# enters a scope of its own name (Keras 3's built-in losses: "sparse_categorical_crossentropy",
# "mean_squared_error", "huber_loss", ...); TF1's tf.losses scopes.
_LOSS_SCOPE = re.compile(r"^(compile_loss|loss|losses|total_loss|xent|\w*cross_?entropy\w*|\w*_error|\w*hinge|"
                         r"huber(_loss)?|log_cosh|kl_divergence|kld|poisson|cosine_similarity|ctc|dice|tversky|circle"
                         r")(_\d+)?$", re.I)
# Scopes optimizers apply gradients under (Keras 3: the optimizer's name, "adam_w" for AdamW; TF1: its class),
# read without underscores.
_OPTIMIZER_SCOPE = re.compile(r"^(adam|adamw|adamax|nadam|sgd|rmsprop|adagrad|adadelta|ftrl|lion|lamb|adafactor|muon|"
                              r"lossscaleoptimizer|gradientdescent|momentum|proximaladagrad|adagradda)$", re.I)
_NUMBERED = re.compile(r"_\d+$")
_METRIC_SCOPE = re.compile(r"^(accuracy|.*_accuracy|div_no_nan|mean|auc|precision|recall|metrics?|compile_metrics)"
                           r"(_\d+)?$", re.I)


@dataclasses.dataclass
class OpGraph:
    """One traced (function) graph, TF-free: each node's type and data inputs, and which
    nodes are variables (a TF2 captured handle, a TF1 VariableV2) and of which variable."""

    types: Dict[str, str]
    inputs: Dict[str, List[str]]
    variables: Dict[str, str] = dataclasses.field(default_factory=dict)  # node -> variable name


@dataclasses.dataclass
class Vocabulary:
    """The model's layers as the breakdown names them, and which layer owns each variable."""

    layers: List[str]  # layer paths ("functional/transformer_block/dense"), leaves and weightless ones
    variable_layer: Dict[str, str] = dataclasses.field(default_factory=dict)  # variable -> layer path
    variable_role: Dict[str, str] = dataclasses.field(default_factory=dict)  # variable -> role

    @classmethod
    def from_breakdown(cls, breakdown: Optional[Breakdown], owners: Optional[List[str]] = None) -> "Vocabulary":
        """Layers of a breakdown (variable scopes where it has no Keras layers); a slot is owned
        by its weight's layer; optimizer counters, under no layer, by none. ``owners``: the
        breakdown's ``rollup.owner_column``, when the caller has it already."""
        if breakdown is None:
            return cls([])
        from tb_modelmem.rules.rollup import model_layers, owner_column

        layers = model_layers(breakdown)
        known = set(layers)
        columns = breakdown.variables.columns
        owned = zip(columns["name"], owners or owner_column(breakdown))
        return cls(layers, {name: owner for name, owner in owned if owner in known},
                   dict(zip(columns["name"], columns["role"])))


def vocabulary_from_variables(names: Iterable[str]) -> Vocabulary:
    """Layers of a graph with no model config (a TF1 graph): one per variable scope; a
    variable named under another variable ("conv1/kernel/Adam_1") is that one's slot."""
    names = sorted(set(names))
    known = set(names)
    owner: Dict[str, str] = {}
    for name in names:
        base = name.rpartition("/")[0]
        owner[name] = base if base not in known else ""
    for name in names:
        base = name.rpartition("/")[0]
        if base in known:
            owner[name] = owner.get(base, "")  # a slot: its weight's layer
    layers = list(dict.fromkeys(o for o in owner.values() if o))
    return Vocabulary(layers, {n: o for n, o in owner.items() if o})


class LayerTree:
    """Layer paths as a tree: composite layers (a TransformerBlock, a nested Sequential, the
    model itself) are the inner nodes, so an op can be charged to the deepest layer it
    provably belongs to."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.children: Dict[str, Dict[str, str]] = {"": {}}  # path -> {child name: child path}
        for path in paths:
            parent = ""
            for part in filter(None, path.split("/")):  # "a//b" and "/a" have no empty layer names
                child = f"{parent}/{part}" if parent else part
                self.children[parent].setdefault(part, child)
                self.children.setdefault(child, {})
                parent = child

    def __contains__(self, path: str) -> bool:
        return path in self.children

    def common(self, paths: Iterable[str]) -> str:
        """Deepest path that is an ancestor (or equal) of every path given."""
        parts: Optional[List[str]] = None
        for path in paths:
            these = path.split("/")
            if parts is None:
                parts = these
            else:
                n = 0
                while n < min(len(parts), len(these)) and parts[n] == these[n]:
                    n += 1
                parts = parts[:n]
        return "/".join(parts or [])


def same_name(traced: str, given: str) -> bool:
    """True if ``traced`` is the scope name ``given`` as tf.name_scope may have uniquified it."""
    return traced == given or (traced.startswith(given + "_") and re.fullmatch(r"(_\d+)+", traced[len(given):])
                               is not None)


def node_entry(tables: Sequence[Mapping[str, _T]], name: str) -> Optional[_T]:
    """What the first of ``tables`` to hold it has for the graph node an executed op's name
    stands for: the name itself, else what follows each "/" in turn, longest first (a function
    inlined into a call carries the call node as a prefix); None if no table has any of them."""
    start = 0
    while True:
        candidate = name[start:] if start else name
        for table in tables:
            found = table.get(candidate)
            if found is not None:
                return found
        cut = name.find("/", start)
        if cut < 0:
            return None
        start = cut + 1


def strip_calls(name: str) -> str:
    """The op's name inside the function that defines it: an inlined call's node name and a
    loop body's frame ("StatefulPartitionedCall/", ".../while/body/_381/") come off."""
    if "PartitionedCall" not in name and "/body/" not in name and "/cond/" not in name:
        return name  # the common case, without splitting
    parts = name.split("/")
    start = 0
    for i in range(len(parts) - 1):
        if _LOOP_PART.match(parts[i]) and parts[i + 1].startswith("_") and parts[i + 1][1:].isdigit():
            start = i + 2
    while start < len(parts) - 1 and _CALL.match(parts[start]):
        start += 1
    return "/".join(parts[start:])


@functools.lru_cache(maxsize=1 << 16)  # a step's graphs repeat names (Adam's one update function per weight)
def makes_a_variable(name: str) -> bool:
    """Whether an op is a variable's initializer ("adam/fc1_kernel_momentum/Initializer/zeros"): a trace
    that ran one made state in its window (an optimizer's first step makes its slots)."""
    return "/Initializer/" in name


def backward_by_producers(op_type: str, producer_phases: Iterable[str], fused: bool = False) -> bool:
    """Whether an op its name puts in the forward pass is backward work, by the phases of the ops whose
    outputs it takes (constants left out): forward work never reads a gradient. TensorFlow names the
    tape's sum of a tensor's gradients ``AddN_2``, outside every scope; it is backward when it has
    producers and each one is. A fused XLA instruction also takes the forward values its computation
    re-reads (a layer norm's gradient reads the norm's mean), so one gradient among them is enough. An
    op that tests gradients (a LossScaleOptimizer's IsFinite) computes none."""
    if op_type in _TEST_TYPES:
        return False
    backward = [p == BACKWARD for p in producer_phases]
    return bool(backward) and (any(backward) if fused else all(backward))


def phase_by_name(name: str, op_type: str = "") -> str:
    """The phase an op's name and type show, when no graph says more ("" for kernel time no rule tied
    to an instruction: it may be any phase's)."""
    if op_type == UNATTRIBUTED_TYPE:
        return ""
    if op_type in _SUMMARY_TYPES:
        return EXECUTOR  # whatever scope it logs from
    path = strip_calls(name)
    framed = f"/{path}/"  # scope tests as substring searches: a graph has ~15,000 names, each asked once
    if "/gradient_tape/" in framed or "/gradients/" in framed or "_grad/" in framed:
        return BACKWARD
    if op_type in _INPUT_TYPES or name.startswith("_arg_"):
        return INPUT
    if op_type in _EXECUTOR_TYPES or name.startswith(("_retval_", "_SOURCE", "_SINK")):
        return EXECUTOR
    if op_type.startswith(_UPDATE_PREFIXES) or "/update_" in framed:
        return OPTIMIZER
    first, below, rest = path.partition("/")
    scope = _scope_phase(first)
    if scope != OPTIMIZER and below and _scope_phase(rest.partition("/")[0]) == OPTIMIZER:
        return OPTIMIZER  # the optimizer's scope one level down ("model/adam/...")
    return scope


@functools.lru_cache(maxsize=1 << 12)  # scope names repeat across a graph's ops
def _scope_phase(part: str) -> str:
    """The phase a scope component names: the optimizer's, the loss's, a metric's; else forward."""
    if _OPTIMIZER_SCOPE.match(_NUMBERED.sub("", part).replace("_", "")):
        return OPTIMIZER
    if _LOSS_SCOPE.match(part):
        return LOSS
    if _METRIC_SCOPE.match(part):
        return METRICS
    return FORWARD


def _scope_parts(name: str) -> List[str]:
    """Scope components of a node name with the backward-pass prefix removed
    ("gradient_tape/functional_1/dense_1/MatMul" -> functional_1, dense_1, MatMul)."""
    parts = strip_calls(name).split("/")
    for marker in ("gradient_tape", "gradients"):
        if marker in parts:
            parts = parts[parts.index(marker) + 1:]
    return parts


def _scopes_of(scope: str) -> List[str]:
    """The components of an op's scope (its name up to the last "/") as ``_scope_parts`` gives
    them, so ops of one scope are asked about once. The op's own name never counts as a scope
    or a frame: an op named "gradients" or "_3" is not the tape's prefix nor a loop's frame."""
    return _scope_parts(scope + "/op")[:-1] if scope else []


_UNSEEN: Any = object()  # a name not looked up yet
_KEEP = 2  # analyses and joiners kept, as opgraph keeps two graph readings: a training step's and one more


def _kept(cache: "collections.OrderedDict[Any, Any]", key: Any, graphs: Any, vocabulary: Vocabulary,
          make: Any) -> Any:
    """The entry kept under ``key`` for these same graphs (the object: each entry holds it, so
    its id is never another list's while kept) and an equal vocabulary; else ``make()``'s, kept
    with the last ``_KEEP``."""
    found = cache.get(key)
    if found is not None and found.graphs_given is graphs and found.vocabulary == vocabulary:
        cache.move_to_end(key)
        return found
    made = make()
    made.graphs_given = graphs
    cache[key] = made
    while len(cache) > _KEEP:
        cache.popitem(last=False)
    return made


class GraphAnalysis:
    """What the traced graphs alone say, whatever a trace ran: each graph's order, consumers and
    phases, the layer of every op that reads a variable, and the scope renamings those reads
    teach. It needs no profile, so ``trace()`` works it out while TensorFlow writes the profile
    (``reused``), and a loop profiled every N steps does it once."""

    _recent: "collections.OrderedDict[int, GraphAnalysis]" = collections.OrderedDict()

    @classmethod
    def reused(cls, vocabulary: Vocabulary, graphs: Sequence[OpGraph]) -> "GraphAnalysis":
        """The analysis of ``graphs`` (the same object: ``opgraph.graph_info`` keeps it) for
        ``vocabulary``, made once; it is held, so its id is never another list's while kept."""
        return _kept(cls._recent, id(graphs), graphs, vocabulary, lambda: cls(vocabulary, graphs))

    def __init__(self, vocabulary: Vocabulary, graphs: Sequence[OpGraph] = ()) -> None:
        self.vocabulary = vocabulary
        self.tree = LayerTree(vocabulary.layers)
        self.graphs = list(graphs)
        self.graphs_given: Any = None  # the graphs object ``reused`` was given (its cache checks identity)
        self.scopes: Dict[str, str] = {}  # traced scope -> layer path
        self.extra: Dict[str, List[int]] = {}  # parent layer path -> [exact, renamed] scope counts
        self.fed: Set[str] = set()  # forward-named ops that only feed the optimizer or metrics
        # renaming rule -> (assigned per graph, layer by scope, renamed children): what Joiners following it share
        self.joined: Dict[Tuple[bool, FrozenSet[str]], Tuple[Any, Any, Any]] = {}
        self.per_graph = [self._analyse(g) for g in self.graphs]

    def _analyse(self, graph: OpGraph
                 ) -> Tuple[List[str], Dict[str, List[str]], Dict[str, str], Dict[str, str], FrozenSet[str]]:
        """(topological order, consumers, phase, layer of ops that read a variable, the ops among
        them placed on the common layer of several: ``Joiner._by_dataflow`` learns nothing from
        those) of one graph."""
        order = _topological(graph)
        consumers: Dict[str, List[str]] = {n: [] for n in graph.types}
        for node, inputs in graph.inputs.items():
            for source in inputs:
                if source in consumers:
                    consumers[source].append(node)
        reads = self._variable_reads(graph, order)
        phase = self._phases(graph, order, reads, consumers)
        layer: Dict[str, str] = {}
        merged: Set[str] = set()
        for node, variables in reads.items():
            owners = {self.vocabulary.variable_layer[v] for v in variables if v in self.vocabulary.variable_layer}
            if owners and phase[node] not in (INPUT, EXECUTOR):
                layer[node] = self.tree.common(owners)
                if len(owners) > 1:
                    merged.add(node)
                if phase[node] in (FORWARD, BACKWARD):
                    self._learn_scope(_scope_parts(node), layer[node])
        return order, consumers, phase, layer, frozenset(merged)

    def _variable_reads(self, graph: OpGraph, order: List[str]) -> Dict[str, FrozenSet[str]]:
        """node -> variables whose handle or value it takes as an input (through value-passing ops).
        Frozen sets: a node reading one source's variables shares that source's set."""
        value_of = {node: frozenset((v,)) for node, v in graph.variables.items()}
        reads: Dict[str, FrozenSet[str]] = {}
        inputs, types = graph.inputs, graph.types
        for node in order:
            found: FrozenSet[str] = frozenset()
            for source in inputs.get(node, ()):
                held = value_of.get(source)
                if held is not None:
                    found = found | held if found else held
            if found:
                reads[node] = found
                if types.get(node) in _VALUE_TYPES:
                    value_of[node] = found
        return reads

    def _phases(self, graph: OpGraph, order: List[str], reads: Dict[str, FrozenSet[str]],
                consumers: Dict[str, List[str]]) -> Dict[str, str]:
        """Names give the backward pass, inputs and plumbing; variables give the optimizer (it
        updates weights, reads slots or its own counters) and metrics (state outside the model)."""
        types, inputs = graph.types, graph.inputs
        phase = {node: phase_by_name(node, kind) for node, kind in types.items()}
        for node in graph.variables:
            phase[node] = EXECUTOR
        said: Dict[Tuple[FrozenSet[str], bool], str] = {}  # what a set of variables read says: ops share sets
        for node in order:
            if phase[node] in (BACKWARD, INPUT, EXECUTOR):
                continue
            variables = reads.get(node)
            if variables:
                key = (variables, types[node].startswith(_WRITE_PREFIXES))
                verdict = said.get(key)
                if verdict is None:
                    verdict = said[key] = self._state_phase(*key)
                if verdict:
                    phase[node] = verdict
            elif phase[node] == FORWARD and backward_by_producers(types[node], (  # one outside the graph: not backward
                    phase.get(source, "") for source in inputs.get(node, ()) if types.get(source) != "Const")):
                phase[node] = BACKWARD
        for node in reversed(order):  # what only feeds the optimizer (or metrics) is part of it...
            if phase[node] == FORWARD and node not in reads:
                seen = {phase[c] for c in consumers[node]}
                if len(seen) == 1 and seen & {OPTIMIZER, METRICS}:
                    phase[node] = seen.pop()
                    self.fed.add(node)
        return phase

    def _state_phase(self, variables: FrozenSet[str], writes: bool) -> str:
        """The phase of an op reading (``writes``: updating) ``variables``, "" if they do not say."""
        roles, owned = self.vocabulary.variable_role, self.vocabulary.variable_layer
        known = [v for v in variables if v in roles]
        if any(roles[v] == OPTIMIZER_SLOT for v in known) or any(v not in owned for v in known):
            return OPTIMIZER  # slots, or the optimizer's own counters and learning rate
        if writes and any(roles[v] == WEIGHT for v in known):
            return OPTIMIZER
        if roles and not known:
            return METRICS  # state outside the model and optimizer: metric totals, counts
        return ""

    def _learn_scope(self, parts: List[str], path: str) -> None:
        """Record which traced scope prefix stands for ``path`` (and its ancestors)."""
        want = path.split("/")
        for skip in range(len(want)):  # ops traced outside the model's own call lack its leading scopes
            tail = want[skip:]
            if len(parts) > len(tail) and all(same_name(p, w) for p, w in zip(parts, tail)):
                for depth in range(1, len(tail) + 1):
                    scope, layer = "/".join(parts[:depth]), "/".join(want[:skip + depth])
                    known = self.scopes.get(scope)
                    self.scopes[scope] = layer if known in (None, layer) else self.tree.common([known, layer])
                    counts = self.extra.setdefault(layer.rpartition("/")[0], [0, 0])
                    counts[parts[depth - 1] != want[skip + depth - 1]] += 1
                return


class Joiner:
    """Assigns (layer, phase) to op names of a trace, using the model's vocabulary and, when
    there is one, the traced graph."""

    _recent: "collections.OrderedDict[Any, Joiner]" = collections.OrderedDict()

    @classmethod
    def reused(cls, vocabulary: Vocabulary, graphs: Sequence[OpGraph], names: Iterable[str]) -> "Joiner":
        """A Joiner, the same one when the same graphs (the same objects: ``opgraph.graph_info``
        keeps them), model and executed op names are joined again, as a loop profiled every N
        steps does; a first join of those graphs takes their analysis from ``GraphAnalysis.reused``."""
        executed = frozenset(names)
        return _kept(cls._recent, (id(graphs), executed), graphs, vocabulary,
                     lambda: cls(vocabulary, graphs, executed, GraphAnalysis.reused(vocabulary, graphs)))

    def __init__(self, vocabulary: Vocabulary, graphs: Sequence[OpGraph] = (), names: Iterable[str] = (),
                 analysis: Optional[GraphAnalysis] = None) -> None:
        """``names``: the trace's op names, which show how it renamed layers where no graph does.
        ``analysis``: the ``GraphAnalysis`` of these same graphs and vocabulary, when the caller
        has it already (``graphs`` is then not read again)."""
        analysis = analysis or GraphAnalysis(vocabulary, graphs)
        self.vocabulary = vocabulary
        self.tree = analysis.tree
        self.graphs = analysis.graphs
        self.graphs_given: Any = None  # the graphs object ``reused`` was given (its cache checks identity)
        self._scopes = analysis.scopes  # what the graphs' variable reads taught; a Joiner never writes it
        self._extra = {parent: list(counts) for parent, counts in analysis.extra.items()}  # + the names' renamings
        self._fed = analysis.fed
        for scope in {name.rpartition("/")[0] for name in names}:  # each scope once, not each op
            self._learn_renaming(_scopes_of(scope))
        # Whether a scope one "_N" longer than a layer's name is that layer renamed: the trace's
        # rule, and the parents where the counts say otherwise. All that names change here.
        totals = [sum(counts) for counts in zip(*self._extra.values())] or [0, 0]
        self._renamed_rule = totals[1] > totals[0]
        self._renamed_except = frozenset(parent for parent, (exact, renamed) in self._extra.items()
                                         if (renamed > exact) != self._renamed_rule)
        # The rest follows from the analysis and that rule, so joiners agreeing on it share it
        # (``prepare``: joined before the profile is read, the names' renamings rarely differ).
        decided = (self._renamed_rule, self._renamed_except)
        shared = analysis.joined.get(decided)
        if shared is None:
            self._by_scope: Dict[Tuple[str, str], str] = {}  # (scope, phase) -> layer found by walking names
            self._renamed: Dict[Tuple[str, str], Optional[str]] = {}  # (parent, traced scope) -> uniquified child
            self._assigned = [self._finish(g, order, consumers, dict(phase), dict(layer), merged)
                              for g, (order, consumers, phase, layer, merged) in zip(self.graphs, analysis.per_graph)]
            shared = analysis.joined[decided] = (self._assigned, self._by_scope, self._renamed)
            while len(analysis.joined) > _KEEP:
                del analysis.joined[next(iter(analysis.joined))]
        self._assigned, self._by_scope, self._renamed = shared
        self._found: Dict[str, Optional[Tuple[str, str]]] = {}

    @classmethod
    def prepare(cls, vocabulary: Vocabulary, graphs: Sequence[OpGraph]) -> None:
        """Analyse ``graphs`` and join them before any op name is known (``trace()`` does it
        while TensorFlow writes the profile): ``reused`` then finds the work done unless the
        profile's names change the renaming rule."""
        cls(vocabulary, graphs, (), GraphAnalysis.reused(vocabulary, graphs))

    def assign(self, name: str, op_type: str = "") -> Tuple[str, str]:
        """(layer path or "", phase) of an executed op."""
        found = self._lookup(name)
        if found is not None:
            return found
        phase = phase_by_name(name, op_type)
        if phase in (INPUT, EXECUTOR):
            return "", phase
        return self._layer_by_name(name, phase), phase

    # --- graph-based assignment -------------------------------------------------------------

    def _lookup(self, name: str) -> Optional[Tuple[str, str]]:
        """The (layer, phase) of the graph node an executed name stands for (``node_entry``)."""
        found = self._found.get(name, _UNSEEN)
        if found is _UNSEEN:
            found = self._found[name] = node_entry(self._assigned, name)
        return found

    def _finish(self, graph: OpGraph, order: List[str], consumers: Dict[str, List[str]], phase: Dict[str, str],
                layer: Dict[str, str], merged: FrozenSet[str] = frozenset()) -> Dict[str, Tuple[str, str]]:
        """Names, then dataflow, for the ops no variable placed."""
        for node in order:
            if node not in layer and phase[node] in (FORWARD, BACKWARD, OPTIMIZER, METRICS):
                found = self._layer_by_name(node, phase[node])
                if found:
                    layer[node] = found
                    if node in self._fed:  # ...unless it is inside a layer: then it is that layer's forward pass
                        phase[node] = FORWARD
        self._by_dataflow(graph, order, layer, phase, consumers, merged)
        return {node: (layer.get(node, ""), phase[node]) for node in graph.types}

    def _by_dataflow(self, graph: OpGraph, order: List[str], layer: Dict[str, str], phase: Dict[str, str],
                     consumers: Dict[str, List[str]], merged: FrozenSet[str] = frozenset()) -> None:
        """Unassigned compute ops take the one layer their consumers, else their producers, agree on.
        An op on the common layer of several (``merged``: a LossScaleOptimizer's cond reads every
        weight, so it is on the model's root) says nothing of which layer feeds it."""
        for nodes, neighbours in ((reversed(order), lambda n: consumers[n]),
                                  (order, lambda n: graph.inputs.get(n, ()))):
            for node in nodes:
                if node in layer or phase[node] not in (FORWARD, BACKWARD, OPTIMIZER) or graph.types[node] == "Const":
                    continue
                owners = {layer[m] for m in neighbours(node) if m in layer and m not in merged}
                if len(owners) == 1:
                    layer[node] = owners.pop()

    # --- names against the layer tree --------------------------------------------------------

    def _learn_renaming(self, parts: List[str]) -> None:
        """Count, down a scope path, components only one rule explains: "flatten_1" when the model
        has "flatten" but no "flatten_1" is renamed; "conv2d_1_2" is "conv2d_1" renamed."""
        node = ""
        for part in parts:
            children = self.tree.children.get(node, {})
            exact = part in children
            base = _SUFFIX.sub("", part)
            renamed = base != part and base in children
            if exact == renamed:  # neither (not a layer scope), or both (ambiguous): stop here
                return
            self._extra.setdefault(node, [0, 0])[renamed] += 1
            node = children[base if renamed else part]

    def _layer_by_name(self, name: str, phase: str) -> str:
        """Deepest layer of the tree the op's scopes lead to ("" if none); ops of one scope share it."""
        key = (name.rpartition("/")[0], phase)  # the last part is the op itself
        found = self._by_scope.get(key)
        if found is None:
            found = self._by_scope[key] = self._walk(_scopes_of(key[0]), phase)
        return found

    def _walk(self, parts: List[str], phase: str) -> str:
        if phase == OPTIMIZER:
            owner = self._updated_variable(parts)
            if owner:
                return owner
        start, node = 0, ""
        for depth in range(len(parts), 0, -1):
            scope = "/".join(parts[:depth])
            if scope in self._scopes:
                start, node = depth, self._scopes[scope]
                break
        if not node:
            roots = self.tree.children[""]
            parts = self._below_model_scope(parts)
            first = self._child(roots, "", parts[0]) if parts else None
            if first is None:  # traced outside the model's own call: start one level down
                for root in roots.values():
                    first = self._child(self.tree.children[root], root, parts[0]) if parts else None
                    if first is not None:
                        break
            if first is None:
                return ""
            start, node = 1, first
        for part in parts[start:]:
            child = self._child(self.tree.children[node], node, part)
            if child is None and part == node.rpartition("/")[2]:
                continue  # a module's method scope under its own (linen: SelfAttention_0/SelfAttention_0)
            if child is None:
                break
            node = child
        return node

    def _below_model_scope(self, parts: List[str]) -> List[str]:
        """A scope of the model itself above its top layers (the model's class, which flax linen and
        ``capture.flax_scopes`` enter first, ``TinyLM/block0``; a layer holding no other, as torch and
        nnx name the model's own) is passed over when the next scope is a top layer."""
        roots = self.tree.children[""]
        top = roots.get(parts[0]) if parts else None
        if len(parts) > 1 and (top is None or not self.tree.children[top]) and parts[1] in roots:
            return parts[1:]
        return parts

    def _child(self, children: Dict[str, str], parent: str, traced: str) -> Optional[str]:
        """The child layer a traced scope component stands for. Keras 3 enters each layer's name
        scope twice, so its scopes carry one more "_N" than the layer's name; which rule this
        trace follows is learned from scopes whose layer is known."""
        exact = children.get(traced)
        base = _SUFFIX.sub("", traced) if _SUFFIX.search(traced) else None
        stripped = children.get(base) if base is not None else None
        if exact is not None and stripped is not None:
            return stripped if (parent in self._renamed_except) != self._renamed_rule else exact
        if exact is not None or stripped is not None:
            return exact or stripped
        key = (parent, traced)
        if key not in self._renamed:  # the same scope is looked up under one parent many times
            matches = [path for child, path in children.items() if same_name(traced, child)]
            self._renamed[key] = matches[0] if len(matches) == 1 else None
        return self._renamed[key]

    def _updated_variable(self, parts: List[str]) -> str:
        """TF1 optimizers name an update after its variable: ".../update_layer2/weights/Variable/Apply"."""
        for i, part in enumerate(parts):
            if part.startswith("update_"):
                rest = [part[len("update_"):]] + parts[i + 1:]
                for end in range(len(rest), 0, -1):
                    owner = self.vocabulary.variable_layer.get("/".join(rest[:end]))
                    if owner:
                        return owner
        return ""


def _producers_first(graph: OpGraph) -> bool:
    """True when every node comes after the nodes of the graph it takes inputs from."""
    seen: Set[str] = set()
    for node in graph.types:
        sources = graph.inputs.get(node, ())
        if not seen.issuperset(sources) and any(s in graph.types and s not in seen for s in sources):
            return False
        seen.add(node)
    return True


def _topological(graph: OpGraph) -> List[str]:
    """Nodes with producers before consumers (a loop's back edge keeps first-seen order)."""
    if _producers_first(graph):  # a graph lists its ops as made, inputs first: that order
        return list(graph.types)
    order: List[str] = []
    seen: Set[str] = set()
    for root in graph.types:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(graph.inputs.get(root, ())))]
        while stack:
            node, pending = stack[-1]
            for source in pending:
                if source in graph.types and source not in seen:
                    seen.add(source)
                    stack.append((source, iter(graph.inputs.get(source, ()))))
                    break
            else:
                stack.pop()
                order.append(node)
    return order
