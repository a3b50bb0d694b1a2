"""Pickles read without running anything they hold, in bounded work. No torch, no TF.

A pickle is a program: its GLOBAL/STACK_GLOBAL opcodes name any importable callable and REDUCE
calls it (``os.system`` included). Every callable an unpickler can reach comes from its
``find_class`` (INST, OBJ, EXT* go through it too) or ``persistent_load``. So:

- ``load_plain`` (memory snapshots: dicts, lists, tuples, strings, bytes, numbers, booleans, None)
  allows no class at all: the first one a pickle names refuses the whole file, before it exists;
- ``load_restricted`` (checkpoints) maps an explicit allowlist of names to inert stand-ins the
  caller gives (functions of this package that only record their arguments); nothing is imported.

A pickle that runs nothing can still do harm with plain data, so this unpickler (Python's own,
with a few opcodes replaced) also refuses:

- BUILD (setting an object's attributes) on anything but an object this load made of a type the
  caller allows (``OrderedDict``'s ``_metadata``) or an ``Inert`` record: never on a stand-in, so no load
  changes the next; NEWOBJ of anything but an ``Inert`` class the allowlist names; INST, OBJ,
  NEWOBJ_EX and the EXT opcodes (the last keep a process-wide cache) outright;
- a dict key or set element that is a container of more than ``MAX_KEY_NODES`` parts (a tuple
  shared through the memo hashes in 2^depth steps, in C, holding the GIL: a frozen server);
- containers shared through the memo whose trees, counting every shared part each time it is
  reached, add up past a budget of ``EXPANSION`` parts per byte (``expanded_size``: "billion laughs",
  a list shared through the memo, makes any walk or ``str()`` of the value exhaust memory), or nest
  deeper than ``MAX_DEPTH``; a container changed after the memo handed it out (its count would be
  stale: a real pickler never does it, and a value that holds itself needs it), and DUP.

Error messages describe a value by its type and size (``describe``), never by ``str()`` of it.
Every fault is one ``InspectError`` (``UnsafePickle`` when the pickle asks for a class) naming the file.
"""

from __future__ import annotations

import collections
import io
import pickle
import struct
from typing import Any, Callable, Dict, List, Mapping, NoReturn, Optional, Tuple

from tb_modelmem.readers.bounded import InspectError

MAX_KEY_NODES = 64  # parts of one dict key or set element (a real one is a str, an int or a short tuple)
MAX_DEPTH = 100  # containers within containers (a snapshot nests ~6 deep, a checkpoint ~5)
EXPANSION = 16  # a tree may count this many parts per byte of pickle (sharing); a bomb counts ~2^depth
MIN_EXPANDED = 1 << 20
_ATOMS = (str, bytes, int, float, bool, type(None), complex)
_CONTAINERS = (list, tuple, dict, set, frozenset)
_ATOM_TYPES = frozenset(_ATOMS)


class UnsafePickle(InspectError):
    """The pickle names a class or function this reader does not allow: nothing of it was run."""


_FAULTS = (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError,
           OverflowError, RecursionError, MemoryError, UnicodeDecodeError, ImportError, LookupError, struct.error)


def describe(value: Any) -> str:
    """A value named for an error message without building its text: its type and size."""
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return f"a {type(value).__name__} of {len(value):,}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"an int of {value.bit_length():,} bits" if value.bit_length() > 64 else f"the int {value}"
    return f"a {type(value).__name__}"


def text(value: Any, limit: int = 300) -> str:
    """A name from a file as text to show: a str cut to ``limit`` with lone surrogates escaped (they
    cannot be encoded as UTF-8, so JSON or a terminal would fail on them), an int as digits, else
    ``describe``."""
    if isinstance(value, str):
        return value[:limit].encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() <= 64:
        return str(value)
    return f"({describe(value)})"


def _shown(module: Any, name: Any) -> str:
    return f"{str(module)[:100]}.{str(name)[:100]}" if isinstance(module, str) and isinstance(name, str) else \
        f"{describe(module)}.{describe(name)}"


def check_key(value: Any) -> Any:
    """``value`` if hashing it is cheap (an atom, or a container of at most MAX_KEY_NODES parts)."""
    if isinstance(value, _ATOMS):
        return value
    pending, seen = [value], 0
    while pending:
        part = pending.pop()
        seen += 1
        if seen > MAX_KEY_NODES:
            raise UnsafePickle(f"a dict key or set element of more than {MAX_KEY_NODES} parts (a hash bomb: "
                               "hashing one shared through the memo takes 2^depth steps)")
        if isinstance(part, (tuple, frozenset)):
            pending.extend(part)
    return value


