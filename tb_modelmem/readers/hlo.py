"""An XLA program as a profile carries it, read without TensorFlow or JAX.

The profiler stores the ``HloProto`` of every compiled program that ran on the XSpace's
``/host:metadata`` plane: its instructions (opcode, output shape, the framework op each was
lowered from in ``metadata.op_name``), the order the entry computation runs in, and its buffer
assignment (entry parameters, the one temp allocation all intermediate buffers share, and which
instruction defines each buffer placed in it). ``programs`` reads them; ``Program`` answers what
an instruction is, which framework ops it implements, and which buffers are live at the peak of
the temp allocation.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import re
from typing import Any, Dict, FrozenSet, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

from tb_modelmem import proto

METADATA_PLANE = "/host:metadata"
_HLO_PROTO_STAT = "Hlo Proto"
_PROGRAM_ID_STAT = "program_id"

# xla.PrimitiveType -> (dtype name, bits per element); TUPLE, OPAQUE and TOKEN own no elements.
_PRIMITIVES = {1: ("bool", 8), 2: ("int8", 8), 3: ("int16", 16), 4: ("int32", 32), 5: ("int64", 64),
               6: ("uint8", 8), 7: ("uint16", 16), 8: ("uint32", 32), 9: ("uint64", 64), 10: ("float16", 16),
               11: ("float32", 32), 12: ("float64", 64), 15: ("complex64", 64), 16: ("bfloat16", 16),
               18: ("complex128", 128), 19: ("float8_e5m2", 8), 20: ("float8_e4m3fn", 8), 21: ("int4", 4),
               22: ("uint4", 4), 23: ("float8_e4m3b11fnuz", 8), 24: ("float8_e5m2fnuz", 8),
               25: ("float8_e4m3fnuz", 8)}
_TUPLE = 13
_BYTES = frozenset({2, 6})  # int8, uint8: a workspace's element type
# Opcodes that launch no kernel or thunk of their own: they name, alias or order buffers.
NO_WORK = frozenset({"parameter", "get-tuple-element", "bitcast", "tuple", "constant", "after-all",
                     "add-dependency", "opt-barrier", "partition-id", "replica-id", "domain"})
# Opcodes that move tensors between devices (their -start/-done halves included).
COLLECTIVES = frozenset({f"{op}{half}" for op in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                                                  "ragged-all-to-all", "collective-permute", "collective-broadcast",
                                                  "send", "recv") for half in ("", "-start", "-done")})
# Opcodes whose output is (part of) an operand's buffer: a buffer stays live while they are used.
_ALIASING = frozenset({"bitcast", "get-tuple-element", "tuple", "opt-barrier", "add-dependency"})
_HEAP_ALLOC, _HEAP_FREE, _HEAP_SHARE = 0, 1, 2
# Opcodes that only move an operand's elements: what they make from a parameter is that parameter.
_RELAYOUT = frozenset({"bitcast", "copy", "transpose", "reshape", "get-tuple-element", "fusion"})
_NEW_BUFFER_RELAYOUT = frozenset({"copy", "transpose", "reshape"})  # of those, the ones writing a buffer of their own
_STRICT_RELAYOUT = _NEW_BUFFER_RELAYOUT | {"bitcast"}  # those that surely keep a value as it was (a fusion may not)
_KERNEL_SYMBOL = re.compile(r"[^A-Za-z0-9_]")
# frames that are no training script's: installed packages, Python's own library, tb_modelmem's wrappers
_LIBRARY = re.compile(r"[/\\](site-packages|dist-packages|tb_modelmem)[/\\]|[/\\]lib[/\\]python3[.\d]*[/\\]"
                      r"|^<frozen |^<string>$")
_MAX_FRAMES = 256  # frames walked up from one instruction (a real stack has tens)


def _entry(table: Any, one_based: int) -> str:
    return str(table[one_based - 1]) if 0 < one_based <= len(table) else ""


class Instruction:
    """One HLO instruction: what it is and what its output takes (its output's text and bytes are
    worked out when first asked: a program has thousands of instructions, a profile's rows a few)."""

    def __init__(self, raw: Any, in_entry: bool) -> None:
        self.id: int = raw.id
        self.name: str = raw.name
        self.opcode: str = raw.opcode
        metadata = raw.metadata
        self.op_name: str = metadata.op_name  # its framework op ("" when XLA made it: a copy, a layout change)
        self.op_type: str = metadata.op_type  # the TF op type (empty under JAX)
        self.stack_frame_id: int = metadata.stack_frame_id  # its innermost Python frame (0: none kept)
        self.custom_call_target: str = raw.custom_call_target
        self.operand_ids: Tuple[int, ...] = tuple(raw.operand_ids)
        self.tuple_index: int = raw.tuple_index  # a get-tuple-element's element
        self.called_computation_ids: Tuple[int, ...] = tuple(raw.called_computation_ids)
        self.in_entry = in_entry
        self._shape = raw.shape

    @functools.cached_property
    def _output(self) -> Tuple[str, str, int]:
        return shape_text(self._shape)

    @property
    def shape(self) -> str:
        """"[32,28,28,32]"; a tuple's parts joined by ";"."""
        return self._output[0]

    @property
    def dtype(self) -> str:
        """"float32"; a tuple's distinct element types joined by ";"."""
        return self._output[1]

    @property
    def bytes(self) -> int:
        """Dense bytes of the output (a tuple: its elements, not its pointer table)."""
        return self._output[2]

    @property
    def kind(self) -> str:
        """What the op table shows as its type: the opcode, a custom call's target."""
        return self.custom_call_target or self.opcode


@dataclasses.dataclass(frozen=True)
class Parameter:
    """An entry parameter's buffer: the program's inputs (for a training step, its state and batch)."""

    number: int
    op_name: str  # "state[0][3]", "data[0]" under Keras on JAX; "XLA_Args" under TensorFlow
    dims: Tuple[int, ...]
    bytes: int
    dtype: str = ""  # "int32", "float32"; "" when the program does not say


@dataclasses.dataclass(frozen=True)
class LiveBuffer:
    """A buffer of the temp allocation live at its peak, and the instruction that defines it."""

    instruction: Instruction
    shape_index: Tuple[int, ...]
    bytes: int
    scratch: bool  # a custom call's workspace (cuDNN, cuBLAS), not a value any instruction reads


@dataclasses.dataclass(frozen=True)
class TempPeak:
    """The temp allocation's size and what is live in it at its peak; ``source`` says how the live
    set was found: the program's own heap-simulator trace, or its schedule (no trace kept)."""

    allocation_bytes: int
    live: Tuple[LiveBuffer, ...]
    source: str

    @property
    def live_bytes(self) -> int:
        return sum(buffer.bytes for buffer in self.live)


class Program:
    """One compiled program of a profile (``HloProto``), indexed for the questions readers ask."""

    def __init__(self, program_id: int, hlo: Any) -> None:
        """Indexes are made when first asked: a profile keeps every program compiled in the process
        (53 for a ResNet50 run), of which the steps ran one or two."""
        self.id = program_id
        self.name: str = hlo.hlo_module.name
        self._hlo = hlo
        self._assignment = hlo.buffer_assignment
        self._computations: Dict[int, Any] = {}  # these four are filled with the index (``_index``)
        self._raw: Dict[int, Any] = {}
        self._computation_of: Dict[int, int] = {}  # instruction id -> the computation holding it
        self._callers: Dict[int, int] = {}  # computation id -> an instruction that calls it
        self._framework_ops: Dict[int, Tuple[str, ...]] = {}
        self._working: Set[int] = set()  # instructions whose framework ops are being worked out
        self._cycle_hits: Set[int] = set()  # of those, the ones the current answer met again
        self._kernel_names: Optional[Dict[str, Instruction]] = None
        self._state_read: Dict[int, Tuple[int, ...]] = {}
        self._read_by: Optional[Dict[int, List[int]]] = None
        self._sources: Dict[int, str] = {}  # stack frame id -> its user frame's text
        self._computation_frames: Dict[int, int] = {}  # computation id -> the frame of what it runs

    @functools.cached_property
    def _index(self) -> Tuple["_Instructions", Dict[str, int], Dict[int, int]]:
        """(instructions by id, the ids of those outside fusions by name, the entry computation's
        schedule positions), and the raw protos, computations and callers the other questions
        read. Reads only ids, names and calls here: an instruction is made when asked for."""
        module = self._hlo.hlo_module
        self._computations = {c.id: c for c in module.computations}
        entry = module.entry_computation_id
        in_entry: Set[int] = set()
        names: Dict[str, int] = {}
        for computation in module.computations:
            fused = computation.is_fusion_computation
            for raw in computation.instructions:
                iid = raw.id
                self._raw[iid] = raw
                self._computation_of[iid] = computation.id
                if computation.id == entry:
                    in_entry.add(iid)
                if not fused:  # names are unique in a module; only instructions outside fusions make kernels
                    names[raw.name] = iid
                for called in raw.called_computation_ids:
                    self._callers.setdefault(called, iid)
        sequence = module.schedule.sequences.get(entry)
        order = {iid: n for n, iid in enumerate(sequence.instruction_ids)} if sequence is not None else {}
        return _Instructions(self._raw, in_entry), names, order

    @property
    def instructions(self) -> Mapping[int, Instruction]:
        return self._index[0]

    @property
    def by_name(self) -> "_ByName":
        """Instructions outside fusion computations (the ones a thunk or kernel runs), by name."""
        return _ByName(self._index[1], self._index[0])

    def entry(self) -> List[Instruction]:
        """The entry computation's instructions."""
        instructions = self._index[0]
        return [instructions[i] for i in instructions.entry_ids]

    @property
    def order(self) -> Dict[int, int]:
        """Entry instruction id -> its place in the order the entry computation runs."""
        return self._index[2]

    def _readers(self) -> Dict[int, List[int]]:
        """Instruction id -> the instructions that take it as an operand."""
        if self._read_by is None:
            self._read_by = collections.defaultdict(list)
            raw_protos = self._raw if self._index else {}  # filled with the index
            for iid, raw in raw_protos.items():
                for operand in raw.operand_ids:
                    self._read_by[operand].append(iid)
        return self._read_by

    def readers(self, instruction_id: int) -> List[Instruction]:
        """The instructions that take ``instruction_id``'s output as an operand."""
        return [self.instructions[i] for i in self._readers().get(instruction_id, ()) if i in self.instructions]

    def element(self, instruction: Instruction) -> Optional[Instruction]:
        """The instruction that made the value a get-tuple-element takes: the tuple's operand at its index,
        inside the fusion when a multi-output fusion made the tuple (XLA gives the element the fusion's
        op_name, which may be another element's op). None where it cannot be told."""
        if instruction.opcode != "get-tuple-element" or not instruction.operand_ids:
            return None
        whole = self.instructions.get(instruction.operand_ids[0])
        if whole is not None and whole.opcode == "fusion" and whole.called_computation_ids:
            computation = self._computations.get(whole.called_computation_ids[0])
            whole = self.instructions.get(computation.root_id) if computation is not None else None
        if whole is None or whole.opcode != "tuple" or instruction.tuple_index >= len(whole.operand_ids):
            return None
        return self.instructions.get(whole.operand_ids[instruction.tuple_index])

    def state_read(self, instruction_id: int) -> Tuple[int, ...]:
        """The entry parameters an entry instruction reads, directly or through instructions that
        only re-lay them out (bitcasts, copies, transposes made from them alone)."""
        found = self._state_read.get(instruction_id)
        if found is None:
            found = self._state_read[instruction_id] = self._parameters_under(instruction_id, 0)
        return found

    @functools.cached_property
    def _logical(self) -> Dict[int, Any]:
        """The buffer assignment's logical buffers by id."""
        return {b.id: b for b in self._assignment.logical_buffers}

    @functools.cached_property
    def written_back(self) -> FrozenSet[int]:
        """Numbers of the entry parameters whose buffer is also an output: state updated in place."""
        return frozenset(a.parameter_number for a in self._assignment.buffer_allocations
                         if a.is_entry_computation_parameter and a.maybe_live_out)

    def copies_state(self, instruction_id: int) -> bool:
        """Whether an entry instruction is XLA's own copy of state the program writes back in place (no
        framework op asked for it; it copies, or re-lays out into a buffer of its own, a parameter whose
        buffer is also an output): it keeps the variable's old value while the variable's buffer is reused
        and rewritten (TF ``jit_compile``: fc1's kernel copied, its buffer then holding the kernel's gradient)."""
        instruction = self.instructions.get(instruction_id)
        if instruction is None or instruction.op_name or instruction.opcode not in _NEW_BUFFER_RELAYOUT:
            return False
        # its operand, through re-layouts only: a fusion may compute a new value from a parameter
        # (``param * decay``), which is no copy of it
        return any(self._raw[p].parameter_number in self.written_back
                   for p in self._parameters_under(instruction_id, 0, strict=True))

    def reused_state(self) -> List[Tuple[Instruction, int]]:
        """(instruction, bytes) of each value XLA places in the buffer of a parameter it writes back (a
        variable's buffer, once its old value is read or copied: ``copies_state``), largest first: neither
        the parameter nor a value the program returns. Its bytes are the variable's to the allocator."""
        module = self._hlo.hlo_module
        entry = self._computations.get(module.entry_computation_id) if self._index else None
        if entry is None:
            return []
        returned: Set[int] = set()  # what the root returns, through tuples, their elements and bitcasts
        waiting = [entry.root_id]
        while waiting:
            iid = waiting.pop()
            raw = self._raw.get(iid)
            if raw is None or iid in returned:
                continue
            returned.add(iid)
            if raw.opcode in _ALIASING:
                waiting.extend(raw.operand_ids)
        logical = self._logical
        found: Dict[int, int] = {}
        for allocation in self._assignment.buffer_allocations:
            if not (allocation.is_entry_computation_parameter and allocation.maybe_live_out):
                continue
            for assigned in allocation.assigned:
                buffer = logical.get(assigned.logical_buffer_id)
                instruction = self.instructions.get(buffer.defined_at.instruction_id) if buffer is not None else None
                if (instruction is not None and instruction.id not in returned
                        and instruction.opcode not in _ALIASING | {"parameter"}):
                    found[instruction.id] = max(found.get(instruction.id, 0), assigned.size)
        return sorted(((self.instructions[i], size) for i, size in found.items()), key=lambda pair: -pair[1])

    def _parameters_under(self, instruction_id: int, depth: int, strict: bool = False) -> Tuple[int, ...]:
        """The entry parameters an instruction's operands are, through up to three one-operand re-layouts (and
        instructions no framework op asked for); ``strict``: through those that surely keep the value only."""
        out: List[int] = []
        for operand in self.instructions[instruction_id].operand_ids:
            source = self.instructions.get(operand)
            if source is None:
                continue
            if source.opcode == "parameter" and source.in_entry:
                out.append(operand)
            elif depth < 3 and len(source.operand_ids) == 1 and (
                    source.opcode in _STRICT_RELAYOUT if strict else source.opcode in _RELAYOUT or not source.op_name):
                out += self._parameters_under(operand, depth + 1, strict)
        return tuple(dict.fromkeys(out))

    def kernel_names(self) -> Dict[str, Instruction]:
        """Kernel symbol -> the one instruction XLA:GPU names a kernel after ("." becomes "_"). Not
        a rule to rely on: identical fusions share the first one's compiled kernel and name."""
        if self._kernel_names is None:
            named: Dict[str, List[int]] = collections.defaultdict(list)
            for name, iid in self._index[1].items():
                named[_KERNEL_SYMBOL.sub("_", name)].append(iid)
            instructions = self._index[0]
            self._kernel_names = {name: instructions[ids[0]] for name, ids in named.items() if len(ids) == 1}
        return self._kernel_names

    def work(self) -> List[Instruction]:
        """The entry computation's instructions that launch work, in the order they run."""
        scheduled = sorted(self.order, key=self.order.__getitem__)
        return [self.instructions[i] for i in scheduled
                if i in self.instructions and self.instructions[i].opcode not in NO_WORK]

    def source(self, instruction: Instruction) -> str:
        """Where in the training script the instruction was traced: the innermost of its Python frames
        (the program's ``stack_frame_index``) outside installed packages, Python's own library and
        tb_modelmem, as "model.py:13 CNN.__call__"; a fusion's, its first fused instruction's with one;
        "" when the program keeps none. A name to read, never a file the server opens."""
        frame = instruction.stack_frame_id or next(
            (f for f in map(self._computation_frame, instruction.called_computation_ids) if f), 0)
        if not frame:
            return ""
        found = self._sources.get(frame)
        if found is None:
            found = self._sources[frame] = self._user_frame(frame)
        return found

    def _computation_frame(self, computation: int, depth: int = 0) -> int:
        """The frame of what a fusion (or a call) runs: its root's, else the first of its instructions
        with one, looking into what those call in turn (a few levels); each computation's worked out once
        (a program's fusions share computations: no rescan, and a cycle ends)."""
        found = self._computation_frames.get(computation)
        if found is not None:
            return found
        self._computation_frames[computation] = 0  # while it is worked out: a cycle back to it finds none
        self._index  # noqa: B018 (fills the computations read below)
        raw = self._computations.get(computation)
        ordered = sorted(raw.instructions, key=lambda i: i.id != raw.root_id) if raw is not None else []  # root first
        found = next((int(i.metadata.stack_frame_id) for i in ordered if i.metadata.stack_frame_id), 0)
        for inner in ordered if not found and depth < 4 else ():
            found = next((f for f in (self._computation_frame(c, depth + 1) for c in inner.called_computation_ids)
                          if f), 0)
            if found:
                break
        self._computation_frames[computation] = found
        return found

    def _user_frame(self, frame: int) -> str:
        index = self._hlo.hlo_module.stack_frame_index
        seen = 0
        while 0 < frame <= len(index.stack_frames) and seen < _MAX_FRAMES:  # ids are 1-based; a cycle ends
            seen += 1
            entry = index.stack_frames[frame - 1]
            if 0 < entry.file_location_id <= len(index.file_locations):
                location = index.file_locations[entry.file_location_id - 1]
                path = _entry(index.file_names, location.file_name_id)
                if path and not _LIBRARY.search(path):
                    function = _entry(index.function_names, location.function_name_id)
                    return f"{path.replace(chr(92), '/').rsplit('/', 1)[-1]}:{location.line} {function}".strip()
            frame = entry.parent_frame_id
        return ""

    def framework_ops(self, instruction_id: int) -> Tuple[str, ...]:
        """The framework ops an instruction implements: its own op_name, else those of the
        instructions it calls (a fusion's), most frequent first, else the op of the instruction
        whose computation it runs in (a loop's body, an expanded random number generator's), else
        the op its readers agree on (an index the max pool's gradient needs), else its first named
        operand's, as ``join`` places a TensorFlow op no name places by its consumers, then producers."""
        found = self._framework_ops.get(instruction_id)
        if found is not None:
            return found
        if instruction_id in self._working:  # a cycle of readers and operands: this path finds none
            self._cycle_hits.add(instruction_id)
            return ()
        self._working.add(instruction_id)
        outer_hits, self._cycle_hits = self._cycle_hits, set()
        try:
            found = self._implemented(instruction_id)
        finally:
            self._working.discard(instruction_id)
        self._cycle_hits.discard(instruction_id)
        if not self._cycle_hits:  # kept only when no unfinished instruction's answer shaped it
            self._framework_ops[instruction_id] = found
        self._cycle_hits |= outer_hits
        return found

    def _implemented(self, instruction_id: int) -> Tuple[str, ...]:
        instruction = self.instructions[instruction_id]
        if instruction.op_name:
            return (instruction.op_name,)
        counts: "collections.Counter[str]" = collections.Counter()
        pending, seen = list(instruction.called_computation_ids), set()
        while pending:
            computation = self._computations.get(pending.pop())
            if computation is None or computation.id in seen:
                continue
            seen.add(computation.id)
            for raw in computation.instructions:
                op_name = raw.metadata.op_name
                if op_name and raw.opcode != "parameter":
                    counts[op_name] += 1
                pending.extend(raw.called_computation_ids)
        if counts:
            return tuple(name for name, _ in counts.most_common())
        caller = self._callers.get(self._computation_of.get(instruction_id, -1))
        if caller is not None and caller != instruction_id:
            found = self.framework_ops(caller)
            if found:
                return found
        read_by = {self.framework_ops(reader)[:1] for reader in self._readers().get(instruction_id, ())
                   if reader != instruction_id and self.instructions[reader].opcode not in NO_WORK}
        if len(read_by) == 1 and () not in read_by:
            return read_by.pop()
        for operand in instruction.operand_ids[:4]:
            if operand in self.instructions and operand != instruction_id:
                found = self.framework_ops(operand)
                if found:
                    return found[:1]
        return ()

    def parameters(self) -> List[Parameter]:
        """Every entry parameter's buffer, with the op_name that says what it holds."""
        names = {i.id: i for i in self.entry() if i.opcode == "parameter"}
        by_number = {self._raw[iid].parameter_number: i for iid, i in names.items()}
        out = []
        for allocation in self._assignment.buffer_allocations:
            if allocation.is_entry_computation_parameter:
                instruction = by_number.get(allocation.parameter_number)
                dims = tuple(self._raw[instruction.id].shape.dimensions) if instruction else ()
                out.append(Parameter(allocation.parameter_number, instruction.op_name if instruction else "", dims,
                                     allocation.size, instruction.dtype if instruction else ""))
        return out

    def output_dims(self) -> Set[Tuple[int, ...]]:
        """The shapes of what the program returns (its entry root's elements): a training step's updated
        state among them, its batch not."""
        self._index  # noqa: B018 (fills the computations read below)
        entry = self._computations.get(self._hlo.hlo_module.entry_computation_id)
        raw = self._raw.get(entry.root_id) if entry is not None else None
        if raw is None:
            return set()
        shapes = list(raw.shape.tuple_shapes) or [raw.shape]
        return {tuple(int(d) for d in s.dimensions) for s in shapes[:1 << 16]}

    def donates(self) -> bool:
        """Whether a parameter's buffer is given back as an output (``donate_argnums``: state updated in place)."""
        return any(a.maybe_live_out and a.is_entry_computation_parameter and a.color == 0
                   for a in self._assignment.buffer_allocations)

    def output_bytes(self) -> int:
        """Bytes of the outputs that are not a parameter's buffer given back (donated state is updated
        in place): what a run allocates besides its temp allocation."""
        return sum(a.size for a in self._assignment.buffer_allocations
                   if a.maybe_live_out and not a.is_entry_computation_parameter and a.color == 0)

    def temp_peak(self) -> Optional[TempPeak]:
        """The largest temp allocation and the buffers live in it at its peak (None: the program
        has no temp allocation). From the heap-simulator trace XLA keeps with the program when it
        has one, else from the entry schedule (each buffer live from its defining instruction to
        its last reader)."""
        temps = [a for a in self._assignment.buffer_allocations  # color 0: device memory (not host's)
                 if _allocation_kind(a) == "temp" and a.color == 0]
        if not temps:
            return None
        temp = max(temps, key=lambda a: a.size)
        logical = self._logical
        placed = {assigned.logical_buffer_id for assigned in temp.assigned}
        traced = self._heap_trace(placed)
        if traced is not None:
            live_ids, source = traced, "heap-simulator trace"
        else:
            live_ids, source = self._schedule_peak(temp, logical), "schedule (no heap-simulator trace)"
        live = []
        for buffer_id in live_ids:
            buffer = logical.get(buffer_id)
            instruction = self.instructions.get(buffer.defined_at.instruction_id) if buffer is not None else None
            if buffer is None or instruction is None:
                continue
            index = tuple(buffer.defined_at.shape_index)
            live.append(LiveBuffer(instruction, index, buffer.size, _is_scratch(self._raw[instruction.id], index)))
        return TempPeak(temp.size, tuple(live), source)

    def _heap_trace(self, placed: Iterable[int]) -> Optional[List[int]]:
        """Logical buffers live at the peak of the heap-simulator trace of the temp allocation,
        replayed as XLA simulated it (a buffer shared with another frees with its last sharer).
        The trace's own allocation index is not to be trusted (xprof says so too): the trace
        whose buffers are in the temp allocation is it."""
        placed = set(placed)
        traces = [t for t in self._assignment.heap_simulator_traces
                  if any(e.buffer_id in placed for e in t.events)]
        if not traces:
            return None
        trace = max(traces, key=lambda t: sum(e.buffer_id in placed for e in t.events))
        sizes = {b.id: b.size for b in self._assignment.logical_buffers}
        canonical: Dict[int, int] = {}
        holders: "collections.Counter[int]" = collections.Counter()
        live: Dict[int, int] = {}
        in_use = peak = 0
        at_peak: List[int] = []
        for event in trace.events:
            if event.buffer_id not in sizes:
                continue
            if event.kind == _HEAP_ALLOC:
                canonical[event.buffer_id] = event.buffer_id
                holders[event.buffer_id] += 1
                live[event.buffer_id] = sizes[event.buffer_id]
                in_use += sizes[event.buffer_id]
                if in_use > peak:
                    peak, at_peak = in_use, list(live)
            elif event.kind == _HEAP_FREE:
                owner = canonical.get(event.buffer_id, event.buffer_id)
                holders[owner] -= 1
                if holders[owner] <= 0 and owner in live:
                    in_use -= live.pop(owner)
            elif event.kind == _HEAP_SHARE:
                owner = canonical.get(event.share_with_canonical_id, event.share_with_canonical_id)
                canonical[event.buffer_id] = owner
                holders[owner] += 1
        return at_peak

    def _schedule_peak(self, temp: Any, logical: Dict[int, Any]) -> List[int]:
        """Logical buffers of the temp allocation live at its fullest moment of the entry schedule:
        each from the position of its defining instruction to that of its last reader (through
        instructions that only alias it: bitcasts, tuple elements), and until another buffer is
        placed over its bytes (XLA gives two buffers the same bytes only when their lives do not
        overlap, or when one updates the other in place)."""
        if not self.order:
            return []
        readers: Dict[int, List[int]] = collections.defaultdict(list)
        for instruction in self.entry():
            for operand in instruction.operand_ids:
                readers[operand].append(instruction.id)
        end = len(self.order)

        @functools.lru_cache(maxsize=None)
        def last_read(instruction_id: int) -> int:
            last = -1
            for reader in readers.get(instruction_id, ()):
                if self.instructions[reader].opcode in _ALIASING:
                    last = max(last, last_read(reader))
                else:
                    last = max(last, self.order.get(reader, end))
            return last

        span = {a.logical_buffer_id: (a.offset, a.offset + a.size) for a in temp.assigned}
        starts: Dict[int, List[Tuple[int, int]]] = collections.defaultdict(list)
        for buffer_id in span:
            buffer = logical.get(buffer_id)
            defined = buffer.defined_at.instruction_id if buffer is not None else -1
            if defined in self.order:
                first, last = self.order[defined], last_read(defined)
                starts[first].append((buffer_id, max(first, last if last >= 0 else end)))
        live: Dict[int, int] = {}  # buffer id -> the position after which it is dead
        in_use = peak = 0
        at_peak: List[int] = []
        for position in range(end + 1):
            for buffer_id, last in starts.get(position, ()):
                low, high = span[buffer_id]
                for other in [o for o in live if span[o][0] < high and low < span[o][1]]:
                    in_use -= span[other][1] - span[other][0]
                    del live[other]
                live[buffer_id] = last
                in_use += high - low
            if in_use > peak:
                peak, at_peak = in_use, list(live)
            for buffer_id in [b for b, last in live.items() if last == position]:
                in_use -= span[buffer_id][1] - span[buffer_id][0]
                del live[buffer_id]
        return at_peak


def written_by_jax(xspace: Any) -> bool:
    """Whether JAX wrote the profile (its metadata plane says which version)."""
    for plane in xspace.planes:
        if plane.name == METADATA_PLANE:
            names = {k: m.name for k, m in plane.stat_metadata.items()}
            return any(names.get(stat.metadata_id) == "jax_version" for stat in plane.stats)
    return False


class _Instructions(Mapping[int, Instruction]):
    """Instruction id -> its ``Instruction``, made from the raw proto when first asked."""

    def __init__(self, raw: Dict[int, Any], entry_ids: Set[int]) -> None:
        self._raw = raw
        self.entry_ids = entry_ids
        self._made: Dict[int, Instruction] = {}

    def __getitem__(self, iid: int) -> Instruction:
        made = self._made.get(iid)
        if made is None:
            made = self._made[iid] = Instruction(self._raw[iid], iid in self.entry_ids)
        return made

    def __iter__(self) -> Iterator[int]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, iid: object) -> bool:
        return iid in self._raw


