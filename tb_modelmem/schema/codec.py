"""Records that check themselves: the validating codec every record type builds on.

``Record`` round-trips a dataclass through ``to_dict`` / ``from_dict`` (JSON-safe), checking what it
reads against the field annotations (types, int64 range, finite numbers, non-negative sizes,
bounded strings and nesting), so a record that decodes is one every view can compute on.
``Table`` keeps rows column by column (``{field: [value per row]}``): one JSON list per field
decodes and validates an order of magnitude faster than one object per row.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import operator
import typing
from typing import (
    Any,
    Callable,
    ClassVar,
    Dict,
    Generic,
    Iterable,
    Iterator,
    List,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
    cast,
)

from tb_modelmem.schema import columns as forms
from tb_modelmem.schema.compaction import decode_column, encode_column
from tb_modelmem.schema.limits import MAX_INT, MAX_NESTING, MAX_STRING, is_number, preview

T = TypeVar("T", bound="Record")
R = TypeVar("R", bound="Record")
TableT = TypeVar("TableT", bound="Table[Any]")
V = TypeVar("V")
Check = Callable[[Any], bool]


def _per_class(compute: Callable[[type], V]) -> Callable[[type], V]:
    """``compute`` run once per class and kept (resolving annotations is slow). Typed by hand:
    mypy reads ``lru_cache``'s argument as ``Hashable``, which it does not take a class to be."""
    return cast(Callable[[type], V], functools.lru_cache(maxsize=None)(compute))


class Record:
    """Mixin: dict round-trip that tolerates unknown keys (newer writers).

    ``from_dict`` validates what it reads (types, non-negative sizes and counts, finite
    numbers) so a record that decodes is one every view can compute on.
    """

    _nested: ClassVar[Dict[str, Type["Record"]]] = {}  # field -> record type of its items (or of itself)
    _non_negative: ClassVar[Tuple[str, ...]] = ()  # int/float fields (or lists of them) that must be >= 0
    # Text columns of a Table with few distinct values (op types, dtypes, phases): decoded JSON
    # holds a new string per row, so one is kept per value (a 200,000-op trace: 149 -> 70 MiB).
    _repeated: ClassVar[Tuple[str, ...]] = ()
    # Text columns a payload stores front-coded (``columns.FRONT``); their rows are kept in that column's order.
    _front_coded: ClassVar[Tuple[str, ...]] = ()
    # Time columns a payload stores to 1/TIME_PER_UNIT µs (``columns.FIXED``, ``compaction``).
    _times: ClassVar[Tuple[str, ...]] = ()

    def to_dict(self, compact: bool = False) -> Dict[str, Any]:
        """JSON-ready dict (no deep copy: fast enough for 200,000-op traces); ``compact``: big
        columns in the forms of ``tb_modelmem.schema.columns``, as payloads store them."""
        out = {}
        for name in _field_hints(type(self)):
            value = getattr(self, name)
            if isinstance(value, Record):
                value = value.to_dict(compact)
            elif name in self._nested:
                value = [item.to_dict(compact) for item in value]
            elif isinstance(value, list):
                value = list(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls: Type[T], data: Any) -> T:
        """The record in ``data``; ValueError naming the first field that is not valid."""
        if not isinstance(data, dict):
            raise ValueError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
        checks = _field_checks(cls)
        kwargs = {k: v for k, v in data.items() if k in checks}
        for key, value in kwargs.items():
            nested = cls._nested.get(key)
            if nested is not None and typing.get_origin(_field_hints(cls)[key]) not in (list, List):
                kwargs[key] = nested_record(cls, key, nested, value)
            elif nested is not None:
                if not isinstance(value, list):
                    raise ValueError(f"{cls.__name__}.{key}: expected a list")
                kwargs[key] = [_nested_item(cls, key, i, x) for i, x in enumerate(value)]
            elif not checks[key](value):
                raise ValueError(f"{cls.__name__}.{key}: {_misfit(value)} {preview(value)}")
            elif key in cls._non_negative and any(v < 0 for v in (value if isinstance(value, list) else [value])
                                                  if v is not None):
                raise ValueError(f"{cls.__name__}.{key}: must be >= 0, got {preview(value)}")
        try:
            record = cls(**kwargs)
        except TypeError as e:
            raise ValueError(f"{cls.__name__}: {e}") from None
        record._check()
        return record

    def _check(self) -> None:
        """Constraints across a field's items (beyond its type); raise ValueError."""