def checked_set(items: Any = ()) -> set:
    """``builtins.set`` for an allowlist: its elements are checked before they are hashed."""
    return {check_key(item) for item in _sequence(items)}


def checked_frozenset(items: Any = ()) -> frozenset:
    return frozenset(checked_set(items))


def checked_ordered_dict(items: Any = ()) -> "collections.OrderedDict[Any, Any]":
    """``collections.OrderedDict`` for an allowlist (torch pickles it empty, then fills it by SETITEMS)."""
    out: "collections.OrderedDict[Any, Any]" = collections.OrderedDict()
    for pair in _sequence(items):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise InspectError("an OrderedDict built from something other than (key, value) pairs")
        out[check_key(pair[0])] = pair[1]
    return out


class Inert:
    """The stand-in for a class an allowlist names that a pickle builds by NEWOBJ and BUILD (a dataclass of
    ``torch.distributed.checkpoint``'s metadata): it keeps what it was given (``args``, the attributes BUILD
    set in ``fields``, any other state in ``state``) and has no method a pickle could reach. ``inert`` makes
    one class per name, so a reader can tell them apart."""

    __slots__ = ("args", "fields", "state")

    def __init__(self) -> None:
        self.args: Tuple[Any, ...] = ()
        self.fields: Dict[str, Any] = {}
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:  # never reached: BUILD on an Inert is this module's own
        raise UnsafePickle("a stand-in's state set from outside this reader")


def inert(name: str) -> type:
    """A fresh ``Inert`` subclass named ``name`` (each reader's allowlist maps its names to its own)."""
    return type(name, (Inert,), {"__slots__": ()})


def _sequence(items: Any) -> Any:
    if not isinstance(items, (list, tuple, set, frozenset)):
        raise InspectError(f"a set or dict built from {describe(items)}")
    return items


_PythonUnpickler: Any = pickle._Unpickler  # Python's own (its opcodes can be replaced), not the C one


