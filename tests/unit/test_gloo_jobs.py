"""The test jobs' multi-rank launcher: a rank killed by a signal (gloo aborting at teardown, seen once in CI)
runs the job once more from a clean folder; a rank that raises fails the job at once."""

from __future__ import annotations

import os
import resource

import pytest

from tests.support import gloo

pytest.importorskip("torch")


def _aborts_first_time(rank: int, port: int, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    tries = os.path.join(os.path.dirname(out), "tries")
    with open(tries, "a") as f:
        f.write(f"{rank} {port}\n")
    with open(os.path.join(out, f"rank{rank}"), "w") as f:
        f.write("done")
    with open(tries) as f:
        first = len(f.read().splitlines()) == 1
    if rank == 0 and first:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
        os.abort()


def _raises(rank: int, port: int, out: str) -> None:
    with open(out, "a") as f:
        f.write(f"{rank}\n")
    raise ValueError("the job's own failure")


def test_a_rank_killed_by_a_signal_reruns_the_job_from_a_clean_folder(tmp_path):
    out = str(tmp_path / "run")
    os.makedirs(out)
    with open(os.path.join(out, "stale"), "w") as f:
        f.write("from the aborted try")
    gloo.spawn_ranks(_aborts_first_time, 1, out, fresh=out)
    with open(tmp_path / "tries") as f:
        tries = f.read().split()
    assert len(tries) == 4  # rank 0 twice, each with a port
    assert sorted(os.listdir(out)) == ["rank0"]


def test_a_rank_that_raises_is_not_run_again(tmp_path):
    out = str(tmp_path / "ran")
    with pytest.raises(Exception, match="the job's own failure"):
        gloo.spawn_ranks(_raises, 1, out)
    with open(out) as f:
        assert f.read().split() == ["0"]
