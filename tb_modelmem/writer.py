"""Event files without TensorFlow: TensorBoard's own writer, used like ``tf.summary``'s.

A Keras-on-torch or JAX process has no TensorFlow, and importing it there can crash the process
(TensorFlow and triton in one process), so ``summary`` writes through ``FileWriter`` unless the
user writes inside a ``tf.summary`` default writer. ``FileWriter(logdir).as_default()`` makes it
the default for ``tb_modelmem.summary.*`` calls, as ``tf.summary.create_file_writer`` does; its
``add_summary`` is the TF1 ``FileWriter``'s, so it also serves as an explicit ``writer=``.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import socket
import threading
import time
from typing import Any, Callable, Iterator, Optional, Union

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter

_DEFAULT: contextvars.ContextVar[Optional["FileWriter"]] = contextvars.ContextVar("tb_modelmem_writer", default=None)


_FILES = itertools.count()  # event files this process made: two writers in one second get two names


class FileWriter:
    """Appends ``Summary`` protos to a new event file in ``logdir``, made at once (an unwritable log
    dir is an error here, as with ``tf.summary.create_file_writer``). Each summary is appended and
    the file closed again: they are few (a breakdown, a trace, a memory sample every N steps), and
    nothing is lost or left open when the process ends. TensorBoard's own ``EventFileWriter`` is
    not used: it reaches files through ``tensorboard.compat.tf``, which imports TensorFlow wherever
    it is installed."""

    def __init__(self, logdir: Union[str, "os.PathLike[str]"], keep_errors: bool = False) -> None:
        """``keep_errors``: a summary that cannot be written (a full disk) is dropped and its error kept in
        ``failed`` rather than raised, for a caller that says so once (``MemoryCallback``)."""
        self.logdir = os.fspath(logdir)
        if os.path.exists(self.logdir) and not os.path.isdir(self.logdir):
            raise NotADirectoryError(f"{self.logdir!r} is not a directory")
        os.makedirs(self.logdir, exist_ok=True)
        self.keep_errors = keep_errors
        self.failed: Optional[OSError] = None
        name = f"events.out.tfevents.{time.time():.0f}.{socket.gethostname()}.{os.getpid()}.{next(_FILES)}.modelmem"
        self.path = os.path.join(self.logdir, name)
        self._started = False
        self._lock = threading.Lock()

    def add_summary(self, summary: Union[bytes, summary_pb2.Summary], step: Optional[int] = None) -> None:
        """Append one summary at ``step`` (a serialized ``Summary`` is taken too, as TF1's writer does)."""
        if isinstance(summary, bytes):
            summary = summary_pb2.Summary.FromString(summary)
        event = event_pb2.Event(wall_time=time.time(), step=int(step or 0), summary=summary)
        with self._lock:
            try:
                with open(self.path, "ab") as f:
                    records = RecordWriter(f)
                    if not self._started:
                        records.write(event_pb2.Event(wall_time=event.wall_time, file_version="brain.Event:2")
                                      .SerializeToString())
                        self._started = True
                    records.write(event.SerializeToString())
            except OSError as e:
                if not self.keep_errors:
                    raise
                self.failed = e

    def flush(self) -> None:
        """Nothing to do: each summary is on disk once ``add_summary`` returns."""

    def close(self) -> None:
        """Nothing to do: no file is held open."""

    @contextlib.contextmanager
    def as_default(self) -> Iterator["FileWriter"]:
        """The default writer of ``tb_modelmem.summary`` inside the block."""
        token = _DEFAULT.set(self)
        try:
            yield self
        finally:
            _DEFAULT.reset(token)


def default() -> Optional[FileWriter]:
    """The ``FileWriter`` made default by ``as_default``, if any."""
    return _DEFAULT.get()


def adder(writer: Any) -> Callable[[summary_pb2.Summary, Optional[int]], None]:
    """How to append a summary to what ``writer=`` was given: a TF1 ``FileWriter`` (it takes the
    serialized proto: TensorFlow's ``Summary`` class is not TensorBoard's), a ``FileWriter`` of this
    module, or a ``torch.utils.tensorboard.SummaryWriter`` (through its own file writer). A
    TypeError names anything else, at once."""
    if isinstance(writer, FileWriter):
        return writer.add_summary
    own = getattr(writer, "_get_file_writer", None)  # torch.utils.tensorboard.SummaryWriter
    if callable(own):
        return lambda summary, step: own().add_summary(summary, step)
    add = getattr(writer, "add_summary", None)
    if callable(add):  # TF1's FileWriter and any writer in its manner
        return lambda summary, step: add(summary.SerializeToString(), step)
    raise TypeError(f"writer must be a tf.compat.v1.summary.FileWriter (with add_summary), a "
                    f"tb_modelmem.summary.create_file_writer(...), or a torch.utils.tensorboard.SummaryWriter, "
                    f"got {type(writer).__name__}")