class _Bounded(_PythonUnpickler):
    """Python's unpickler with the opcodes the module docstring names replaced."""

    dispatch: Dict[int, Callable[[Any], None]] = dict(_PythonUnpickler.dispatch)

    def __init__(self, data: bytes, allowed: Mapping[Tuple[str, str], Any],
                 persistent: Optional[Callable[[Any], Any]], refusal: str, buildable: Tuple[type, ...]) -> None:
        super().__init__(io.BytesIO(data))
        self._allowed = allowed
        self._persistent = persistent
        self._refusal = refusal
        self._buildable = buildable
        self._made: Dict[int, Any] = {}  # id -> object this load built that BUILD may touch
        self._fetched: set = set()  # ids of containers the memo handed out again: never changed after
        self._sizes: Dict[int, int] = {}  # id -> parts of a container's tree (expanded_size's cache)
        self._budget = max(MIN_EXPANDED, EXPANSION * len(data))
        self._charged = 0  # parts the memo's containers add to the tree each time one is handed out

    def find_class(self, module: str, name: str) -> Any:
        found = self._allowed.get((module, name)) if isinstance(module, str) and isinstance(name, str) else None
        if found is None:
            raise UnsafePickle(f"it names {_shown(module, name)}, {self._refusal}")
        return found

    def persistent_load(self, pid: Any) -> Any:
        if self._persistent is None:
            raise UnsafePickle("it refers to a persistent object (a storage of another file) where none is expected")
        return self._persistent(pid)

    def _reduce(self) -> None:
        args = self.stack.pop()
        func = self.stack[-1]
        if not isinstance(args, tuple):
            raise InspectError(f"a call with {describe(args)} for its arguments")
        value = func(*args)
        if isinstance(value, self._buildable):
            self._made[id(value)] = value
        self.stack[-1] = value

    def _fetch(self, index: int) -> None:
        try:
            value = self.memo[index]
        except KeyError:
            raise InspectError(f"memo entry {index} read before it was written") from None
        if type(value) not in _ATOM_TYPES and _is_container(value):
            key = id(value)
            self._fetched.add(key)
            known = self._sizes.get(key)
            self._charged += known if known is not None else expanded_size(value, self._budget, self._sizes)
            if self._charged > self._budget:
                raise UnsafePickle(f"a 'billion laughs' bomb: the objects it shares through its memo add up to "
                                   f"over {self._budget:,} parts")
        self.append(value)

    def _get(self) -> None:
        self._fetch(int(self.readline()[:-1]))

    def _binget(self) -> None:
        self._fetch(self.read(1)[0])

    def _long_binget(self) -> None:
        self._fetch(int.from_bytes(self.read(4), "little"))

    def _unchanged(self, target: Any) -> Any:
        """``target`` if the memo has not handed it out yet (then its counted size would be stale)."""
        if id(target) in self._fetched:
            raise UnsafePickle(f"it changes {describe(target)} after sharing it through its memo")
        return target

    def _append(self) -> None:
        value = self.stack.pop()
        target = self._unchanged(self.stack[-1])
        if type(target) is not list:
            raise InspectError(f"APPEND to {describe(target)}")
        target.append(value)

    def _appends(self) -> None:
        items = self.pop_mark()
        target = self._unchanged(self.stack[-1])
        if type(target) is not list:
            raise InspectError(f"APPENDS to {describe(target)}")
        target.extend(items)

    def _newobj(self) -> None:
        args = self.stack.pop()
        cls = self.stack.pop()
        if not (isinstance(cls, type) and issubclass(cls, Inert)) or not isinstance(args, tuple):
            self._refused()
        made = cls()
        made.args = args
        self._made[id(made)] = made
        self.append(made)

    def _build(self) -> None:
        state = self.stack.pop()
        target = self._unchanged(self.stack[-1])
        if self._made.get(id(target)) is target and isinstance(target, Inert):
            _set_state(target, state)
            return
        if self._made.get(id(target)) is not target:
            raise UnsafePickle(f"it sets the attributes of {describe(target)}, which this reader never lets a "
                               "pickle change")
        if not isinstance(state, dict) or not all(type(k) is str for k in state):
            raise InspectError(f"an object's state is {describe(state)}, not attributes by name")
        target.__dict__.update(state)

    def _setitem(self) -> None:
        value = self.stack.pop()
        key = self.stack.pop()
        self._target_dict()[check_key(key)] = value

    def _setitems(self) -> None:
        items = self.pop_mark()
        target = self._target_dict()
        for i in range(0, len(items) - 1, 2):
            target[check_key(items[i])] = items[i + 1]

    def _dict(self) -> None:
        items = self.pop_mark()
        self.append({check_key(items[i]): items[i + 1] for i in range(0, len(items) - 1, 2)})

    def _additems(self) -> None:
        items = self.pop_mark()
        target = self._unchanged(self.stack[-1])
        if type(target) is not set:
            raise InspectError(f"ADDITEMS on {describe(target)}")
        target.update(check_key(item) for item in items)

    def _frozenset(self) -> None:
        self.append(frozenset(check_key(item) for item in self.pop_mark()))

    def _target_dict(self) -> Dict[Any, Any]:
        target = self._unchanged(self.stack[-1])
        if not isinstance(target, dict):
            raise InspectError(f"SETITEM on {describe(target)}")
        return target

    def _refused(self) -> NoReturn:
        raise UnsafePickle(f"it uses an opcode that builds objects by class, by a process-wide registry or "
                           f"by copying a reference (INST, OBJ, NEWOBJ, EXT, DUP), {self._refusal}")


def _set_state(record: Inert, state: Any) -> None:
    """BUILD on an ``Inert``: attributes by name into ``fields`` (a dict, or a (dict, slots dict) pair), any
    other state (a tuple ``__getstate__`` gave) kept as it is."""
    fields, rest = (state if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict)
                    else (state, None) if isinstance(state, dict) else ({}, state))
    for part in (fields, rest if isinstance(rest, dict) else {}):
        if not all(type(k) is str for k in part):
            raise InspectError(f"an object's state is {describe(part)}, not attributes by name")
        record.fields.update(part)
    record.state = None if isinstance(rest, dict) else rest


