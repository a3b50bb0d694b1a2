"""The events of XLA-compiled steps tied to the HLO instructions they ran, and their memory.

A step compiled by XLA (TensorFlow's ``jit_compile=True``, Keras 3 on a GPU, JAX always) is one
program: its profile events name HLO instructions, not framework ops. On the CPU each thunk's
event names its instruction (``hlo_op``); on a GPU each kernel's does, except inside an XLA
command buffer (a CUDA graph), where ``hlo_op`` names only the buffer (``command_buffer_3``) and
the kernel is placed by its node index in the graph: the buffer's commands are the program's
work instructions that no event names, in schedule order. What no rule places is its own row.

Memory: the program's one temp allocation holds every intermediate buffer. It is split into the
buffers live in it at its peak (``hlo.Program.temp_peak``), each with the instruction that defines
it, so the step's peak splits by layer and category like an op-by-op step's.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import AbstractSet, Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from tb_modelmem.readers.allocator_replay import Event
from tb_modelmem.readers.hlo import (
    COLLECTIVES,
    NO_WORK,
    Instruction,
    LiveBuffer,
    Parameter,
    Program,
    TempPeak,
    kernel_name,
)
from tb_modelmem.rules.buffers import carried, input_carried, input_sequence, step_category
from tb_modelmem.rules.join import Joiner, backward_by_producers
from tb_modelmem.rules.name_stacks import batch_parameters, is_keras_batch, keras_state_role, scope_name
from tb_modelmem.schema.names import (
    BACKWARD,
    COLLECTIVE,
    DONATED_OUTPUTS,
    EXECUTOR,
    FORWARD,
    INPUTS_CATEGORY,
    OPTIMIZER,
    PLANNED_OUTPUTS,
    TEMPORARIES_CATEGORY,
)

# Stats of an XLA event the attribution reads.
STATS = frozenset({"hlo_op", "hlo_module", "program_id", "scope_range_id", "correlation_id", "cuda_graph_id",
                   "cuda_graph_node_id", "run_id", "device_ordinal"})
_NODE_INDEX = 0xFFFFFFFF  # the low 32 bits of cuda_graph_node_id: the node's index in its graph
COMMAND_BUFFER_FLAG = "XLA_FLAGS=--xla_gpu_enable_command_buffer="
# How an event was tied to its instruction, best first.
BY_NAME, BY_GRAPH_NODE, BY_KERNEL_NAME, BY_SCHEDULE = "hlo_op", "graph_node", "kernel_name", "schedule_gap"


@dataclasses.dataclass
class XlaEvent:
    """One event of an XLA program: a CPU thunk or a GPU kernel, copy or memset."""

    device: str
    line: str
    kernel: str  # the event's own name (a kernel's symbol, a thunk's instruction)
    start_ps: int
    duration_ps: int
    stats: Dict[str, Any]
    program: Optional[Program] = None
    instruction: Optional[Instruction] = None
    method: str = ""

    @property
    def call(self) -> Any:
        """What makes one call of an instruction: a cuDNN convolution launches several kernels under
        one scope range, a command buffer's nodes share it; a CPU thunk is one event."""
        scope = self.stats.get("scope_range_id")
        return scope if scope is not None else (self.line, self.start_ps)


@dataclasses.dataclass
class InstructionRow:
    """One instruction's calls and time on one device."""

    program: Program
    instruction: Instruction
    device: str
    calls: int
    duration_ps: int
    methods: Tuple[str, ...]


@dataclasses.dataclass
class Unattributed:
    """Time of a program's events no rule tied to an instruction, by what they name."""

    program: Optional[Program]
    device: str
    name: str  # the hlo_op they carry (a command buffer's name)
    calls: int
    duration_ps: int


def on_their_devices(events: Sequence[XlaEvent]) -> None:
    """Put each XLA:CPU thunk on the device that ran it (``/device:CPU:3``) when the host ran a program
    over several: their events all lie on the host's plane, and each carries its ``device_ordinal``."""
    ordinals = {e.stats.get("device_ordinal") for e in events if e.device.startswith("/host:")}
    if len(ordinals - {None}) < 2:
        return
    for event in events:
        ordinal = event.stats.get("device_ordinal")
        if event.device.startswith("/host:") and isinstance(ordinal, int):
            event.device = f"/device:{event.device.rpartition(':')[2]}:{ordinal}"


