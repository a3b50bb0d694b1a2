"""Which device holds which bytes of the run's variables: the one rule Storage's per-device table,
the peak's resident state and What-if's sharding read. No TF.

A variable's ``device`` lists the devices holding a copy or a piece of it and ``device_bytes`` what
each holds (``capture.variables``: a JAX array's sharding, a TF mirrored variable's components).
Without ``device_bytes`` (one device, or a record written before it was kept) each of its
``replicas`` holds ``bytes / replicas``.
"""

from __future__ import annotations

import collections
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from tb_modelmem.schema.dtypes import item_bytes
from tb_modelmem.schema.records import element_count

Placement = List[Tuple[str, int]]  # (device, bytes there) per device holding part of a variable


def placements(columns: Mapping[str, Sequence]) -> List[Placement]:
    """Each variable's bytes on each device that holds them."""
    out = []
    for devices, size, replicas, held in zip(columns["device"], columns["bytes"], columns["replicas"],
                                             columns.get("device_bytes") or [[]] * len(columns["bytes"])):
        names = devices.split(",") if devices else [""]
        if held and len(held) == len(names):
            out.append(list(zip(names, held)))
        elif replicas > 1 and len(names) == replicas:
            out.append([(name, size // replicas) for name in names])
        else:
            out.append([(devices, size // max(replicas, 1))])
    return out


def spread(columns: Mapping[str, Sequence]) -> bool:
    """Whether the variables lie over several devices as the record says (sharded or replicated)."""
    return len({name for placed in placements(columns) for name, _ in placed if name}) > 1


def per_device(columns: Mapping[str, Sequence]) -> Dict[str, Dict[str, int]]:
    """Bytes by role on each device, devices in name order."""
    found: Dict[str, Dict[str, int]] = collections.defaultdict(lambda: collections.Counter())
    for role, placed in zip(columns["role"], placements(columns)):
        for name, size in placed:
            found[name][role] += size
    return {name: dict(found[name]) for name in sorted(found, key=_device_order)}


def busiest(columns: Mapping[str, Sequence]) -> Optional[str]:
    """The named device holding the most variable bytes (the first of equals); None without one."""
    totals = {name: sum(roles.values()) for name, roles in per_device(columns).items() if name and "," not in name}
    return max(totals, key=lambda name: totals[name]) if totals else None


def on_device(columns: Mapping[str, Sequence], device: Optional[str]) -> List[int]:
    """Each variable's bytes on ``device`` (0 where it has none there); one copy each when the record
    lies on one device or ``device`` is None."""
    out = []
    for placed in placements(columns):
        if device is None or (len(placed) == 1 and placed[0][0] in ("", device)):
            out.append(max(size for _, size in placed))
        elif len(placed) == 1 and "," in placed[0][0]:  # devices listed without their bytes: one copy each
            out.append(placed[0][1] if device in placed[0][0].split(",") else 0)
        else:
            out.append(dict(placed).get(device, 0))
    return out


def logical_bytes(columns: Mapping[str, Sequence]) -> List[int]:
    """Each variable's bytes counted once (its global size: elements x dtype size), however many devices
    hold copies or pieces; ``bytes / replicas`` where the shape or dtype does not say it."""
    out = []
    for shape, dtype, size, replicas in zip(columns["shape"], columns["dtype"], columns["bytes"], columns["replicas"]):
        whole = element_count(shape) * (item_bytes(dtype) or 0)
        out.append(whole or size // max(replicas, 1))
    return out


def _device_order(name: str) -> Tuple[str, int]:
    """/device:CPU:10 after /device:CPU:9."""
    head, _, tail = name.rpartition(":")
    return (head, int(tail)) if tail.isdigit() else (name, -1)