for _opcode, _method in ((pickle.REDUCE, _Bounded._reduce), (pickle.BUILD, _Bounded._build),
                         (pickle.SETITEM, _Bounded._setitem), (pickle.SETITEMS, _Bounded._setitems),
                         (pickle.DICT, _Bounded._dict), (pickle.ADDITEMS, _Bounded._additems),
                         (pickle.FROZENSET, _Bounded._frozenset), (pickle.GET, _Bounded._get),
                         (pickle.BINGET, _Bounded._binget), (pickle.LONG_BINGET, _Bounded._long_binget),
                         (pickle.APPEND, _Bounded._append), (pickle.APPENDS, _Bounded._appends),
                         (pickle.NEWOBJ, _Bounded._newobj)):
    _Bounded.dispatch[_opcode[0]] = _method
for _opcode in (pickle.INST, pickle.OBJ, pickle.NEWOBJ_EX, pickle.EXT1, pickle.EXT2, pickle.EXT4, pickle.DUP):
    _Bounded.dispatch[_opcode[0]] = _Bounded._refused


def _load(data: bytes, where: str, allowed: Mapping[Tuple[str, str], Any], persistent: Optional[Callable[[Any], Any]],
          refusal: str, buildable: Tuple[type, ...]) -> Any:
    try:
        return _Bounded(data, allowed, persistent, refusal, buildable).load()
    except UnsafePickle as e:
        raise UnsafePickle(f"{where}: refused: {e}") from None
    except InspectError as e:
        raise InspectError(f"{where}: not a readable pickle ({e})") from None
    except _FAULTS as e:
        raise InspectError(f"{where}: not a readable pickle ({type(e).__name__}: {str(e)[:200]})") from None


def load_plain(data: bytes, where: str) -> Any:
    """The value of a pickle that holds only plain data; ``UnsafePickle`` if it names any class."""
    return _load(data, where, {}, None, "a plain-data pickle names none, and loading it could run code, so "
                 "nothing of it was loaded", ())


def load_restricted(data: bytes, where: str, allowed: Mapping[Tuple[str, str], Any],
                    persistent: Optional[Callable[[Any], Any]] = None, refusal: str = "which this reader does not "
                    "load (loading it could run code)", buildable: Tuple[type, ...] = (collections.OrderedDict,)
                    ) -> Any:
    """A pickle whose globals are all keys of ``allowed`` (``(module, name)``), each replaced by its
    value; ``persistent`` answers its persistent ids; BUILD may set the attributes of objects of the
    ``buildable`` types that the stand-ins made in this load. Anything else refuses the whole pickle."""
    return _load(data, where, allowed, persistent, refusal, buildable)


def expanded_size(value: Any, budget: int, sizes: Optional[Dict[int, int]] = None) -> int:
    """Parts of ``value``'s tree, a shared part counted each time it is reached (what a walk of it
    costs); UnsafePickle past ``budget``, past MAX_DEPTH levels, or for a container that holds itself.
    ``sizes`` (id -> parts) caches what is already counted: each container is counted once."""
    sizes = {} if sizes is None else sizes
    open_: set = set()  # containers whose parts are still being counted: met again, a cycle
    pending: List[Tuple[Any, int]] = [(value, 0)]  # (object, depth); depth < 0: its parts are counted
    while pending:
        obj, depth = pending.pop()
        key = id(obj)
        if depth >= 0:
            if key in sizes:
                continue
            if key in open_:
                raise UnsafePickle(f"{describe(obj)} holds itself")
            if depth > MAX_DEPTH:
                raise UnsafePickle(f"it nests containers more than {MAX_DEPTH} deep")
            open_.add(key)
            pending.append((obj, -1))
            pending.extend((c, depth + 1) for c in _children(obj) if _is_container(c) and id(c) not in sizes)
            continue
        total = 1
        for child in _children(obj):
            total += sizes.get(id(child), 1)
        if total > budget:
            raise UnsafePickle(f"a 'billion laughs' bomb: its parts, each shared one counted every time it is "
                               f"reached, number over {budget:,}")
        sizes[key] = total
        open_.discard(key)
    return sizes.get(id(value), 1)


def _is_container(obj: Any) -> bool:
    return isinstance(obj, (_CONTAINERS, Inert)) or (hasattr(obj, "__dict__") and not isinstance(obj, type)
                                                     and not callable(obj))


def _children(obj: Any) -> Any:
    """What a walk of ``obj`` visits next."""
    if isinstance(obj, dict):
        return [*obj.keys(), *obj.values()]
    if isinstance(obj, _CONTAINERS):
        return obj
    if isinstance(obj, Inert):
        return [obj.args, obj.fields, obj.state]
    fields = getattr(obj, "__dict__", None)
    return list(fields.values()) if isinstance(fields, dict) else ()