class _ByName(Mapping[str, Instruction]):
    """Name -> the instruction outside fusions named so."""

    def __init__(self, ids: Dict[str, int], instructions: _Instructions) -> None:
        self._ids, self._instructions = ids, instructions

    def __getitem__(self, name: str) -> Instruction:
        return self._instructions[self._ids[name]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, name: object) -> bool:
        return name in self._ids


def programs(xspace: Any) -> Dict[int, Program]:
    """Every program whose HloProto the profile keeps, by program id: the ``program_id`` stat of
    its metadata (JAX), else the metadata's own id (TensorFlow), as xprof reads them."""
    found: Dict[int, Program] = {}
    for plane in xspace.planes:
        if plane.name != METADATA_PLANE:
            continue
        stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
        for metadata_id, metadata in plane.event_metadata.items():
            serialized, program_id = None, metadata_id
            for stat in metadata.stats:
                name = stat_names.get(stat.metadata_id)
                if name == _HLO_PROTO_STAT:
                    serialized = stat.bytes_value
                elif name == _PROGRAM_ID_STAT:
                    program_id = int(getattr(stat, stat.WhichOneof("value") or "uint64_value"))
            if serialized:
                found[program_id] = Program(program_id, proto.HloProto.FromString(serialized))
    return found


def kernel_name(instruction: Instruction) -> str:
    """The symbol XLA:GPU gives the kernel it compiles for an instruction ("loop_add_fusion.5" ->
    "loop_add_fusion_5")."""
    return _KERNEL_SYMBOL.sub("_", instruction.name)


