"""Multi-rank CPU jobs on gloo, started the one way the test workers share.

Each job gets a port the OS says is free (a fixed range collides with another job on a shared CI host, whose
store a rank may then join), and a job whose rank was aborted (SIGABRT) is run once more from a clean output
folder: gloo's threads can abort a rank as its process group is torn down ("terminate called without an
active exception", seen once in CI), a crash of the runtime, not of what the job records. A rank that raises
or dies by any other signal fails the job at once, and a second abort too.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from typing import Any, Callable, Optional


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn_ranks(rank_main: Callable[..., None], world: int, *args: Any, fresh: Optional[str] = None) -> None:
    """``rank_main(rank, port, *args)`` on ``world`` spawned processes; ``fresh`` is removed before a rerun."""
    import torch.multiprocessing as mp

    for attempt in (1, 2):
        try:
            mp.spawn(rank_main, args=(free_port(), *args), nprocs=world)
            return
        except mp.ProcessExitedException as died:
            if attempt == 2 or died.signal_name != "SIGABRT":
                raise
            print(f"gloo job: rank {died.error_index} died by {died.signal_name}; running the job once more",
                  file=sys.stderr)
            if fresh and os.path.exists(fresh):
                shutil.rmtree(fresh)
