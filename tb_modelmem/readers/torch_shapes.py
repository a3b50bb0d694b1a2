"""The shape of a buffer a PyTorch op allocated, from what the profiler recorded of the op (its name, "Input
Dims" and "Input type", with ``record_shapes=True``) and the bytes the allocator handed out. No torch.

A trace's ``[memory]`` events say only bytes and an address; What if needs to know which buffers carry the
batch and the sequence (``rules.buffers.carried``, one rule for every reader), which a shape says. An op's
output is one of its inputs' shapes (elementwise ops, copies, softmax and its backward), a matrix product's
(``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``, ``linear``) or an embedding lookup's (the indices' shape
and the table's width). The candidate whose size is exactly the allocation's is its shape; where none is
(a reduction, a concatenation, an op's scratch), the buffer's shape is unknown and it is said to carry no
batch, as an older trace's buffers are.
"""

from __future__ import annotations

import functools
import math
from typing import Any, List, Optional, Sequence, Tuple

from tb_modelmem.schema.dtypes import canonical, item_bytes

Shape = Tuple[int, ...]
_CUDA_ROUND = 512
_SMALL_POOL = 1 << 20  # the CUDA caching allocator's small pool: blocks up to 1 MiB
_JOINS = ("aten::cat", "aten::concat", "aten::stack")  # ops that join a tensor list
# where a windowed op's stride, padding and dilation are among its inputs (its window: the weight's, or input 1)
_CONVOLUTIONS = {"aten::convolution": (3, 4, 5), "aten::_convolution": (3, 4, 5), "aten::conv1d": (3, 4, 5),
                 "aten::conv2d": (3, 4, 5), "aten::conv3d": (3, 4, 5), "aten::mkldnn_convolution": (4, 3, 5),
                 "aten::cudnn_convolution": (3, 2, 4)}
_POOLS = {"aten::max_pool2d_with_indices": (2, 3, 4), "aten::max_pool2d": (2, 3, 4), "aten::max_pool1d": (2, 3, 4),
          "aten::max_pool3d_with_indices": (2, 3, 4)}
# factories whose buffer is their first concrete input's size, by where their dtype is: aten::empty(size, dtype,
# layout, device, pin_memory, memory_format), aten::empty_strided(size, stride, dtype, ...)
_FACTORIES = {"aten::empty": 1, "aten::zeros": 1, "aten::ones": 1, "aten::empty_strided": 2, "aten::full": 2}
# c10::ScalarType's numbers, as "Concrete Inputs" gives a dtype
_SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
                 9: "complex64", 10: "complex128", 11: "bool", 15: "bfloat16"}
# ops whose output is a matrix product of two of their inputs: (index of the left, index of the right)
_PRODUCTS = {"aten::mm": (0, 1), "aten::bmm": (0, 1), "aten::matmul": (0, 1), "aten::addmm": (1, 2),
             "aten::baddbmm": (1, 2), "aten::addbmm": (1, 2)}


def allocated_shape(name: str, dims: Any, types: Any, concrete: Any, nbytes: int,
                    cached: bool = False) -> Optional[Tuple[Shape, str]]:
    """(Shape, dtype) of an ``nbytes`` buffer op ``name`` allocated, given its recorded input ``dims``,
    ``types`` and ``concrete`` values ("Concrete Inputs": a factory's size and dtype, ``aten::empty``); None
    when no candidate has that size (or the op recorded no shapes). ``cached``: the CUDA caching allocator's
    block, which may be larger than the tensor (``_fits``); else exactly its size (torch's CPU allocator)."""
    if nbytes <= 0:
        return None
    fits = functools.partial(_fits, cached=cached)
    if name in _FACTORIES:
        return _factory(_FACTORIES[name], concrete, nbytes, fits)
    tensors = _tensors(dims, types)
    if not tensors and name not in _JOINS:
        return None
    floating = next((dtype for _, dtype in tensors if dtype.startswith(("float", "bfloat"))), "")
    candidates: List[Tuple[Shape, str]] = []
    shapes = [tuple(shape) if _is_shape(shape) else () for shape in dims]
    made = _made(name, shapes) or _windowed(name, shapes, concrete)
    if made is not None:
        candidates.append((made, floating))
        if name in _POOLS:  # and the argmax's int64 indices beside the values
            candidates.append((made, "int64"))
    if name == "aten::resize_" and isinstance(concrete, list) and len(concrete) > 1 and tensors:
        resized = _int_list(concrete[1])  # resize_(self, size): a buffer of the new size
        if resized is not None:
            candidates.append((resized, tensors[0][1]))
    candidates.extend(tensors)
    if name in _JOINS and isinstance(dims, list) and dims:  # a tensor list's dtype is not recorded
        candidates.extend((shape, "") for shape in _joined(dims[0], stacked=name == "aten::stack"))
    for shape, dtype in candidates:
        if dtype and fits(math.prod(shape) * item_bytes(dtype), nbytes):
            return shape, dtype
        if not dtype and any(fits(math.prod(shape) * size, nbytes) for size in (1, 2, 4, 8)):
            return shape, ""  # its dtype unknown, its size says its shape
    return None


