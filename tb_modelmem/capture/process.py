"""One sample of process-wide memory: what is alive, not only how much memory there is.

``sample(census=False)`` reads the process's RSS and high-water mark and each accelerator's
allocator: microseconds. ``sample()`` adds a census from one pass over the objects the
garbage collector tracks: live tf.Variables (count, bytes, owning model/layer), live graph
Operations by the function (FuncGraph) or graph that holds them, live Keras models and the
most numerous Python types. That is what answers "why do I need clear_session()": a loop of
model builds leaks variables while the models stay referenced, and traced train functions'
graphs even after ``del model; clear_session()``. Reads shapes and dtypes, never values.
"""

from __future__ import annotations

import collections
import gc
import math
import resource
import sys
import time
from typing import Any, Dict, Iterable, List, Optional

from tb_modelmem.readers import oom
from tb_modelmem.readers.dtypes import name_size
from tb_modelmem.schema.names import OTHER_LINE
from tb_modelmem.schema.records import Count, DeviceMemory, MemorySample, OomReport

TOP = 40  # lines kept per census list (the rest is summed into one OTHER_LINE)


def sample(census: bool = True, label: str = "") -> MemorySample:
    """The process's memory now; with ``census``, what is alive in it."""
    started = time.perf_counter()
    found = MemorySample(rss_bytes=_rss(), peak_rss_bytes=_peak_rss(), devices=_devices(), label=label)
    if census:
        _take_census(found)
    found.census_seconds = time.perf_counter() - started
    return found


def oom_report(error: BaseException, where: str = "", batch_size: Optional[int] = None) -> OomReport:
    """What an out-of-memory ``error`` says and what the process and devices held when it was raised."""
    text = str(error)
    return OomReport(error_type=type(error).__name__, message=oom.key_lines(text), **oom.parse(text),
                     batch_size=batch_size, rss_bytes=_rss(), devices=_devices(), bytes_limit=_jax_limit(),
                     where=where)


def _jax_limit() -> Optional[int]:
    """The first accelerator's capacity, where JAX is in use and says it (TF has no such figure)."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    try:
        device = jax.devices()[0]
        stats = device.memory_stats() if device.platform != "cpu" else None
        return int(stats["bytes_limit"]) if stats and "bytes_limit" in stats else None
    except Exception:
        return None


def _rss() -> Optional[int]:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:  # psutil missing or the platform refuses: unknown, not 0
        return None


def _peak_rss() -> Optional[int]:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024) if peak else None


def _devices() -> List[DeviceMemory]:
    """Each GPU/TPU's bytes in use and peak (TensorFlow's, and torch's CUDA devices once torch has used
    them; neither reports the CPU)."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return _torch_devices()
    out = []
    try:
        devices = [d.name for d in tf.config.list_logical_devices() if d.device_type in ("GPU", "TPU")]
    except Exception:
        return []
    for name in devices:
        try:
            info = tf.config.experimental.get_memory_info(name)
        except Exception:  # a device whose allocator keeps no statistics
            continue
        out.append(DeviceMemory(name=name, current_bytes=int(info.get("current", 0)),
                                peak_bytes=int(info.get("peak", 0))))
    return out


def _torch_devices() -> List[DeviceMemory]:
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():  # never the call that starts CUDA
            return []
        return [DeviceMemory(name=f"cuda:{i}", current_bytes=int(torch.cuda.memory_allocated(i)),
                             peak_bytes=int(torch.cuda.max_memory_allocated(i)))
                for i in range(torch.cuda.device_count())]
    except Exception:
        return []


