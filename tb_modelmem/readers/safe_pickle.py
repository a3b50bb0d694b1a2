"""Pickles read without running anything they hold. No torch, no TF.

A pickle is a program: its GLOBAL/STACK_GLOBAL opcodes name any importable callable and REDUCE
calls it (``os.system`` included). Every callable an unpickler can reach comes from its
``find_class`` (INST, OBJ, EXT* go through it too) or ``persistent_load``. So:

- ``load_plain`` (memory snapshots: dicts, lists, tuples, strings, bytes, numbers, booleans, None)
  allows no class at all: the first one a pickle names refuses the whole file, before it exists;
- ``load_restricted`` (checkpoints) maps an explicit allowlist of names to inert stand-ins the
  caller gives (functions of this package that only record their arguments); nothing is imported.

Every fault is one ``InspectError`` (``UnsafePickle`` when the pickle asks for a class) naming the file.
"""

from __future__ import annotations

import io
import pickle
import zlib
from typing import Any, Callable, Mapping, Optional, Tuple

from tb_modelmem.readers.bounded import InspectError

GZIP_MAGIC = b"\x1f\x8b"


class UnsafePickle(InspectError):
    """The pickle names a class or function this reader does not allow: nothing of it was run."""


_FAULTS = (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
           OverflowError, RecursionError, MemoryError, UnicodeDecodeError, ImportError)


class _NoClasses(pickle.Unpickler):
    """An unpickler for plain data: any class, function or persistent id is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickle(f"it names {_shown(module, name)}; a plain-data pickle names none, and loading it "
                           "could run code, so nothing of it was loaded")

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickle("it refers to a persistent object (a storage of another file); a plain-data pickle "
                           "refers to none")


def load_plain(data: bytes, where: str) -> Any:
    """The value of a pickle that holds only plain data; ``UnsafePickle`` if it names any class."""
    try:
        return _NoClasses(io.BytesIO(data)).load()
    except UnsafePickle as e:
        raise UnsafePickle(f"{where}: refused: {e}") from None
    except _FAULTS as e:
        raise InspectError(f"{where}: not a readable pickle ({type(e).__name__}: {str(e)[:200]})") from None


class _Allowlisted(pickle.Unpickler):
    def __init__(self, data: bytes, allowed: Mapping[Tuple[str, str], Any],
                 persistent: Optional[Callable[[Any], Any]], refusal: str) -> None:
        super().__init__(io.BytesIO(data))
        self._allowed = allowed
        self._persistent = persistent
        self._refusal = refusal

    def find_class(self, module: str, name: str) -> Any:
        found = self._allowed.get((module, name))
        if found is None:
            raise UnsafePickle(f"it names {_shown(module, name)}, {self._refusal}")
        return found

    def persistent_load(self, pid: Any) -> Any:
        if self._persistent is None:
            raise UnsafePickle("it refers to a persistent object where none is expected")
        return self._persistent(pid)


def load_restricted(data: bytes, where: str, allowed: Mapping[Tuple[str, str], Any],
                    persistent: Optional[Callable[[Any], Any]] = None, refusal: str = "which this reader does not "
                    "load (loading it could run code)") -> Any:
    """A pickle whose globals are all keys of ``allowed`` (``(module, name)``), each replaced by its
    value; ``persistent`` answers its persistent ids. Anything else named refuses the whole pickle."""
    try:
        return _Allowlisted(data, allowed, persistent, refusal).load()
    except UnsafePickle as e:
        raise UnsafePickle(f"{where}: refused: {e}") from None
    except InspectError:
        raise
    except _FAULTS as e:
        raise InspectError(f"{where}: not a readable pickle ({type(e).__name__}: {str(e)[:200]})") from None


def gunzip(data: bytes, limit: int, where: str) -> bytes:
    """A gzip file's content, refused past ``limit`` bytes (a small file can inflate a thousandfold)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, limit + 1)
        if len(out) > limit:
            raise InspectError(f"{where}: inflates past {limit:,} bytes, more than this tool reads")
        if not inflater.eof:
            raise InspectError(f"{where}: truncated gzip file")
    except zlib.error as e:
        raise InspectError(f"{where}: not a readable gzip file ({e})") from None
    return out


def _shown(module: str, name: str) -> str:
    return f"{str(module)[:100]}.{str(name)[:100]}"