def _fits(size: int, nbytes: int, cached: bool) -> bool:
    """A tensor of ``size`` bytes is an allocation of ``nbytes``: exactly (torch's CPU allocator), or in a CUDA
    caching allocator's block: the size rounded up to 512 B, and a block of the large pool (over 1 MiB) is
    handed whole, unsplit, when less than 1 MiB more would be left over."""
    if size <= 0 or size > nbytes:
        return False
    if not cached or nbytes % _CUDA_ROUND:
        return size == nbytes
    return nbytes - size < _CUDA_ROUND or (nbytes > _SMALL_POOL and nbytes - size <= _SMALL_POOL)


def tensor_shapes(dims: Any) -> List[Shape]:
    """Every tensor's shape in an op's recorded "Input Dims", a tensor list's members too (``_foreach_*``)."""
    out: List[Shape] = []
    for entry in dims if isinstance(dims, list) else ():
        if _is_shape(entry):
            out.append(tuple(entry))
        elif isinstance(entry, list) and entry and all(_is_shape(member) for member in entry):
            out.extend(tuple(member) for member in entry)
    return out


def _tensors(dims: Any, types: Any) -> List[Tuple[Shape, str]]:
    """(shape, dtype) of each tensor input with a known dtype, in order."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return []
    return [(tuple(shape), canonical(kind)) for shape, kind in zip(dims, types)
            if _is_shape(shape) and shape and isinstance(kind, str) and item_bytes(kind)]


def _factory(dtype_at: int, concrete: Any, nbytes: int, fits: Any) -> Optional[Tuple[Shape, str]]:
    """A factory's buffer (``aten::empty(size, dtype, ...)``): its size list and ScalarType, as recorded."""
    if not isinstance(concrete, list) or len(concrete) <= dtype_at:
        return None
    shape, code = _int_list(concrete[0]), concrete[dtype_at]
    dtype = _SCALAR_TYPES.get(int(code)) if isinstance(code, str) and code.isdigit() else None
    dtype = dtype or "float32"  # no dtype given: the default
    if shape is None or not fits(math.prod(shape) * item_bytes(dtype), nbytes):
        return None
    return shape, dtype


def _int_list(text: Any) -> Optional[Shape]:
    """"[8, 64, 96]" -> (8, 64, 96); None for anything else."""
    if not isinstance(text, str) or not text.startswith("[") or not text.endswith("]") or len(text) > 200:
        return None
    parts = [part.strip() for part in text[1:-1].split(",") if part.strip()]
    if not all(part.isdigit() and len(part) < 19 for part in parts):
        return None
    return tuple(int(part) for part in parts)


def _joined(members: Any, stacked: bool) -> List[Shape]:
    """The shapes a concatenation of ``members`` (a tensor list's shapes) may have: along each axis where the
    others agree; ``stacked``: along a new first axis (``torch.stack``, a DataLoader's collate)."""
    if not isinstance(members, list) or not members or not all(_is_shape(m) for m in members):
        return []
    rank = len(members[0])
    if any(len(m) != rank for m in members):
        return []
    if stacked:
        return [(len(members),) + tuple(members[0])] if all(m == members[0] for m in members) else []
    return [tuple(sum(m[axis] for m in members) if i == axis else d for i, d in enumerate(members[0]))
            for axis in range(rank) if all(m[:axis] + m[axis + 1:] == members[0][:axis] + members[0][axis + 1:]
                                           for m in members)]


def _windowed(name: str, shapes: Sequence[Shape], concrete: Any) -> Optional[Shape]:
    """The output shape of a convolution or a pooling over [batch, channels, *spatial], its window's sizes,
    stride, padding and dilation as recorded ("Concrete Inputs")."""
    where = _CONVOLUTIONS.get(name) or _POOLS.get(name)
    if where is None or not isinstance(concrete, list) or not shapes or len(shapes[0]) < 3:
        return None
    stride_at, padding_at, dilation_at = where
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
    asked = [_per_axis(_int_list(concrete[i]) if len(concrete) > i else None, spatial)
             for i in (stride_at, padding_at, dilation_at)]
    stride, padding, dilation = asked[0] or kernel, asked[1], asked[2]  # pooling's stride [] is its kernel
    if padding is None or dilation is None or 0 in stride:
        return None
    out = [(size + 2 * p - d * (k - 1) - 1) // s + 1
           for size, p, d, k, s in zip(shapes[0][2:], padding, dilation, kernel, stride)]
    return (shapes[0][0], channels) + tuple(out) if all(n > 0 for n in out) else None


def _per_axis(values: Optional[Shape], axes: int) -> Optional[Shape]:
    """A window setting for each spatial axis (one value given: the same for all); None when none is given."""
    if not values or len(values) not in (1, axes):
        return None
    return values * axes if len(values) == 1 else values


def _made(name: str, shapes: Sequence[Shape]) -> Optional[Shape]:
    """The output shape of a matrix product or an embedding lookup, from its inputs' shapes."""
    if name in _PRODUCTS:
        left, right = _PRODUCTS[name]
        if len(shapes) > right:
            return _product(shapes[left], shapes[right])
    elif name == "aten::linear" and len(shapes) >= 2 and len(shapes[1]) == 2:
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


def _is_shape(value: Any) -> bool:
    return isinstance(value, list) and all(type(d) is int and 0 <= d < 2 ** 62 for d in value)