class Table(Record, Generic[R]):
    """Rows of one record type stored column by column: ``{field: [value per row]}``.

    Iterating yields row records (built on demand); views that scan a column use
    ``column(name)`` and never build a row object. Rows missing a column (older
    writers) take the field's default.
    """

    row_type: ClassVar[Type[Record]]

    def __init__(self, columns: Optional[Dict[str, list]] = None) -> None:
        columns = dict(columns or {})
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"{type(self).__name__}: columns of different lengths {sorted(lengths)}")
        self._length = lengths.pop() if lengths else 0
        for name, default in _row_defaults(self.row_type).items():
            if name not in columns:
                if default is dataclasses.MISSING:
                    if self._length:
                        raise ValueError(f"{type(self).__name__}: missing column {name!r}")
                    columns[name] = []
                else:
                    columns[name] = [default() if callable(default) else default] * self._length
        self.columns = {name: columns[name] for name in _field_hints(self.row_type)}

    @classmethod
    def from_rows(cls: Type[TableT], rows: Iterable[Any]) -> TableT:
        if isinstance(rows, cls):
            return rows
        listed = list(rows)
        return cls({name: [getattr(r, name) for r in listed] for name in _field_hints(cls.row_type)})

    def column(self, name: str) -> list:
        return self.columns[name]

    def records(self) -> List[R]:
        """Every row as its record, made without a constructor call each (10,000 rows in a few ms)."""
        fields = list(self.columns)
        row_type, new = self.row_type, object.__new__
        rows: List[R] = []
        for values in zip(*self.columns.values()):
            row = new(row_type)
            row.__dict__.update(zip(fields, values))
            rows.append(cast(R, row))
        return rows

    def row(self, index: int) -> R:
        return cast(R, self.row_type(**{name: values[index] for name, values in self.columns.items()}))

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[R]:
        return iter(self.records())

    def __getitem__(self, index: int) -> R:
        return self.row(range(self._length)[index])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):  # a record made in memory with a list of rows
            return self.records() == other
        return isinstance(other, Table) and type(other) is type(self) and other.columns == self.columns

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._length} rows)"

    def to_dict(self, compact: bool = False) -> Dict[str, Any]:
        out = {}
        for name, values in self.columns.items():
            out[name] = encode_column(values, form_of(self.row_type, name) if compact else None)
        return out

    @classmethod
    def from_dict(cls: Type[TableT], data: Any) -> TableT:
        """Columns (``{field: [...]}``), or a list of row objects as older payloads stored them."""
        if isinstance(data, list):
            table = cls.from_rows(_list_item(cls.row_type, i, x) for i, x in enumerate(data))
            table._check()
            return table
        if not isinstance(data, dict):
            raise ValueError(f"{cls.__name__}: expected columns (an object of lists), got {type(data).__name__}")
        row = cls.row_type
        checks = _field_checks(row)
        # what the columns that say their length say (a run-length column must agree with it)
        rows = next((n for n in (forms.length(v) for k, v in data.items() if k in checks) if n is not None), None)
        columns = {}
        for name, stored in data.items():
            if name not in checks:
                continue
            form = form_of(row, name)
            values = decode_column(row.__name__, name, stored, form, rows=rows) if form else stored
            if not isinstance(values, list):
                raise ValueError(f"{cls.__name__}.{name}: expected a list")
            # a dictionary column is checked by its distinct values, not row by row (its rows share them)
            distinct = forms.dictionary_values(stored) if form == forms.DICTIONARY else None
            shared = distinct is not None
            checked, label = (distinct, f"{name}.values") if distinct is not None else (values, name)
            non_negative = name in row._non_negative
            if not _column_fits(checked, _field_hints(row)[name], 0 if non_negative else -MAX_INT):
                # value by value, only to name the first that fails (the whole-column check is in C)
                bad = _first_misfit(checked, checks[name])
                if bad is not None:
                    raise ValueError(f"{row.__name__}.{label}[{bad}]: {_misfit(checked[bad])} {preview(checked[bad])}")
                if non_negative and checked and _has_negative(checked):
                    index = next(i for i, v in enumerate(checked) if _negative(v))
                    raise ValueError(f"{row.__name__}.{label}[{index}]: must be >= 0, got {preview(checked[index])}")
            columns[name] = _shared(values) if name in row._repeated and not shared else values
        try:
            table = cls(columns)
        except ValueError as e:
            raise ValueError(str(e)) from None
        table._check()
        return table