def attribute(events: Sequence[XlaEvent], programs: Dict[int, Program]) -> None:
    """Tie each event to its program and instruction (``method`` says how): its ``hlo_op`` names
    the instruction; else its command buffer node's index places it; else its kernel name is one
    instruction's; else it falls in a gap of the schedule between placed neighbours."""
    by_module: Dict[str, List[Program]] = collections.defaultdict(list)
    for each in programs.values():
        by_module[each.name].append(each)
    for event in events:
        program_id = event.stats.get("program_id")
        program = programs.get(int(program_id)) if isinstance(program_id, int) else None
        if program is None:
            named = by_module.get(str(event.stats.get("hlo_module", "")), [])
            program = named[0] if len(named) == 1 else None
        event.program = program
        if program is not None:
            instruction = program.by_name.get(str(event.stats.get("hlo_op", "")).rpartition("::")[2])
            if instruction is not None:
                event.instruction, event.method = instruction, BY_NAME
    _by_graph_node(events)
    for event in events:
        if event.instruction is None and event.program is not None:
            instruction = event.program.kernel_names().get(event.kernel)
            if instruction is not None:
                event.instruction, event.method = instruction, BY_KERNEL_NAME
    _by_schedule(events)


def rows(events: Iterable[XlaEvent]) -> Tuple[List[InstructionRow], List[Unattributed]]:
    """Calls and time per (program, instruction, device), and what no rule placed."""
    placed: Dict[Tuple[int, int, str], List[XlaEvent]] = collections.defaultdict(list)
    left: Dict[Tuple[Optional[int], str, str], List[XlaEvent]] = collections.defaultdict(list)
    for event in events:
        if event.instruction is not None and event.program is not None:
            placed[(event.program.id, event.instruction.id, event.device)].append(event)
        else:
            left[(event.program.id if event.program else None, event.device,
                  str(event.stats.get("hlo_op", "")))].append(event)
    found = []
    for (_, _, device), group in placed.items():
        program, instruction = group[0].program, group[0].instruction
        assert program is not None and instruction is not None
        found.append(InstructionRow(program, instruction, device, len({e.call for e in group}),
                                    sum(e.duration_ps for e in group), tuple(sorted({e.method for e in group}))))
    missing = [Unattributed(group[0].program, device, name, len({e.call for e in group}),
                            sum(e.duration_ps for e in group)) for (_, device, name), group in left.items()]
    return found, missing


def uses_command_buffers(events: Iterable[XlaEvent]) -> bool:
    """Whether the program ran kernels inside XLA command buffers (CUDA graphs)."""
    return any(e.stats.get("cuda_graph_id") is not None for e in events)


def split_temp_allocations(events: List[Event], programs: Sequence[Program],
                           describe: Callable[[Program, Optional[LiveBuffer]], Tuple[str, str]],
                           batch: Optional[int] = None,
                           weights: AbstractSet[Tuple[int, ...]] = frozenset(),
                           seq: Optional[int] = None) -> List[Event]:
    """``events`` with each allocation of a program's temp allocation (and its free) replaced by
    one event per buffer live in it at its peak, and one for the bytes no buffer holds then
    (packing, the allocator's rounding), so the replay's peak splits by buffer.
    ``describe(program, buffer)`` gives a buffer's (op, category); None stands for those bytes.
    The allocator's count after each part grows (or falls) by the part, as the replay orders
    them (at one instant: smaller allocations first, larger frees first)."""
    temps: Dict[int, Tuple[Program, TempPeak]] = {}
    for program in programs:
        peak = program.temp_peak()
        if peak is not None and peak.live:
            temps.setdefault(peak.allocation_bytes, (program, peak))
    if not temps:
        return events
    out: List[Event] = []
    split: Dict[Any, List[Event]] = {}  # an allocated temp's key -> its parts, as allocated
    for event in events:
        if event.delta > 0 and event.requested in temps:
            program, peak = temps[event.requested]
            parts = []
            for i, buffer in enumerate(peak.live):
                op, category = describe(program, buffer)
                shape = _element(buffer.instruction.shape, buffer.shape_index)
                carries, times = carried(shape, batch, weights, seq)
                parts.append(dataclasses.replace(
                    event, delta=buffer.bytes, key=(event.key, i), op=op, category=category, shape=shape,
                    dtype=_element(buffer.instruction.dtype, buffer.shape_index),
                    region="temp" if buffer.scratch else "output", batch=carries, seq=times,
                    requested=buffer.bytes))
            slack = event.delta - peak.live_bytes
            if slack < 0:  # more live than the allocation holds: this is not the live set, keep it whole
                out.append(event)
                continue
            parts += _slack(event, slack, parts, peak.live_bytes, describe(program, None)[1])
            split[event.key] = parts
            out += _counted(parts, event)
            continue
        parts_of = split.pop(event.key, None) if event.delta < 0 else None
        if parts_of is None:
            out.append(event)
        else:
            out += _counted([dataclasses.replace(event, delta=-p.delta, key=p.key) for p in parts_of], event)
    return out


