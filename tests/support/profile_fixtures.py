"""Profile log dirs for tests and benchmarks: real profiles, copied in the layout TF writes.

``big_xplane(source, path, target_bytes)`` grows a real ``.xplane.pb`` to a target size by
repeating its op and memory events later in time (the profile of many steps), so reducing it
costs what a long profile costs.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from tb_modelmem import proto


def session_dir(logdir: str, run: str, session: str = "2026_01_01_00_00_00") -> str:
    """``<logdir>/<run>/plugins/profile/<session>``, made."""
    path = os.path.join(logdir, run, "plugins", "profile", session)
    os.makedirs(path, exist_ok=True)
    return path


def copy_profile(xplane: str, logdir: str, run: str, host: str = "worker0",
                 session: str = "2026_01_01_00_00_00") -> str:
    target = os.path.join(session_dir(logdir, run, session), f"{host}.xplane.pb")
    shutil.copyfile(xplane, target)
    return target


def big_xplane(source: str, path: str, target_bytes: int) -> int:
    """Write a copy of ``source`` whose host lines repeat their events until it is at least
    ``target_bytes`` large (each repeat shifted past the last); returns the size written."""
    with open(source, "rb") as f:
        space = proto.XSpace.FromString(f.read())
    base = len(space.SerializeToString())
    events = sum(len(line.events) for plane in space.planes for line in plane.lines)
    per_repeat = max(base - len(_without_events(space).SerializeToString()), 1)  # what one copy of the events adds
    repeats = max(1, -(-(target_bytes - base) // per_repeat) + 1)
    for plane in space.planes:
        for line in plane.lines:
            originals = list(line.events)
            if not originals:
                continue
            span = max(e.offset_ps + e.duration_ps for e in originals) + 1
            for r in range(1, repeats):
                for e in originals:
                    copy = line.events.add()
                    copy.CopyFrom(e)
                    copy.offset_ps = e.offset_ps + r * span
    assert events, "the source profile has no events to repeat"
    data = space.SerializeToString()
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def _without_events(space: Any) -> Any:
    bare = type(space)()
    bare.CopyFrom(space)
    for plane in bare.planes:
        for line in plane.lines:
            del line.events[:]
    return bare