def shape_text(shape: Any) -> Tuple[str, str, int]:
    """(dims text, dtype, dense bytes) of an ``xla.ShapeProto``; a tuple's parts joined by ";"."""
    if shape.element_type == _TUPLE:
        parts = [shape_text(part) for part in shape.tuple_shapes]
        dtypes = ";".join(dict.fromkeys(p[1] for p in parts if p[1]))
        return ";".join(p[0] for p in parts), dtypes, sum(p[2] for p in parts)
    dtype, bits = _PRIMITIVES.get(shape.element_type, ("", 0))
    dims = list(shape.dimensions)
    return "[" + ",".join(map(str, dims)) + "]", dtype, math.prod(dims) * bits // 8


def _allocation_kind(allocation: Any) -> str:
    if allocation.is_entry_computation_parameter:
        return "parameter"
    if allocation.is_constant:
        return "constant"
    if allocation.is_thread_local:
        return "thread_local"
    if allocation.is_tuple:
        return "tuple"
    return "output" if allocation.maybe_live_out else "temp"


def _is_scratch(raw: Any, shape_index: Tuple[int, ...]) -> bool:
    """A custom call's workspace: the last element of its tuple output, bytes (int8 or uint8)."""
    if raw.opcode != "custom-call" or len(shape_index) != 1 or raw.shape.element_type != _TUPLE:
        return False
    parts = raw.shape.tuple_shapes
    return shape_index[0] == len(parts) - 1 and parts[-1].element_type in _BYTES