def _take_census(found: MemorySample) -> None:
    objects = gc.get_objects()
    by_type = collections.Counter(map(type, objects))
    found.python_objects = len(objects)
    kinds = _kinds(by_type)
    wanted = {t for ts in kinds.values() for t in ts}
    instances: Dict[str, List[Any]] = {k: [] for k in kinds}
    kind_of = {t: k for k, ts in kinds.items() for t in ts}
    for obj in objects:
        t = type(obj)
        if t in wanted:
            instances[kind_of[t]].append(obj)
    del objects
    if instances["tensor"] and not instances["keras_variable"] and "tensorflow" not in sys.modules:
        _torch_census(found, instances)
        found.objects_by_type = _top((Count(name=_type_name(t), count=c) for t, c in by_type.items()), by="count")
        return
    if instances["variable"] or "tensorflow" in sys.modules:
        variables, paths = instances["variable"], {id(_storage(v)): getattr(v, "path", "") for v in
                                                   instances["keras_variable"]}
    else:  # Keras on torch or JAX: its variables are the ones to count (their storage is no TF variable)
        variables, paths = instances["keras_variable"], {id(v): getattr(v, "path", "") for v in
                                                         instances["keras_variable"]}
    owners: Dict[str, List[int]] = collections.defaultdict(lambda: [0, 0])
    total_bytes = 0
    for var in variables:
        size = _bytes(var)
        total_bytes += size
        owner = _owner(paths.get(id(var)) or _name(var))
        owners[owner][0] += 1
        owners[owner][1] += size
    found.live_variables, found.live_variable_bytes = len(variables), total_bytes
    found.variables_by_owner = _top(Count(name=k, count=c, bytes=b) for k, (c, b) in owners.items())
    if "tensorflow" in sys.modules:  # graphs are TensorFlow's; elsewhere their count is unknown, not 0
        graphs: Dict[str, int] = collections.Counter(_graph_name(op) for op in instances["operation"])
        found.graph_ops = len(instances["operation"])
        found.graph_ops_by_function = _top(Count(name=k, count=c) for k, c in graphs.items())
    models = _outermost(instances["model"])
    found.live_models = len(models)
    found.models = _top(Count(name=m.name, count=len(m.variables), bytes=sum(map(_bytes, m.variables)))
                        for m in models)
    found.objects_by_type = _top((Count(name=_type_name(t), count=c) for t, c in by_type.items()), by="count")


def _kinds(by_type: "collections.Counter[type]") -> Dict[str, List[type]]:
    """The types to collect, among the types alive (a few thousand issubclass checks, not millions)."""
    kinds: Dict[str, List[type]] = {"variable": [], "keras_variable": [], "operation": [], "model": [], "tensor": [],
                                    "torch_module": [], "torch_optimizer": []}
    tf, keras, torch = sys.modules.get("tensorflow"), sys.modules.get("keras"), sys.modules.get("torch")
    bases = [("variable", tf.Variable), ("operation", tf.Operation)] if tf is not None else []
    if keras is not None:
        bases += [("keras_variable", keras.Variable), ("model", keras.Model)]
    if torch is not None:
        bases += [("tensor", torch.Tensor), ("torch_module", torch.nn.Module),
                  ("torch_optimizer", torch.optim.Optimizer)]
    for t in by_type:
        for kind, base in bases:
            try:
                if issubclass(t, base):
                    kinds[kind].append(t)
            except TypeError:
                pass
    return kinds