PLANNED_NOTE = ("XLA's plan, not a measurement: this profile records no allocation (JAX on a CPU or a TPU "
                "records none), so the peak is what the compiled program's buffer assignment reserves on each "
                "device that runs it: its parameters (the state and the batch), its temp allocation split into "
                "the buffers live at its fullest moment, and the outputs that are not donated state updated in place")


def planned_events(program: Program, span_us: Tuple[float, float], batch: Optional[int] = None,
                   weights: AbstractSet[Tuple[int, ...]] = frozenset(), seq: Optional[int] = None) -> List[Event]:
    """One run of ``program`` (from ``span_us[0]`` to ``span_us[1]``) as XLA planned it on each device,
    as allocator events: its batch parameters (inputs: ``name_stacks.batch_parameters``) and its temp
    allocation (``split_temp_allocations`` splits it by buffer), then the outputs that are no donated
    parameter; the other parameters (the state) are resident before it, in every event's count."""
    start, end = span_us
    tick = max((end - start) / 1000, 1e-3)
    resident = 0
    events: List[Event] = []
    inputs = batch_parameters(program.parameters(), batch, program.output_dims())
    for parameter in program.parameters():
        if parameter.number in inputs:
            shape = "[" + ",".join(map(str, parameter.dims)) + "]"
            carries, times = input_carried(shape, batch, seq)
            events.append(Event(start, parameter.bytes, ("planned", "parameter", parameter.number),
                                op=parameter.op_name, category=INPUTS_CATEGORY, shape=shape, region="input",
                                allocator="xla_plan", requested=parameter.bytes, batch=carries, seq=times))
        else:
            resident += parameter.bytes
    peak = program.temp_peak()
    if peak is not None:
        events.append(Event(start + tick, peak.allocation_bytes, ("planned", "temp"), allocator="xla_plan",
                            requested=peak.allocation_bytes))
    outputs = program.output_bytes()
    if outputs:
        named = program.name + (DONATED_OUTPUTS if program.donates() else PLANNED_OUTPUTS)
        events.append(Event(end - tick, outputs, ("planned", "outputs"), op=named,
                            category=TEMPORARIES_CATEGORY, region="output", allocator="xla_plan", requested=outputs))
    events += [dataclasses.replace(e, t_us=end, delta=-e.delta, op="", requested=0) for e in list(events)]
    in_use = resident
    for event in sorted(events, key=lambda e: (e.t_us, e.delta)):
        in_use += event.delta
        event.in_use = in_use
    return events


def _slack(event: Event, slack: int, parts: List[Event], live_bytes: int, category: str) -> List[Event]:
    """The bytes no buffer of a temp allocation holds at its peak (packing, rounding), as parts that grow
    with the allocation as its live buffers do: shared like the live bytes that carry the batch (and the
    sequence once, twice) and those that do not."""
    held: Dict[Tuple[bool, int], int] = collections.Counter()
    for part in parts:
        held[(part.batch, part.seq)] += part.delta
    out, left = [], slack
    for (batch, seq), size in sorted(held.items(), reverse=True):
        share = int(slack * (size / live_bytes)) if live_bytes and batch else 0
        if share > 0:
            out.append(dataclasses.replace(event, delta=share, key=(event.key, "slack", seq), op="", region="padding",
                                           category=category, batch=True, seq=seq, requested=0))
            left -= share
    if left > 0:
        out.append(dataclasses.replace(event, delta=left, key=(event.key, "slack"), op="", region="padding",
                                       category=category, batch=False, seq=0, requested=0))
    return out


def recounted(events: List[Event]) -> List[Event]:
    """A plan's ``events`` with the count after each redone in the order the replay takes them (by time, then
    by delta): its step ends with every buffer freed at one instant, the temp allocation's parts among the
    outputs and the inputs, each counted in its own order before (a linen LM's outputs, freed first, read
    1.6 MB after the step where 17.2 MB of its temp allocation was still counted live)."""
    ordered = sorted(events, key=lambda e: (e.t_us, e.delta))
    if ordered and ordered[0].in_use is not None:
        in_use = ordered[0].in_use - ordered[0].delta
        for event in ordered:
            in_use += event.delta
            event.in_use = in_use
    return events