def form_of(row: Type[Record], name: str) -> Optional[str]:
    """The compact form a payload stores a row type's column in (``columns``), None: plain."""
    if name in row._front_coded:
        return forms.FRONT
    if name in row._times:
        return forms.FIXED
    return forms.DICTIONARY if name in row._repeated else None


def _shared(values: list) -> list:
    """The column with one object per distinct value (they are equal, so nothing else changes)."""
    try:
        memo: Dict[Any, Any] = {}
        return list(map(memo.setdefault, values, values))
    except TypeError:  # unhashable values (lists): kept as they are
        return values


def _nested_item(cls: Type[Record], key: str, index: int, data: Any) -> "Record":
    """One item of a nested list; its error says which one ("LoadBench.results[17]: ...")."""
    try:
        return _list_item(cls._nested[key], index, data)
    except ValueError as e:
        raise ValueError(f"{cls.__name__}.{key}{e}") from None


def _list_item(item_type: Type[Record], index: int, data: Any) -> Record:
    try:
        return item_type.from_dict(data)
    except ValueError as e:
        raise ValueError(f"[{index}]: {e}") from None


def nested_record(cls: type, key: str, record_type: Type[T], data: Any) -> T:
    """A field holding one record (a Table, a Timeline); its error names the field. A record
    already decoded (``OpTrace`` decodes its ops first) is taken as it is."""
    if type(data) is record_type:
        return data
    try:
        return record_type.from_dict(data)
    except ValueError as e:
        text = str(e)
        raise ValueError(f"{cls.__name__}.{key}{'' if text.startswith('[') else ': '}{text}") from None


@_per_class
def _field_hints(cls: type) -> Dict[str, Any]:
    """Each dataclass field's resolved annotation (resolving is slow: once per class)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


@_per_class
def _row_defaults(cls: type) -> Dict[str, Any]:
    """Each field's default value or factory (MISSING when required)."""
    return {f.name: f.default_factory if f.default_factory is not dataclasses.MISSING else f.default
            for f in dataclasses.fields(cls)}


@_per_class
def _field_checks(cls: type) -> Dict[str, Check]:
    """One compiled type check per field (built once per class: per-value typing calls are slow)."""
    return {name: _compile_check(hint) for name, hint in _field_hints(cls).items()}