def _torch_census(found: MemorySample, instances: Dict[str, List[Any]]) -> None:
    """A PyTorch process's live tensors by role (parameters, their gradients, optimizer state, any other
    tensor: activations kept, batches, caches), each storage counted once, and its outermost modules."""
    import torch

    params = [t for t in instances["tensor"] if isinstance(t, torch.nn.Parameter)]
    grads = {id(p.grad): p.grad for p in params if p.grad is not None}
    state = {id(v): v for opt in instances["torch_optimizer"] for per in getattr(opt, "state", {}).values()
             for v in (per.values() if isinstance(per, dict) else ()) if isinstance(v, torch.Tensor)}
    claimed = {id(p) for p in params} | set(grads) | set(state)
    others = [t for t in instances["tensor"] if id(t) not in claimed]
    seen: set = set()

    def line(name: str, tensors: Iterable[Any]) -> Count:
        count, size = 0, 0
        for t in tensors:
            count += 1
            try:
                storage = t.untyped_storage()
                key = (str(t.device), storage.data_ptr())
                if key not in seen:  # views of one storage count its bytes once
                    seen.add(key)
                    size += int(storage.nbytes())
            except Exception:  # a tensor without storage (meta, a subclass): no bytes claimed
                continue
        return Count(name=name, count=count, bytes=size)

    roles = [line("weights (nn.Parameter)", params), line("gradients (.grad)", grads.values()),
             line("optimizer state", state.values()), line("other tensors (activations kept, batches, caches)",
                                                           others)]
    found.live_variables, found.live_variable_bytes = roles[0].count, roles[0].bytes
    found.variables_by_owner = roles
    from tb_modelmem.capture.torch_modules import is_joined

    modules = [m for m in instances["torch_module"] if not is_joined(m)]  # a GAN's models, not the capture's join
    inner = {id(m) for module in modules for m in module.modules() if m is not module}
    # a model holds tensors: not the activation modules a library keeps at import (transformers' GELUActivation,
    # 9 of the 10 outermost modules beside one GPT-2)
    outer = [m for m in modules if id(m) not in inner and _holds_tensors(m)]
    found.live_models = len(outer)
    found.models = _top(Count(name=type(m).__name__, count=sum(1 for _ in m.parameters()),
                              bytes=sum(p.numel() * p.element_size() for p in m.parameters())) for m in outer)


def _holds_tensors(module: Any) -> bool:
    try:
        return any(True for _ in module.parameters()) or any(True for _ in module.buffers())
    except Exception:  # a module mid-construction: count it
        return True


def _outermost(models: List[Any]) -> List[Any]:
    """Models that are not part of another live model (a Sequential keeps an inner Functional)."""
    inner = set()
    for model in models:
        for attr in ("_functional",):
            part = getattr(model, attr, None)
            if part is not None:
                inner.add(id(part))
        try:
            inner.update(id(layer) for layer in model._flatten_layers(include_self=False, recursive=True))
        except Exception:  # a model mid-construction: count it
            continue
    return [m for m in models if id(m) not in inner]


def _storage(var: Any) -> Any:
    """The tf.Variable behind a Keras 3 variable (never its truth value: that would read it)."""
    storage = getattr(var, "_value", None)
    return var if storage is None else storage


def _bytes(var: Any) -> int:
    """A variable's bytes from its shape and dtype (a TF, Keras, torch or JAX one), reading no value."""
    try:
        dims = tuple(var.shape)
        if any(d is None for d in dims):
            return 0
        return math.prod(int(d) for d in dims) * name_size(_dtype_name(var))
    except Exception:  # a variable mid-construction or a foreign subclass: no size claimed
        return 0


def _dtype_name(var: Any) -> str:
    dtype = getattr(var, "dtype", "")
    base = getattr(dtype, "base_dtype", dtype)  # a TF reference dtype
    return base if isinstance(base, str) else str(getattr(base, "name", None) or base)


def _name(var: Any) -> str:
    try:
        return str(var.name).rpartition(":")[0] or str(var.name)
    except Exception:
        return "(unnamed)"


def _owner(path: str) -> str:
    """The model/layer path that owns a variable: its path without the variable's own name."""
    return path.rpartition("/")[0] or path or "(unnamed)"


def _graph_name(op: Any) -> str:
    graph = getattr(op, "graph", None)
    name = getattr(graph, "name", None)
    return str(name) if name else "(default graph)"


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _top(counts: Iterable[Count], by: str = "bytes", n: int = TOP) -> List[Count]:
    """The ``n`` largest lines, the rest summed into one OTHER_LINE."""
    ranked = sorted(counts, key=lambda c: (-(getattr(c, by) or 0), -c.count, c.name))
    head, tail = ranked[:n], ranked[n:]
    if tail:
        known = [c.bytes for c in tail if c.bytes is not None]
        head.append(Count(name=OTHER_LINE, count=sum(c.count for c in tail),
                          bytes=sum(known) if len(known) == len(tail) else None))
    return head