def _counted(parts: List[Event], whole: Event) -> List[Event]:
    """``parts`` of one allocation or free, each with the allocator's count after it, in the
    order the replay takes them (``allocator_replay.replay``: by time, then by delta)."""
    parts.sort(key=lambda e: e.delta)
    if whole.in_use is not None:
        in_use = whole.in_use - whole.delta
        for part in parts:
            in_use += part.delta
            part.in_use = in_use
    return parts


def _element(text: str, shape_index: Tuple[int, ...]) -> str:
    """The part of a tuple's ";"-joined shape (or dtype) a buffer's shape index names."""
    parts = text.split(";")
    if len(shape_index) == 1 and len(parts) > 1 and shape_index[0] < len(parts):
        return parts[shape_index[0]]
    return text


# --- tying events to instructions --------------------------------------------------------------

def _command_buffers(program: Program, named: Set[str]) -> List[Tuple[int, List[Instruction]]]:
    """The program's command buffers: maximal runs of work instructions no event's hlo_op names,
    each with its first instruction's place among the work instructions (XLA names the buffer
    after it: "command_buffer_13" starts at the 13th)."""
    runs: List[Tuple[int, List[Instruction]]] = []
    current: List[Instruction] = []
    for position, instruction in enumerate(program.work()):
        if instruction.name in named:
            if current:
                runs.append((position - len(current), current))
            current = []
        else:
            current.append(instruction)
    if current:
        runs.append((len(program.work()) - len(current), current))
    return runs


def _by_graph_node(events: Sequence[XlaEvent]) -> None:
    """Kernels of a command buffer launch (one CUDA graph, one correlation id): the node index is
    the command's position in the buffer. Which buffer a launch ran is told by its kernels' symbols
    at their positions, and, between buffers that make the same kernels (a ResNet's identical
    blocks), by order: a program launches its buffers in schedule order, each once per run. Nodes
    past the buffer's end are a nested graph's (a cuBLAS call's), placed at the first command no
    node had, after the node before them."""
    named: Dict[int, Set[str]] = collections.defaultdict(set)
    launches: Dict[Tuple[int, str, Any, Any], List[XlaEvent]] = collections.defaultdict(list)
    for event in events:
        if event.program is None:
            continue
        if event.instruction is not None:
            named[event.program.id].add(event.instruction.name)
        elif event.stats.get("cuda_graph_node_id") is not None and event.stats.get("cuda_graph_id") is not None:
            key = (event.program.id, event.device, event.stats.get("correlation_id"), event.stats["cuda_graph_id"])
            launches[key].append(event)
    buffers: Dict[int, List[Tuple[int, List[Instruction]]]] = {}  # program -> its command buffers, in order
    # program -> (command index, the kernel symbol its instruction makes) -> the buffers having it there
    placed_at: Dict[int, Dict[Tuple[int, str], List[int]]] = {}
    last: Dict[Tuple[int, str], int] = {}  # (program, device) -> the buffer its last launch ran
    for (program_id, device, _, _), group in sorted(launches.items(), key=lambda kv: min(e.start_ps for e in kv[1])):
        program = group[0].program
        assert program is not None
        if program_id not in buffers:
            buffers[program_id] = _command_buffers(program, named[program_id])
            placed_at[program_id] = collections.defaultdict(list)
            for number, (_, run) in enumerate(buffers[program_id]):
                for index, instruction in enumerate(run):
                    placed_at[program_id][(index, kernel_name(instruction))].append(number)
        indexes = [int(e.stats["cuda_graph_node_id"]) & _NODE_INDEX for e in group]
        # The buffer the launch's name says; kernels are no check on it: XLA reuses one compiled kernel
        # for identical fusions, so a later ResNet block's launch shows the first block's symbols.
        chosen = _named_buffer(str(group[0].stats.get("hlo_op", "")), buffers[program_id])
        if chosen is None:  # a name that does not say: the buffer whose kernels are where these are
            votes = collections.Counter(number for e, i in zip(group, indexes)
                                        for number in placed_at[program_id].get((i, e.kernel), ()))
            if not votes:
                continue
            most = max(votes.values())
            tied = sorted(number for number, count in votes.items() if count == most)
            earlier = last.get((program_id, device), -1)
            chosen = next((number for number in tied if number > earlier), tied[0])  # else: the program's next run
        last[(program_id, device)] = chosen
        best = buffers[program_id][chosen][1]
        size = len(best)
        nested = [i for i in indexes if i >= size]
        if nested and min(nested) != size:  # the indexes do not count the buffer's commands: leave it
            continue
        unseen = sorted(set(range(size)) - set(indexes))
        previous = -1
        for k in sorted(range(len(group)), key=lambda k: group[k].start_ps):
            event, index = group[k], indexes[k]
            if index < size:
                event.instruction, event.method = best[index], BY_GRAPH_NODE
                previous = index
            else:
                after = [j for j in unseen if j > previous]
                if after:
                    event.instruction, event.method = best[after[0]], BY_GRAPH_NODE


