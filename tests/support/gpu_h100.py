"""The H100 profiles of Keras 3 on JAX kept in tests/fixtures/gpu_h100 (its README says where they come
from): each run's profile, and a log dir laid out as jax.profiler wrote it."""

from __future__ import annotations

import gzip
import os

from tests.support import paths

FIXTURES = os.path.join(paths.FIXTURES, "gpu_h100")
TRUTH = os.path.join(FIXTURES, "truth.json")
# run -> the profile session jax.profiler named (a folder of <run>/train/plugins/profile/)
SESSIONS = {"keras_jax_lenet": "2026_11_26_13_26_16", "keras_jax_lenet_nocmdbuf": "2026_11_26_13_35_00",
            "keras_jax_transformer": "2026_11_26_13_34_37"}


def profile_bytes(run: str) -> bytes:
    """The run's ``vm.xplane.pb`` as jax.profiler wrote it."""
    with gzip.open(os.path.join(FIXTURES, f"{run}.xplane.pb.gz")) as f:
        return f.read()


def write_run(logdir: str, run: str, data: bytes = b"", name: str = "") -> str:
    """``logdir/<name or run>/train/plugins/profile/<session>/vm.xplane.pb`` holding the run's profile (or
    ``data``); its path."""
    session = os.path.join(logdir, name or run, "train", "plugins", "profile", SESSIONS[run])
    os.makedirs(session)
    path = os.path.join(session, "vm.xplane.pb")
    with open(path, "wb") as f:
        f.write(data or profile_bytes(run))
    return path
