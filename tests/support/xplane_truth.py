"""Ground truth of an XLA step's profile, read with TensorFlow's own schemas (xplane_pb2, hlo_pb2), never
with tb_modelmem's: the programs it keeps, the time of each instruction its events name, the allocators'
bytes in use. Shared by tests/integration/test_xla_cpu.py and tests/integration/test_xla_gpu.py."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Dict, List, Tuple


@dataclasses.dataclass
class Truth:
    programs: Dict[int, Any]  # program id -> xla.HloProto
    time: Dict[str, float]  # instruction name (hlo_op) -> summed event time, us
    in_use: Dict[str, List[Tuple[int, int]]]  # allocator -> (bytes allocated after, bytes requested) per event

    def main(self) -> Any:
        """The program with the most instructions (the train step)."""
        return max(self.programs.values(), key=lambda p: sum(len(c.instructions) for c in p.hlo_module.computations))


def read(data: bytes, devices: str = "") -> Truth:
    """What the profile ``data`` holds; ``devices``: only events of planes named so count for time
    ("/device:GPU"), all planes when empty."""
    from tensorflow.compiler.xla.service import hlo_pb2
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace.FromString(data)
    truth = Truth({}, collections.Counter(), collections.defaultdict(list))
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}

        def stats(items: Any) -> Dict[str, Any]:
            return {names[s.metadata_id]: names[s.ref_value] if s.HasField("ref_value")
                    else getattr(s, s.WhichOneof("value")) for s in items}

        if plane.name == "/host:metadata":
            for metadata_id, meta in plane.event_metadata.items():
                found = stats(meta.stats)
                if "Hlo Proto" in found:
                    truth.programs[found.get("program_id", metadata_id)] = hlo_pb2.HloProto.FromString(
                        found["Hlo Proto"])
        for line in plane.lines:
            for event in line.events:
                found = stats(event.stats)
                if "hlo_op" in found and plane.name.startswith(devices):
                    truth.time[found["hlo_op"]] += event.duration_ps / 1e6
                if plane.event_metadata[event.metadata_id].name == "MemoryAllocation":
                    truth.in_use[found["allocator_name"]].append((found["bytes_allocated"],
                                                                   found.get("requested_bytes", 0)))
    return truth


def without_graph_node_ids(data: bytes) -> bytes:
    """A profile whose kernels carry no command-buffer node ids (a profiler that does not record them):
    the reader then ties kernels by name and place in the schedule, and leaves some time unattributed."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace.FromString(data)
    for plane in space.planes:
        ids = {k for k, m in plane.stat_metadata.items() if m.name == "cuda_graph_node_id"}
        for line in plane.lines:
            for event in line.events:
                keep = [stat for stat in event.stats if stat.metadata_id not in ids]
                del event.stats[:]
                event.stats.extend(keep)
    return space.SerializeToString()
