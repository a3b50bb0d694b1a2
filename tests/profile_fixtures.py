"""Profile log dirs for tests and benchmarks: real profiles, copied in the layout TF writes.

``big_xplane(source, path, target_bytes)`` grows a real ``.xplane.pb`` to a target size by
repeating its op and memory events later in time (the profile of many steps), so reducing it
costs what a long profile costs.
"""

from __future__ import annotations

import os
import shutil

from tb_modelmem import proto


def session_dir(logdir: str, run: str, session: str = "2026_01_01_00_00_00") -> str:
    """``<logdir>/<run>/plugins/profile/<session>``, made."""
    path = os.path.join(logdir, run, "plugins", "profile", session)
    os.makedirs(path, exist_ok=True)
    return path


def copy_profile(xplane: str, logdir: str, run: str, host: str = "worker0", session: str = "2026_01_01_00_00_00") -> str:
    target = os.path.join(session_dir(logdir, run, session), f"{host}.xplane.pb")
    shutil.copyfile(xplane, target)
    return target


def big_xplane(source: str, path: str, target_bytes: int) -> int:
    """Write a copy of ``source`` whose host lines repeat their events until it is ``target_bytes``
    large (each repeat shifted past the last); returns the size written."""
    with open(source, "rb") as f:
        space = proto.XSpace.FromString(f.read())
    base = len(space.SerializeToString())
    repeats = max(1, target_bytes // max(base, 1))
    for plane in space.planes:
        for line in plane.lines:
            events = list(line.events)
            if not events:
                continue
            span = max(e.offset_ps + e.duration_ps for e in events) + 1
            for r in range(1, repeats):
                for e in events:
                    copy = line.events.add()
                    copy.CopyFrom(e)
                    copy.offset_ps = e.offset_ps + r * span
    data = space.SerializeToString()
    with open(path, "wb") as f:
        f.write(data)
    return len(data)
