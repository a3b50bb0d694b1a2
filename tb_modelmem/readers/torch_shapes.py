"""The shape of a buffer a PyTorch op allocated, from what the profiler recorded of the op (its name, "Input
Dims", "Input type" and "Concrete Inputs", with ``record_shapes=True``) and the bytes the allocator handed out.
No torch.

A trace's ``[memory]`` events say only bytes and an address; What if needs to know which buffers carry the batch
and the sequence (``rules.buffers.carried``, one rule for every reader), which a shape says. An op's output is one
of its inputs' shapes (elementwise ops, copies, softmax and its backward), a matrix product's (``mm``, ``addmm``,
``bmm``, ``baddbmm``, ``matmul``, ``linear``), a convolution's or a pooling's (from its stride, padding, dilation
and ``ceil_mode``), an embedding lookup's, a join's (``cat`` along its recorded dimension, an empty 1-D member
skipped as torch skips it; ``stack``), a normalization's per-row statistics (layer norm's mean and rstd, one per
token), a factory's (``aten::empty``'s size) or a resize's. Of the candidates that fit the allocation, the closest
is its shape (``_fits``: exactly on the CPU; in a CUDA caching allocator's block); where none fits (a reduction, an
op's scratch), the shape is unknown (``None``).

Every value comes from the file: a shape of more than ``MAX_RANK`` dimensions, a tensor list of more than
``MAX_TENSORS`` members, a number that is no plain ASCII integer, is no shape, so no crafted trace makes this
slow or raise.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from tb_modelmem.schema.dtypes import canonical, item_bytes

Shape = Tuple[int, ...]
MAX_RANK = 64  # dimensions of a real tensor (torch allows 64)
MAX_BYTES = 1 << 50  # one allocation, or a device's total in use (1 PiB): past it, a field no real trace has
MAX_TENSORS = 4096  # members of a tensor list this reads (a real optimizer's foreach list: one per parameter)
_MAX_DIM = 2 ** 62
_CUDA_ROUND = 512
_SMALL_POOL = 1 << 20  # the CUDA caching allocator's small pool: blocks up to 1 MiB
_JOINS = ("aten::cat", "aten::concat", "aten::stack")  # ops that join a tensor list
# where a windowed op's stride, padding and dilation are among its inputs (its window: the weight's, or input 1)
_CONVOLUTIONS = {"aten::convolution": (3, 4, 5), "aten::_convolution": (3, 4, 5), "aten::conv1d": (3, 4, 5),
                 "aten::conv2d": (3, 4, 5), "aten::conv3d": (3, 4, 5), "aten::mkldnn_convolution": (4, 3, 5),
                 "aten::cudnn_convolution": (3, 2, 4)}
_TRANSPOSED_AT = {"aten::convolution": 6, "aten::_convolution": 6}  # their ``transposed`` flag: another formula
_POOLS = {"aten::max_pool2d_with_indices": (2, 3, 4), "aten::max_pool2d": (2, 3, 4), "aten::max_pool1d": (2, 3, 4),
          "aten::max_pool3d_with_indices": (2, 3, 4)}
_CEIL_MODE_AT = 5  # a max pooling's ``ceil_mode``
# factories whose buffer is their first concrete input's size, by where their dtype is: aten::empty(size, dtype,
# layout, device, pin_memory, memory_format), aten::empty_strided(size, stride, dtype, ...)
_FACTORIES = {"aten::empty": 1, "aten::zeros": 1, "aten::ones": 1, "aten::empty_strided": 2, "aten::full": 2}
# c10::ScalarType's numbers, as "Concrete Inputs" gives a dtype
_SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
                 9: "complex64", 10: "complex128", 11: "bool", 15: "bfloat16"}
# ops whose output is a matrix product of two of their inputs: (index of the left, index of the right)
_PRODUCTS = {"aten::mm": (0, 1), "aten::bmm": (0, 1), "aten::matmul": (0, 1), "aten::addmm": (1, 2),
             "aten::baddbmm": (1, 2)}
_WIDTHS = (1, 2, 4, 8)  # bytes of an element whose dtype a tensor list does not record
# normalizations whose statistics (mean, rstd) are one per row of the input: (input's index, normalized_shape's)
_ROW_STATISTICS = {"aten::native_layer_norm": (0, 1), "aten::layer_norm": (0, 1), "aten::rms_norm": (0, 1),
                   "aten::_fused_rms_norm": (0, 1)}


def allocated_shape(name: str, dims: Any, types: Any, concrete: Any, nbytes: int,
                    cached: bool = False) -> Optional[Tuple[Shape, str]]:
    """(Shape, dtype) of an ``nbytes`` buffer op ``name`` allocated, given its recorded input ``dims``,
    ``types`` and ``concrete`` values; None when no candidate fits (or the op recorded no shapes). ``cached``:
    a CUDA caching allocator's block, which may be larger than the tensor (``_fits``); else exactly its size
    (torch's CPU allocator). Of several that fit, the closest (on the CPU: the first that is exact)."""
    if not isinstance(nbytes, int) or nbytes <= 0:
        return None
    if name in _FACTORIES:
        return _factory(_FACTORIES[name], concrete, nbytes, cached)
    recorded = (dims if isinstance(dims, list) else [])[:MAX_TENSORS]  # a crafted list of millions: the first
    shapes = [tuple(entry) if is_shape(entry) else () for entry in recorded]
    kinds = [canonical(kind) if isinstance(kind, str) and len(kind) < 64 else "" for kind in
             (types if isinstance(types, list) else [])[:MAX_TENSORS]]
    tensors = [(shape, kind) for shape, kind in zip(shapes, kinds) if shape and item_bytes(kind)]
    floating = next((kind for _, kind in tensors if kind.startswith(("float", "bfloat"))), "")
    candidates: List[Tuple[Shape, str]] = []
    made = _made(name, shapes) or _windowed(name, shapes, concrete) or _statistics(name, shapes, concrete)
    if made is not None:
        candidates.append((made, floating))
        if name in _POOLS:  # and the argmax's int64 indices beside the values
            candidates.append((made, "int64"))
    if name == "aten::resize_" and tensors and isinstance(concrete, list) and len(concrete) > 1:
        resized = _int_list(concrete[1])  # resize_(self, size): a buffer of the new size
        if resized is not None:
            candidates.append((resized, tensors[0][1]))
    candidates.extend(tensors)
    if name in _JOINS and isinstance(dims, list) and dims:  # a tensor list's dtype is not recorded
        axis = _int(concrete[1]) if isinstance(concrete, list) and len(concrete) > 1 else 0
        candidates.extend((shape, "") for shape in _joined(dims[0], axis or 0, stacked=name == "aten::stack"))
    best: Optional[Tuple[int, Shape, str]] = None
    for shape, kind in candidates:
        count = _count(shape, nbytes)
        if count is None:
            continue
        for width in ((item_bytes(kind),) if kind else _WIDTHS):
            over = _fits(count * width, nbytes, cached)
            if over is not None and (best is None or over < best[0]):
                best = (over, shape, kind)
        if best is not None and best[0] == 0:
            break  # exact: nothing fits closer
    return (best[1], best[2]) if best is not None else None


def inputs_by_bytes(dims: Any, types: Any) -> Dict[int, Tuple[Shape, str]]:
    """An op's recorded input tensors by their exact bytes (the first of each size): (shape, dtype)."""
    out: Dict[int, Tuple[Shape, str]] = {}
    for entry, kind in zip((dims if isinstance(dims, list) else [])[:MAX_TENSORS],
                           (types if isinstance(types, list) else [])[:MAX_TENSORS]):
        dtype = canonical(kind) if isinstance(kind, str) and len(kind) < 64 else ""
        if is_shape(entry) and item_bytes(dtype):
            count = _count(tuple(entry), MAX_BYTES)
            if count:
                out.setdefault(count * item_bytes(dtype), (tuple(entry), dtype))
    return out


def is_shape(value: Any) -> bool:
    """A recorded tensor shape: a list of at most ``MAX_RANK`` plain non-negative integers."""
    return (isinstance(value, list) and len(value) <= MAX_RANK
            and all(type(d) is int and 0 <= d < _MAX_DIM for d in value))


def tensor_shapes(dims: Any) -> List[Shape]:
    """Every tensor's shape in an op's recorded "Input Dims", a tensor list's members too (``_foreach_*``),
    the first ``MAX_TENSORS``."""
    out: List[Shape] = []
    for entry in dims if isinstance(dims, list) else ():
        if is_shape(entry):
            out.append(tuple(entry))
        elif isinstance(entry, list) and entry and not is_shape(entry):
            out.extend(tuple(member) for member in entry[:MAX_TENSORS] if is_shape(member))
        if len(out) >= MAX_TENSORS:
            return out[:MAX_TENSORS]
    return out


def _fits(size: int, nbytes: int, cached: bool) -> Optional[int]:
    """How many bytes over a tensor of ``size`` bytes an allocation of ``nbytes`` is, where it can be that
    tensor's (None where not): exactly (torch's CPU allocator); or in a CUDA caching allocator's block: the size
    rounded up to 512 B, and a block of the large pool (over 1 MiB) handed whole, unsplit, where no more than
    1 MiB would be left over."""
    if size <= 0 or size > nbytes:
        return None
    if not cached or nbytes % _CUDA_ROUND:
        return 0 if size == nbytes else None
    over = nbytes - size
    return over if over < _CUDA_ROUND or (nbytes > _SMALL_POOL and over <= _SMALL_POOL) else None


def _count(shape: Shape, nbytes: int) -> Optional[int]:
    """Elements of ``shape``, None once past ``nbytes`` (no product of a crafted shape grows without end)."""
    count = 1
    for d in shape:
        count *= d
        if count > nbytes:
            return None
    return count


def _factory(dtype_at: int, concrete: Any, nbytes: int, cached: bool) -> Optional[Tuple[Shape, str]]:
    """A factory's buffer (``aten::empty(size, dtype, ...)``): its size list and ScalarType, as recorded (no
    dtype given: the default, float32)."""
    if not isinstance(concrete, list) or len(concrete) <= dtype_at:
        return None
    shape, code = _int_list(concrete[0]), _int(concrete[dtype_at])
    dtype = _SCALAR_TYPES.get(code, "") if code is not None else "float32"  # a code not in the table: none
    if shape is None or not dtype:
        return None
    count = _count(shape, nbytes)
    if count is None or _fits(count * item_bytes(dtype), nbytes, cached) is None:
        return None
    return shape, dtype


def _int(text: Any) -> Optional[int]:
    """A plain ASCII integer of at most 18 digits ("-1", "6"), None for anything else ("²", "1e3", "")."""
    if not isinstance(text, str):
        return None
    digits = text[1:] if text.startswith("-") else text
    if not (0 < len(digits) <= 18 and digits.isascii() and digits.isdigit()):
        return None
    return int(text)


def _int_list(text: Any) -> Optional[Shape]:
    """"[8, 64, 96]" -> (8, 64, 96); None for anything else (a negative, a non-ASCII digit, over MAX_RANK)."""
    if not isinstance(text, str) or not text.startswith("[") or not text.endswith("]") or len(text) > 20 * MAX_RANK:
        return None
    parts = [_int(part.strip()) for part in text[1:-1].split(",") if part.strip()]
    if len(parts) > MAX_RANK or any(part is None or part < 0 for part in parts):
        return None
    return tuple(parts)  # type: ignore[arg-type]


def _joined(members: Any, axis: int, stacked: bool) -> List[Shape]:
    """The shape of ``members`` (a tensor list's shapes) joined along ``axis`` (negative: from the end), where
    the others agree; ``stacked``: along a new axis there (``torch.stack``, a DataLoader's collate)."""
    if not isinstance(members, list) or not members or len(members) > MAX_TENSORS:
        return []
    if not all(is_shape(m) for m in members):
        return []
    if not stacked:  # torch.cat skips a 1-D empty member (a cache's first, empty past: [[0], [8, 4, 32, 16]])
        members = [m for m in members if list(m) != [0]] or members
    first = members[0]
    rank = len(first) + (1 if stacked else 0)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        return []
    if stacked:
        return [tuple(first[:axis]) + (len(members),) + tuple(first[axis:])] if all(m == first for m in members) else []
    if any(len(m) != len(first) or m[:axis] != first[:axis] or m[axis + 1:] != first[axis + 1:] for m in members):
        return []
    return [tuple(first[:axis]) + (sum(m[axis] for m in members),) + tuple(first[axis + 1:])]


def _windowed(name: str, shapes: Sequence[Shape], concrete: Any) -> Optional[Shape]:
    """The output shape of a convolution or a pooling over [batch, channels, *spatial], its window's sizes,
    stride, padding, dilation and ``ceil_mode`` as recorded ("Concrete Inputs"); None for a transposed
    convolution (another formula) or settings that do not fit."""
    where = _CONVOLUTIONS.get(name) or _POOLS.get(name)
    if where is None or not isinstance(concrete, list) or not shapes or len(shapes[0]) < 3:
        return None
    transposed_at = _TRANSPOSED_AT.get(name)
    if transposed_at is not None and len(concrete) > transposed_at and concrete[transposed_at] == "True":
        return None
    spatial = len(shapes[0]) - 2
    if name in _CONVOLUTIONS:
        if len(shapes) < 2 or len(shapes[1]) != len(shapes[0]):
            return None
        channels, window = shapes[1][0], shapes[1][2:]
    else:
        channels, window = shapes[0][1], (_int_list(concrete[1]) if len(concrete) > 1 else None) or ()
    kernel = _per_axis(window, spatial)
    if kernel is None:
        return None
    asked = [_per_axis(_int_list(concrete[i]) if len(concrete) > i else None, spatial) for i in where]
    stride, padding, dilation = asked[0] or kernel, asked[1], asked[2]  # pooling's stride [] is its kernel
    if padding is None or dilation is None or 0 in stride:
        return None
    ceil = name in _POOLS and len(concrete) > _CEIL_MODE_AT and concrete[_CEIL_MODE_AT] == "True"
    out = []
    for size, p, d, k, s in zip(shapes[0][2:], padding, dilation, kernel, stride):
        span = size + 2 * p - d * (k - 1) - 1
        steps = -(-span // s) if ceil else span // s
        if ceil and steps * s >= size + p:  # PyTorch: the last window must start inside the input or its left pad
            steps -= 1
        out.append(steps + 1)
    return (shapes[0][0], channels) + tuple(out) if all(n > 0 for n in out) else None


def is_product(name: str) -> bool:
    """A matrix product (``mm``, ``addmm``, ``bmm``, ...), whose output's rows are its left operand's."""
    return name in _PRODUCTS


def is_row_statistics(name: str) -> bool:
    """A normalization whose statistics are one per row of its input (layer norm, RMS norm)."""
    return name in _ROW_STATISTICS


def _statistics(name: str, shapes: Sequence[Shape], concrete: Any) -> Optional[Shape]:
    """The shape of a normalization's per-row statistics (layer norm's and RMS norm's mean and rstd): the input's
    with each normalized dimension 1 ([8, 32, 64] over [64]: [8, 32, 1], a value per token); None for other ops.
    Its main output is the input's shape, which the inputs give."""
    where = _ROW_STATISTICS.get(name)
    if where is None or len(shapes) <= where[0] or not isinstance(concrete, list) or len(concrete) <= where[1]:
        return None
    normalized = _int_list(concrete[where[1]])
    source = shapes[where[0]]
    if not normalized or len(normalized) >= len(source) or tuple(source[-len(normalized):]) != normalized:
        return None
    return tuple(source[:-len(normalized)]) + (1,) * len(normalized)


def _per_axis(values: Optional[Shape], axes: int) -> Optional[Shape]:
    """A window setting for each spatial axis (one value given: the same for all); None when none is given."""
    if not values or len(values) not in (1, axes):
        return None
    return values * axes if len(values) == 1 else values


def _made(name: str, shapes: Sequence[Shape]) -> Optional[Shape]:
    """The output shape of a matrix product, a linear layer, an embedding lookup or a row selection, from its
    inputs' shapes."""
    if name in _PRODUCTS:
        left, right = _PRODUCTS[name]
        if len(shapes) > right:
            return _product(shapes[left], shapes[right])
    elif name == "aten::linear" and len(shapes) >= 2 and len(shapes[1]) == 2 and shapes[0]:
        return shapes[0][:-1] + (shapes[1][0],)
    elif name == "aten::embedding" and len(shapes) >= 2 and len(shapes[0]) == 2:
        return shapes[1] + (shapes[0][1],)
    elif name == "aten::index_select" and len(shapes) >= 3 and len(shapes[0]) == 2 and len(shapes[2]) == 1:
        return shapes[2] + shapes[0][1:]  # rows of a table (an embedding's lookup, flattened)
    return None


def _product(a: Shape, b: Shape) -> Optional[Shape]:
    """The shape of ``a @ b`` (numpy's rule: the leading dimensions broadcast), None where they do not fit."""
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return None
    lead_a, lead_b = a[:-2], b[:-2]
    width = max(len(lead_a), len(lead_b))
    lead_a, lead_b = (1,) * (width - len(lead_a)) + lead_a, (1,) * (width - len(lead_b)) + lead_b
    if any(x != y and 1 not in (x, y) for x, y in zip(lead_a, lead_b)):
        return None
    return tuple(max(x, y) for x, y in zip(lead_a, lead_b)) + (a[-2], b[-1])