def _named_buffer(hlo_op: str, buffers: List[Tuple[int, List[Instruction]]]) -> Optional[int]:
    """The buffer "command_buffer_13" names: the one starting at the 13th work instruction."""
    number = hlo_op.rpartition("_")[2]
    if not hlo_op.startswith("command_buffer_") or not number.isdigit():
        return None
    return next((i for i, (start, _) in enumerate(buffers) if start + 1 == int(number)), None)


def _by_schedule(events: Sequence[XlaEvent]) -> None:
    """Events left between two placed neighbours on one stream: the unnamed work instructions
    scheduled between them take them, one each, or all to the only one (else none: unattributed)."""
    named: Dict[int, Set[int]] = collections.defaultdict(set)
    streams: Dict[Tuple[str, str, int], List[XlaEvent]] = collections.defaultdict(list)
    for event in events:
        if event.program is not None:
            if event.instruction is not None:
                named[event.program.id].add(event.instruction.id)
            streams[(event.device, event.line, event.program.id)].append(event)
    for (_, _, program_id), stream in streams.items():
        program = stream[0].program
        assert program is not None
        if not program.order or all(e.instruction is not None for e in stream):
            continue
        stream.sort(key=lambda e: e.start_ps)
        scheduled = [(program.order[i.id], i) for i in program.work()]
        k = 0
        while k < len(stream):
            if stream[k].instruction is not None:
                k += 1
                continue
            j = k
            while j < len(stream) and stream[j].instruction is None:
                j += 1
            before = _position(program, stream[k - 1]) if k else -1
            after = _position(program, stream[j]) if j < len(stream) else len(program.order)
            if after <= before:  # the gap starts the program's next run
                before = -1
            candidates = [i for position, i in scheduled if before < position < after and i.id not in named[program_id]]
            gap = stream[k:j]
            if len(candidates) == 1 or len(candidates) == len(gap):
                for n, event in enumerate(gap):
                    event.instruction, event.method = candidates[0 if len(candidates) == 1 else n], BY_SCHEDULE
            k = j


def _position(program: Program, event: XlaEvent) -> int:
    """Where a placed event's instruction runs in the program's entry schedule."""
    return program.order.get(event.instruction.id, -1) if event.instruction is not None else -1


