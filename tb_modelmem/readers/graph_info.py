"""What the traced graphs say about the ops a profile ran, in a form both sides share: live
capture (``capture.opgraph``) reads it from TensorFlow's graphs, ``readers.graphdef`` from a
log dir's serialized ``GraphDef``s, and the trace readers use it for output shapes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Tuple

from tb_modelmem.rules.join import OpGraph

Dims = Optional[Tuple[Optional[int], ...]]  # None: unknown rank
# One output of a graph op: (dims, dtype name, bytes per element; 0 if not a plain array).
OutputSpec = Tuple[Dims, str, int]


@dataclasses.dataclass
class GraphInfo:
    """What the traced graphs say about the ops a profile ran."""

    outputs: Mapping[str, List[OutputSpec]]  # op name -> its outputs
    graphs: List[OpGraph] = dataclasses.field(default_factory=list)
    # (op name or its output specs, batch) -> what the specs say of its output (``xspace``): kept
    # with the graph, so the next trace of the same step does not work it out again
    derived: Dict[Tuple[Any, Optional[int]], Tuple[str, int, str, str]] = dataclasses.field(default_factory=dict)