def _compile_check(hint: Any) -> Check:
    """A predicate for decoded JSON against a type annotation; numbers finite, free-form values
    (``Any``, dicts) at most MAX_NESTING deep."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union:
        parts = [_compile_check(a) for a in args]
        return lambda v: any(p(v) for p in parts)
    if hint is type(None):
        return lambda v: v is None
    if origin in (list, List):
        if not args:
            return lambda v: isinstance(v, list)
        item = _compile_check(args[0])
        return lambda v: isinstance(v, list) and all(map(item, v))
    if origin in (dict, Dict):
        return lambda v: isinstance(v, dict) and _free_form(v)
    if hint is float:
        return is_number
    if hint is int:
        return lambda v: type(v) is int and -MAX_INT <= v < MAX_INT  # bool is not an int here
    if hint is bool:
        return lambda v: type(v) is bool
    if hint is str:
        return lambda v: type(v) is str and len(v) <= MAX_STRING
    if hint is Any:
        return _free_form
    if isinstance(hint, type) and issubclass(hint, Record):
        return lambda v: isinstance(v, dict)
    return lambda v: isinstance(v, hint)


def _first_misfit(values: list, check: Check) -> Optional[int]:
    """Index of the first value of a column that fails its field's check, else None."""
    for i, value in enumerate(values):
        if not check(value):
            return i
    return None


def _column_fits(values: list, hint: Any, low: int = -MAX_INT) -> bool:
    """True when every value surely fits ``hint`` and numbers are >= ``low`` (False: look value
    by value). Sets of types, min and max: the whole column in C, one pass each."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    kinds = set(map(type, values))
    if origin is Union and type(None) in args and len(args) == 2:
        if type(None) in kinds:
            values = list(itertools.compress(values, map(operator.is_not, values, itertools.repeat(None))))
        hint = args[0] if args[1] is type(None) else args[1]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        kinds.discard(type(None))
    if origin in (list, List) and args and args[0] in (str, int):
        return kinds <= {list} and _column_fits(list(itertools.chain.from_iterable(values)), args[0], low)
    if hint is str:
        return kinds <= {str} and max(map(len, values), default=0) <= MAX_STRING
    if hint is int:
        return kinds <= {int} and low <= min(values, default=0) and max(values, default=0) < MAX_INT
    if hint is float:
        try:  # a NaN or an infinity makes the sum one; so may finite values past 1e308 (then value by value)
            return kinds <= {int, float} and math.isfinite(sum(values)) and min(values, default=0) >= low
        except OverflowError:  # an integer past a float's range
            return False
    return False


def _negative(value: Any) -> bool:
    return isinstance(value, (int, float)) and value < 0


def _has_negative(values: list) -> bool:
    try:
        return min(values) < 0
    except TypeError:  # a column of lists or mixed values: check one by one
        return any(map(_negative, values))



def _misfit(value: Any) -> str:
    """Why a value that does not fit its field was refused, in a few words."""
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number"
    if isinstance(value, list):
        for i, item in enumerate(value[:100_000]):
            if isinstance(item, float) and not math.isfinite(item):
                return f"item {i} is not a finite number"
    if isinstance(value, int) and not isinstance(value, bool) and not -MAX_INT <= value < MAX_INT:
        return "an integer out of the int64 range"
    if isinstance(value, str) and len(value) > MAX_STRING:
        return f"a string of {len(value):,} characters (at most {MAX_STRING:,})"
    if _nesting(value) > MAX_NESTING:
        return f"nested deeper than {MAX_NESTING} levels"
    if not _free_form(value):
        return "holds a string too long or an integer out of range"
    return "unexpected value"


def _free_form(value: Any) -> bool:
    """Free-form JSON (an optimizer config) a view can serialise again: at most MAX_NESTING
    deep, strings at most MAX_STRING long, integers within int64."""
    if _nesting(value) > MAX_NESTING:
        return False
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, str):
            if len(item) > MAX_STRING:
                return False
        elif isinstance(item, int) and not isinstance(item, bool) and not -MAX_INT <= item < MAX_INT:
            return False
    return True



def _nesting(value: Any) -> int:
    """How deep lists and dicts nest in ``value`` (0 for a scalar); stops counting past MAX_NESTING."""
    depth, level = 0, [value]
    while depth <= MAX_NESTING:
        containers = [item for item in level if isinstance(item, (list, dict))]
        if not containers:
            break
        depth += 1
        level = [v for c in containers for v in (c.values() if isinstance(c, dict) else c)]
    return depth