class Step:
    """The XLA programs a profile ran: their events tied to instructions, and what follows from
    them for the op table (rows, their framework ops), the memory replay (the batch's sizes, the
    temp allocation's buffers, the state the entry parameters hold) and the tab's summary."""

    def __init__(self, programs: Dict[int, Program], events: List[XlaEvent]) -> None:
        on_their_devices(events)
        attribute(events, programs)
        self._events = events
        self.rows, self.unattributed = rows(events)
        time: Dict[int, int] = collections.Counter()
        for row in self.rows:
            time[row.program.id] += row.duration_ps
        self.programs = [programs[i] for i, _ in sorted(time.items(), key=lambda kv: -kv[1])]
        self.command_buffers = uses_command_buffers(events)
        self._module_names = collections.Counter(p.name for p in self.programs)
        self._owners: Dict[Tuple[int, int], Dict[int, str]] = {}  # (joiner, program) -> parameter -> layer
        self._placed: Dict[Tuple[int, int, int], Tuple[str, str]] = {}  # (joiner, program, instruction) -> place
        self._time_by_method: Dict[str, int] = collections.Counter()
        for event in events:
            self._time_by_method[event.method or "unattributed"] += event.duration_ps

    def name(self, program: Program, instruction: Instruction) -> str:
        """An instruction's row name: its own, under its module's when several programs ran (and
        the program's id when two of them have one module name)."""
        if len(self.programs) < 2:
            return instruction.name
        module = program.name if self._module_names[program.name] < 2 else f"{program.name}#{program.id}"
        return f"{module}/{instruction.name}"

    def op_name(self, program: Program, instruction: Instruction) -> str:
        """The framework op an instruction implements most (its own op_name, else its fusion's)."""
        ops = program.framework_ops(instruction.id)
        return ops[0] if ops else ""

    def op_names(self) -> List[str]:
        """The framework op each instruction that ran implements most."""
        return [self.op_name(r.program, r.instruction) for r in self.rows]

    def place(self, joiner: Joiner, program: Program, instruction: Instruction) -> Tuple[str, str]:
        """``_place``, once per instruction (a slot update is placed through the gradient it reads)."""
        key = (id(joiner), program.id, instruction.id)
        found = self._placed.get(key)
        if found is None:
            found = self._placed[key] = self._place(joiner, program, instruction)
        return found

    def _place(self, joiner: Joiner, program: Program, instruction: Instruction) -> Tuple[str, str]:
        """(layer, phase) of an instruction: those of the framework op it implements most. One its
        name leaves on no layer (an optimizer's update, a weight's copy in another layout) takes the
        layer of the model state it reads, as a TensorFlow op reading a variable does, else (an
        optimizer's slot update) that of the gradient it reads. A collective (all-reduce, all-gather,
        ...) is in phase ``collective``, on the layer of the tensor it moves."""
        layer, phase = self._named(joiner, program, instruction)
        if phase == COLLECTIVE:
            return self.moved(joiner, program, instruction)[0], COLLECTIVE
        if phase == FORWARD and backward_by_producers(instruction.op_type, (
                self._named(joiner, program, s)[1] for s in self._made_from(program, instruction)), fused=True):
            return layer or self._summed_for(joiner, program, instruction), BACKWARD
        if layer or phase not in (FORWARD, OPTIMIZER):  # EXECUTOR: XLA's own work (a layout copy)
            return layer, phase
        owners = self._state_layers(joiner, program)
        found = collections.Counter(owners[o] for o in program.state_read(instruction.id) if o in owners)
        if found:
            return found.most_common(1)[0][0], phase
        if phase == OPTIMIZER:
            return self.moved(joiner, program, instruction, (BACKWARD,))[0], phase
        return layer, phase

    def _made_from(self, program: Program, instruction: Instruction) -> List[Instruction]:
        """The instructions whose values ``instruction`` takes: a tuple's element is the instruction that
        made it (inside a multi-output fusion: a loss's sum fused beside a gradient is the loss's), else,
        where that cannot be told, what the element moves."""
        out: List[Instruction] = []
        for operand in instruction.operand_ids:
            source = program.instructions.get(operand)
            if source is not None and source.opcode == "get-tuple-element":
                source = program.element(source) or source
            if source is None or source.opcode in ("parameter", "constant"):
                continue
            out += [source] if source.op_name or source.opcode not in NO_WORK else self._sources(program, source)
        return out

    def _summed_for(self, joiner: Joiner, program: Program, instruction: Instruction) -> str:
        """The layer of backward work no name places (``join.backward_by_producers``: a gradient sum):
        the one whose backward pass reads it (the layer that made the tensor), as ``join`` places such a
        TensorFlow op by its consumers, else the one its operands' gradients agree on."""
        readers = {self._named(joiner, program, r) for r in program.readers(instruction.id) if r.opcode not in NO_WORK}
        layers = {layer for layer, phase in readers if phase == BACKWARD and layer}
        if len(layers) == 1:
            return layers.pop()
        return self.moved(joiner, program, instruction, (BACKWARD,))[0]

    def moved(self, joiner: Joiner, program: Program, instruction: Instruction,
              phases: Tuple[str, ...] = ()) -> Tuple[str, str]:
        """(layer, phase) of what an instruction reads (through tuples and bitcasts), by the bytes each
        operand holds: the layer when they agree on one, else "" (a combined all-reduce of every
        gradient); ``phases``: only operands made in those."""
        layers: Dict[str, int] = collections.Counter()
        made: Dict[str, int] = collections.Counter()
        for source in self._sources(program, instruction):
            layer, phase = self._named(joiner, program, source)
            if phases and phase not in phases:
                continue
            if phase not in (OPTIMIZER, COLLECTIVE):  # those would look further back: one step back only
                layer, phase = self.place(joiner, program, source)
            layers[layer] += source.bytes
            made[phase] += source.bytes
        if not made:
            return "", ""
        return (next(iter(layers)) if len(layers) == 1 else ""), max(made, key=lambda p: made[p])

    def _named(self, joiner: Joiner, program: Program, instruction: Instruction) -> Tuple[str, str]:
        """(layer, phase) its framework op's name alone gives (no look at what it reads): a collective's
        phase, and the runtime's (EXECUTOR) for XLA's own work no framework op asked for."""
        if instruction.opcode in COLLECTIVES:
            return "", COLLECTIVE
        op_name = self.op_name(program, instruction)
        return joiner.assign(scope_name(op_name), instruction.op_type) if op_name else ("", EXECUTOR)

    @staticmethod
    def _sources(program: Program, instruction: Instruction, depth: int = 0) -> List[Instruction]:
        """The instructions doing work whose outputs ``instruction`` reads: through tuples, bitcasts
        and collectives (an all-reduce's element ``i`` is its operand ``i``, moved)."""
        out = []
        for operand in instruction.operand_ids:
            source = program.instructions.get(operand)
            if source is None or source.opcode == "parameter" or depth > 4:
                continue
            if source.opcode == "get-tuple-element":
                whole = program.instructions.get(source.operand_ids[0]) if source.operand_ids else None
                if whole is not None and whole.opcode.endswith("-done") and whole.operand_ids:
                    whole = program.instructions.get(whole.operand_ids[0])  # an async one: its -start's operands
                if whole is not None and whole.opcode in COLLECTIVES and source.tuple_index < len(whole.operand_ids):
                    element = program.instructions.get(whole.operand_ids[source.tuple_index])
                    out += [element] if element is not None and element.opcode not in NO_WORK else []
                    continue
            if source.opcode in NO_WORK or source.opcode in COLLECTIVES:
                out += Step._sources(program, source, depth + 1)
            else:
                out.append(source)
        return out

    def _state_layers(self, joiner: Joiner, program: Program) -> Dict[int, str]:
        """Entry parameter id -> the layer whose ops read it, for the state parameters those ops agree on."""
        key = (id(joiner), program.id)
        found = self._owners.get(key)
        if found is None:
            votes: Dict[int, "collections.Counter[str]"] = collections.defaultdict(collections.Counter)
            for instruction in program.entry():
                if instruction.opcode in NO_WORK:
                    continue
                layer, phase = joiner.assign(scope_name(self.op_name(program, instruction)), instruction.op_type)
                if layer and phase in (FORWARD, BACKWARD):
                    for parameter in program.state_read(instruction.id):
                        votes[parameter][layer] += 1
            found = self._owners[key] = {p: v.most_common(1)[0][0] for p, v in votes.items()
                                         if len(v) == 1 or v.most_common(2)[0][1] > v.most_common(2)[1][1]}
        return found

    def describe(self, joiner: Joiner, program: Program, buffer: Optional[LiveBuffer]) -> Tuple[str, str]:
        """(op, category) of a buffer of a temp allocation (None: the bytes no buffer holds at its peak)."""
        if buffer is None:
            return "", TEMPORARIES_CATEGORY
        if program.copies_state(buffer.instruction.id):  # the old value of a variable, not an activation
            return self.name(program, buffer.instruction), TEMPORARIES_CATEGORY
        phase = self.place(joiner, program, buffer.instruction)[1]
        if phase == COLLECTIVE:  # what it moves: a gradient's all-reduce holds a gradient
            phase = self.moved(joiner, program, buffer.instruction)[1]
        return (self.name(program, buffer.instruction),
                step_category(phase, "temp" if buffer.scratch else ""))

    def first_run_us(self) -> Tuple[float, float]:
        """When the main program's first run began and ended (its events' first start, last end)."""
        main = self.programs[0]
        events = [e for e in self._events if e.program is main]
        events.sort(key=lambda e: e.start_ps)
        first = events[0]
        if first.stats.get("run_id") is not None:
            run = [e for e in events if e.stats.get("run_id") == first.stats.get("run_id")]
        else:  # no run ids: the run ends where its first instruction runs again on its device
            again = next((i for i, e in enumerate(events[1:], 1)
                          if e.instruction is first.instruction and e.device == first.device), len(events))
            run = events[:again]
        return first.start_ps / 1e6, max(e.start_ps + e.duration_ps for e in run) / 1e6

    def executions(self) -> int:
        """How many times the main program ran: the calls most of its instructions made."""
        if not self.programs:
            return 0
        main = self.programs[0].id
        calls = collections.Counter(r.calls for r in self.rows if r.program.id == main)
        return calls.most_common(1)[0][0] if calls else 0

    def batch_sizes(self) -> Set[int]:
        """Bytes of each batch parameter of the programs (what a step takes in, transferred each run)."""
        return {p.bytes for program in self.programs for p in program.parameters()
                if p.number in self._batch_parameters(program)}

    def batch_size(self) -> Optional[int]:
        """The step's batch: the leading dimension of its first batch parameter (Keras on JAX: data[0])."""
        parameter = self._first_batch_parameter()
        return parameter.dims[0] if parameter else None

    def sequence_length(self) -> Optional[int]:
        """Tokens per sample: of the step's first batch parameter, when it is a sequence
        (``rules.buffers.input_sequence``)."""
        parameter = self._first_batch_parameter()
        return input_sequence(parameter.dims, parameter.dtype) if parameter else None

    def _first_batch_parameter(self) -> Optional[Parameter]:
        for program in self.programs:
            batch = self._batch_parameters(program)
            for parameter in sorted(program.parameters(), key=lambda p: p.number):
                if parameter.number in batch and parameter.dims:
                    return parameter
        return None

    def _batch_parameters(self, program: Program) -> Set[int]:
        """``name_stacks.batch_parameters`` of the main program; of the others (a step's helpers:
        ``jit_multiply``), only those Keras names so."""
        if program is self.programs[0]:
            return batch_parameters(program.parameters(), returned=program.output_dims())
        return {p.number for p in program.parameters() if is_keras_batch(p.op_name)}

    def resident(self) -> Dict[str, int]:
        """Bytes of the main program's entry parameters by role, where their names say it (Keras on
        JAX: the train step's state); empty when they do not (TensorFlow names them all XLA_Args)."""
        out: Dict[str, int] = collections.Counter()
        for parameter in self.programs[0].parameters() if self.programs else ():
            role = keras_state_role(parameter.op_name, parameter.dims)
            if role is not None:
                out[role] += parameter.bytes
        return dict(out)

    def state_shapes(self) -> Set[Tuple[int, ...]]:
        """Shapes of the state the main program's parameters hold, where their names say it (what
        ``carries_batch`` keeps from the batch without a breakdown: a weight's gradient is weight-shaped)."""
        return {tuple(p.dims) for p in (self.programs[0].parameters() if self.programs else ())
                if p.dims and keras_state_role(p.op_name, p.dims) is not None}

    def summary(self) -> Dict[str, Any]:
        """What kind of step this was and how much of its time is tied to instructions, for the tab."""
        total = sum(self._time_by_method.values()) or 1
        temps = []
        for program in self.programs:
            peak = program.temp_peak()
            if peak is not None:
                temps.append({"program": program.name, "allocation_bytes": peak.allocation_bytes,
                              "live_bytes": peak.live_bytes, "buffers": len(peak.live), "source": peak.source})
        note = ""
        if self.command_buffers:
            how = ("by its node's place in the buffer" if self._time_by_method.get("graph_node") else
                   "by its kernel's name and its place in the program's schedule, as this profile records no "
                   "graph node ids")
            note = (f"Kernels ran inside XLA command buffers (CUDA graphs): each is tied to its instruction {how}. "
                    f"For exact per-kernel timing run with {COMMAND_BUFFER_FLAG}")
        main = self.programs[0] if self.programs else None
        reused = main.reused_state() if main is not None else []
        state = sum(p.bytes for p in main.parameters() if p.number in main.written_back) if main is not None else 0
        if main is not None and reused and reused[0][1] >= 0.01 * state:  # a note where it can matter
            first, size = reused[0]
            what = self.op_name(main, first)
            note = ". ".join(filter(None, [(  # the command-buffer note ends in a flag: last
                f"XLA puts {len(reused)} of its own values in the buffers of the variables it updates in place, "
                f"while the step runs (the largest: {self.name(main, first)}"
                f"{f' for {what}' if what else ''}, {size:,} B): to the allocator those bytes are the "
                "variables', so where one of them is in use at the peak, its category of the step shows less "
                "than the step made"), note]))
        return {"programs": [{"id": p.id, "name": p.name} for p in self.programs],
                "executions": self.executions(), "command_buffers": self.command_buffers,
                "time_us_by_method": {k: v / 1e6 for k, v in sorted(self._time_by_method.items())},
                "attributed_fraction": 1 - self._time_by_method.get("unattributed", 0) / total,
                "temp_allocations": temps, "note": note}
