"""What both trainer callbacks do with a ``pytorch.Profile``, whatever hooks their trainer calls: begin it
at training start, end an iteration, record storage at a save, close it at training end."""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

from tb_modelmem.pytorch import Profile


class Profiled:
    """The state a trainer callback keeps: its settings and the ``Profile`` of the run in progress."""

    def __init__(self, log_dir: Optional[str] = None,
                 profile_steps: Union[None, int, Tuple[int, int]] = (3, 4), trace_dir: Optional[str] = None,
                 memory_every: Optional[int] = 100) -> None:
        """``log_dir``: where the event files go (the trainer's folder by default); ``profile_steps``: the
        1-based iterations to profile (None: storage only); ``trace_dir``: also keep the raw Chrome trace;
        ``memory_every``: every N iterations a sample of the process's memory for the Growth view (None: none)."""
        self.log_dir = log_dir
        self.profile_steps = profile_steps
        self.trace_dir = trace_dir
        self.memory_every = memory_every
        self.profile: Optional[Profile] = None

    def _begin(self, model: Any, optimizer: Any, default_log_dir: str) -> None:
        self.profile = Profile(model, optimizer, self.log_dir or default_log_dir, self.profile_steps,
                               trace_dir=self.trace_dir, memory_every=self.memory_every,
                               rank_traces=False).start()  # rank 0 alone records

    def _iteration_ended(self) -> None:
        if self.profile is not None:
            self.profile.step()

    def _saved(self) -> None:
        if self.profile is not None:
            self.profile.write_storage()

    def _end(self) -> None:
        if self.profile is not None:
            self.profile.stop()
            self.profile = None
