"""Run one corpus script as a user would, with tb_modelmem attached or not, and write ground truth.

    python -m tests.corpus.harness NAME --logdir DIR --out RESULT.json [--mode modelmem|plain] [--jit-compile]
                                   [--mixed-precision]

Meant to run in a fresh process (``tests.corpus.run`` does that): TF1's
``disable_eager_execution`` and Keras' name counters are process state. The script runs
with ``runpy.run_path`` in ``<RESULT>_artifacts/cwd`` (scripts save files there).

modelmem mode attaches tb_modelmem the way the README tells users to:
  fit scripts     the first ``keras.Model.fit`` call gets
                  ``tb_modelmem.MemoryCallback(logdir, profile_steps=(2, 2))``;
  custom loops    after the script, under ``tf.summary.create_file_writer(logdir/train)``: one more
                  call of its train step inside ``tb_modelmem.trace("ops", ...)`` and
                  ``tb_modelmem.summary.variables(...)`` for each (model, optimizer) pair (and
                  the ``tf.train.Checkpoint`` when the script has one);
  TF1             every ``FileWriter.add_run_metadata`` call also writes
                  ``tb_modelmem.summary.run_metadata("ops", ...)`` and
                  ``tb_modelmem.summary.variables("storage")`` to that writer's directory; what
                  they raise is recorded, not fatal.
``--jit-compile``: every ``keras.Model.compile`` call gets ``jit_compile=True`` (what a user sets for
XLA; Keras 3 does it on its own on a GPU), so each train step is one XLA program.
``--mixed-precision``: ``keras.mixed_precision.set_global_policy("mixed_float16")`` before the script,
the one line Keras' mixed precision guide adds (``compile`` then wraps the optimizer in a
``LossScaleOptimizer``).
plain mode imports no tb_modelmem code: fit scripts get ``keras.callbacks.TensorBoard(logdir,
profile_batch=2)``, the others write what they always wrote.

Ground truth comes from the live objects (Keras and TensorFlow APIs, numpy), never from
tb_modelmem. Slots are recorded as Keras creates them (``Optimizer.add_variable_from_reference``,
the call every built-in Keras optimizer makes for a per-weight slot) and, for TF1, from
``Optimizer.get_slot``. README.md beside this file describes RESULT.json.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import runpy
import sys
import time
import traceback
import warnings
from typing import Any, Dict, List, Optional, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("MPLBACKEND", "Agg")

from tests.corpus import RUN, SCRIPTS, script_path

RESULT_VERSION = 1
FIT_PROFILE_STEPS = (2, 2)
PLAIN_PROFILE_BATCH = 2


# --- what each custom-loop script is to a user: its models, optimizers, train step and a batch ---

def _quickstart_batch(g: Dict[str, Any]) -> Tuple[Any, ...]:
    images, labels = next(iter(g["train_ds"]))
    return images, labels


def _dcgan_tutorial_batch(g: Dict[str, Any]) -> Tuple[Any, ...]:
    return (next(iter(g["train_dataset"])),)


CUSTOM_LOOPS: Dict[str, Dict[str, Any]] = {
    "quickstart_advanced": {
        "pairs": [("storage", "model", "optimizer")],
        "train_step": "train_step",
        "batch": _quickstart_batch,
    },
    "dcgan_tutorial": {
        "pairs": [("storage_generator", "generator", "generator_optimizer"),
                  ("storage_discriminator", "discriminator", "discriminator_optimizer")],
        "checkpoint": ("storage_checkpoint", "checkpoint"),
        "train_step": "train_step",
        "batch": _dcgan_tutorial_batch,
    },
}


class State:
    """What the hooks saw while the script ran."""

    def __init__(self, name: str, mode: str, logdir: str, artifacts: str) -> None:
        self.name, self.mode, self.logdir, self.artifacts = name, mode, logdir, artifacts
        self.fit_calls: List[Dict[str, Any]] = []
        self.fit_models: List[Any] = []
        self.slots: List[Tuple[Any, Any, Any, str]] = []  # (optimizer, slot variable, weight, slot name)
        self.tf1_optimizers: List[Any] = []
        self.tf1_graph: Any = None
        self.run_metadata: List[Dict[str, Any]] = []
        self.attach: List[Dict[str, Any]] = []  # tb_modelmem calls made by the harness and their outcome


def _error(e: BaseException) -> Dict[str, str]:
    return {"type": type(e).__name__, "message": str(e)[:4000],
            "traceback": "".join(traceback.format_exception(type(e), e, e.__traceback__))[-6000:]}


# --- hooks -----------------------------------------------------------------------------------------

def _install_truth_hooks(state: State) -> None:
    """Passive recorders for ground truth (both modes): Keras slot creation, TF1 optimizers,
    and a copy of every RunMetadata the script hands to FileWriter.add_run_metadata."""
    import keras
    import tensorflow as tf

    original_slot = keras.optimizers.Optimizer.add_variable_from_reference

    def add_variable_from_reference(self, reference_variable, name=None, *args, **kwargs):
        slot = original_slot(self, reference_variable, name, *args, **kwargs)
        state.slots.append((self, slot, reference_variable, name))
        return slot

    keras.optimizers.Optimizer.add_variable_from_reference = add_variable_from_reference

    v1_optimizer = tf.compat.v1.train.Optimizer
    original_init = v1_optimizer.__init__

    def optimizer_init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        state.tf1_optimizers.append(self)

    v1_optimizer.__init__ = optimizer_init

    file_writer = tf.compat.v1.summary.FileWriter
    original_add = file_writer.add_run_metadata

    def add_run_metadata(self, run_metadata, tag, global_step=None):
        original_add(self, run_metadata, tag, global_step)
        state.tf1_graph = tf.compat.v1.get_default_graph()
        index = len(state.run_metadata)
        path = os.path.join(state.artifacts, "run_metadata", f"{index:03d}_{tag}.pb")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = run_metadata.SerializeToString()
        with open(path, "wb") as f:
            f.write(data)
        state.run_metadata.append({
            "tag": tag, "global_step": global_step, "path": path, "bytes": len(data),
            "writer_logdir": self.get_logdir(),
            "node_stats": sum(len(d.node_stats) for d in run_metadata.step_stats.dev_stats),
        })
        if state.mode == "modelmem":
            _tf1_attach(state, self, run_metadata, tag, global_step if global_step is not None else index)

    file_writer.add_run_metadata = add_run_metadata


def _install_fit_hook(state: State) -> None:
    """The first Model.fit call gets the callback a user would add."""
    import keras

    original_fit = keras.Model.fit

    def fit(self, *args, **kwargs):
        first = not state.fit_calls
        call = {"model_name": self.name, "model_class": type(self).__name__, "attached": None}
        state.fit_calls.append(call)
        state.fit_models.append(self)
        if first:
            if state.mode == "modelmem":
                import tb_modelmem

                callback = tb_modelmem.MemoryCallback(state.logdir, profile_steps=FIT_PROFILE_STEPS)
            else:
                callback = keras.callbacks.TensorBoard(state.logdir, profile_batch=PLAIN_PROFILE_BATCH)
            call["attached"] = type(callback).__name__
            args = list(args)
            if len(args) > 5:  # fit(x, y, batch_size, epochs, verbose, callbacks, ...)
                args[5] = list(args[5] or []) + [callback]
            else:
                kwargs["callbacks"] = list(kwargs.get("callbacks") or []) + [callback]
        return original_fit(self, *args, **kwargs)

    keras.Model.fit = fit


def _install_jit_compile_hook() -> None:
    """Every Model.compile call compiles its steps with XLA, as ``jit_compile=True`` asks."""
    import keras

    original_compile = keras.Model.compile

    def compile(self, *args, **kwargs):
        kwargs["jit_compile"] = True
        return original_compile(self, *args, **kwargs)

    keras.Model.compile = compile


def _tf1_attach(state: State, file_writer: Any, run_metadata: Any, tag: str, step: int) -> None:
    """What a TF1 user does next to add_run_metadata: the documented summary calls, with the
    script's own FileWriter. Each outcome is recorded, none is fatal."""
    import tb_modelmem

    record: Dict[str, Any] = {"where": "add_run_metadata", "tag": tag, "step": step, "calls": {}}
    state.attach.append(record)
    calls = (("summary.run_metadata",
              lambda: tb_modelmem.summary.run_metadata("ops", run_metadata, step=step, writer=file_writer)),
             ("summary.variables", lambda: tb_modelmem.summary.variables("storage", step=step, writer=file_writer)))
    for what, call in calls:  # as README documents for TF1 sessions: the script's own FileWriter
        try:
            record["calls"][what] = {"returned": repr(call())}
        except Exception as e:
            record["calls"][what] = {"error": _error(e)}


def _custom_loop_attach(state: State, g: Dict[str, Any]) -> None:
    """After the script: profile one more train step and record each model with its optimizer."""
    import tensorflow as tf

    import tb_modelmem

    spec = CUSTOM_LOOPS[state.name]
    writer = tf.summary.create_file_writer(os.path.join(state.logdir, RUN))
    first_optimizer = g[spec["pairs"][0][2]]
    step = int(first_optimizer.iterations.numpy()) + 1
    train_step = g[spec["train_step"]]
    with writer.as_default():
        record: Dict[str, Any] = {"where": "trace", "tag": "ops", "step": step}
        state.attach.append(record)
        try:
            batch = spec["batch"](g)
            with tb_modelmem.trace("ops", step=step, function=train_step) as trace:
                train_step(*batch)
            record["written"] = trace.record is not None
            record["xplane_bytes"] = trace.xplane_bytes
        except Exception as e:
            record["error"] = _error(e)
        for tag, model_key, optimizer_key in spec["pairs"]:
            record = {"where": "summary.variables", "tag": tag, "step": step, "model": model_key,
                      "optimizer": optimizer_key}
            state.attach.append(record)
            try:
                record["returned"] = tb_modelmem.summary.variables(tag, model=g[model_key],
                                                                    optimizer=g[optimizer_key], step=step)
            except Exception as e:
                record["error"] = _error(e)
        if spec.get("checkpoint"):
            tag, key = spec["checkpoint"]
            record = {"where": "summary.variables", "tag": tag, "step": step, "model": key, "optimizer": None}
            state.attach.append(record)
            try:
                record["returned"] = tb_modelmem.summary.variables(tag, model=g[key], step=step)
            except Exception as e:
                record["error"] = _error(e)
    writer.flush()


# --- ground truth ----------------------------------------------------------------------------------

def _var_bytes(shape: List[int], dtype: Any) -> int:
    import numpy as np
    import tensorflow as tf

    if any(d is None or d < 0 for d in shape):
        return 0
    return int(np.prod(shape, dtype=np.int64)) * tf.as_dtype(dtype).size


def _keras_var(v: Any) -> Dict[str, Any]:
    shape = [int(d) for d in v.shape]
    return {"path": v.path, "name": v.name, "shape": shape, "dtype": str(v.dtype),
            "bytes": _var_bytes(shape, v.dtype), "trainable": bool(v.trainable)}


def _params(variables: List[Any]) -> int:
    import numpy as np

    return int(sum(int(np.prod([int(d) for d in v.shape], dtype=np.int64)) for v in variables))


def _layer_tree(layer: Any, path: str, depth: int = 0) -> List[Dict[str, Any]]:
    """Every sublayer of ``layer``, paths "<model>/<layer>/<sublayer>", with Keras' own counts."""
    out = []
    for child in layer._flatten_layers(include_self=False, recursive=False):
        if type(child).__name__ == "InputLayer":
            continue
        child_path = f"{path}/{child.name}"
        try:
            count = int(child.count_params())
        except Exception:  # not built: Keras refuses to count
            count = None
        out.append({"path": child_path, "class": type(child).__name__, "depth": depth + 1, "built": bool(child.built),
                    "count_params": count, "weights_params": _params(child.weights), "weights": len(child.weights),
                    "trainable_params": _params(child.trainable_weights),
                    "non_trainable_params": _params(child.non_trainable_weights),
                    "weights_bytes": sum(_keras_var(w)["bytes"] for w in child.weights),
                    "weight_paths": [w.path for w in child.weights]})
        out.extend(_layer_tree(child, child_path, depth + 1))
    return out


def _reachable(g: Dict[str, Any]) -> Tuple[List[Tuple[str, Any]], List[Tuple[str, Any]], List[Tuple[str, Any]]]:
    """(models, optimizers, checkpoints) reachable from the script's globals, each with the
    first key it was found under ("gan", "gan.d_optimizer", "checkpoint.generator")."""
    import keras
    import tensorflow as tf

    models, optimizers, checkpoints, seen = [], [], [], set()
    queue: List[Tuple[str, Any, int]] = [(k, v, 0) for k, v in g.items() if not k.startswith("__")]
    while queue:
        key, obj, depth = queue.pop(0)
        if id(obj) in seen:
            continue
        if isinstance(obj, keras.Model):
            seen.add(id(obj))
            models.append((key, obj))
            children = dict(vars(obj))
            children["optimizer"] = getattr(obj, "optimizer", None)
        elif isinstance(obj, (keras.optimizers.Optimizer, tf.compat.v1.train.Optimizer)):
            seen.add(id(obj))
            optimizers.append((key, obj))
            continue
        elif isinstance(obj, tf.train.Checkpoint):
            seen.add(id(obj))
            checkpoints.append((key, obj))
            children = dict(vars(obj))
        else:
            continue
        if depth < 3:
            queue.extend((f"{key}.{k}", v, depth + 1) for k, v in children.items()
                         if v is not None and not k.startswith("_"))  # public attributes: what the script made
    return models, optimizers, checkpoints


def _model_truth(key: str, model: Any, optimizer_keys: Dict[int, str]) -> Dict[str, Any]:
    variables = [_keras_var(v) for v in model.variables]
    try:
        count = int(model.count_params())
    except Exception:
        count = None
    attached = [optimizer_keys[id(v)] for k, v in sorted(vars(model).items()) if id(v) in optimizer_keys]
    own = optimizer_keys.get(id(getattr(model, "optimizer", None)))
    return {
        "key": key, "name": model.name, "class": type(model).__name__, "built": bool(model.built),
        "count_params": count,  # None where Keras refuses (a subclassed model never built)
        "weights_params": _params(model.weights),  # what count_params() sums when it counts
        "trainable_params": _params(model.trainable_weights),
        "non_trainable_params": _params(model.non_trainable_weights),
        "variables_bytes": sum(v["bytes"] for v in variables),
        "trainable_bytes": sum(v["bytes"] for v in variables if v["trainable"]),
        "non_trainable_bytes": sum(v["bytes"] for v in variables if not v["trainable"]),
        "variables": variables,
        "layers": _layer_tree(model, model.name),
        "weights_bytes": sum(_keras_var(w)["bytes"] for w in model.weights),
        "trainable_variable_paths": [v.path for v in model.trainable_variables],  # the order gradients come in
        "optimizer": own,
        "optimizers": sorted(set(attached + ([own] if own else []))),
    }


def _optimizer_truth(key: str, optimizer: Any, state: State) -> Dict[str, Any]:
    variables = [_keras_var(v) for v in optimizer.variables]
    own = {id(v) for v in optimizer.variables}
    slots = [{"variable": slot.path, "slot": name, "weight": weight.path,
              "bytes": _var_bytes([int(d) for d in slot.shape], slot.dtype)}
             for opt, slot, weight, name in state.slots if id(slot) in own]  # its own, or a wrapped optimizer's
    slot_bytes = sum(s["bytes"] for s in slots)
    total = sum(v["bytes"] for v in variables)
    return {
        "key": key, "class": type(optimizer).__name__, "name": getattr(optimizer, "name", ""),
        "built": bool(getattr(optimizer, "built", True)),
        "iterations": int(optimizer.iterations.numpy()) if hasattr(optimizer.iterations, "numpy") else None,
        "variables_bytes": total, "slot_bytes": slot_bytes, "other_bytes": total - slot_bytes,
        "variables": variables, "slots": slots,
        "trainable_variables": [v.path for v in getattr(optimizer, "_trainable_variables", None) or []],
        "config": _config(optimizer),
    }


def _config(obj: Any) -> Optional[Dict[str, Any]]:
    """Keras' own ``get_config()`` of an optimizer or a loss, as JSON (what is not JSON as a string)."""
    try:
        return json.loads(json.dumps(obj.get_config(), default=str))
    except Exception:  # a TF1 optimizer has none; a schedule without get_config raises
        return None


def _losses(g: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every Keras loss object among the script's globals (a custom loop's ``loss_object``): its name is the
    name scope Keras enters when it is called."""
    import keras

    return [{"key": key, "class": type(value).__name__, "name": value.name, "config": _config(value)}
            for key, value in g.items() if isinstance(value, keras.losses.Loss)]


def _tf1_truth(state: State) -> Optional[Dict[str, Any]]:
    import tensorflow as tf

    graph = state.tf1_graph
    if graph is None and state.tf1_optimizers:
        graph = tf.compat.v1.get_default_graph()
    if graph is None:
        return None

    def record(v: Any) -> Dict[str, Any]:
        shape = [-1 if d is None else int(d) for d in v.shape.as_list()] if v.shape.rank is not None else [-1]
        dtype = v.dtype.base_dtype
        return {"name": v.name.split(":")[0], "shape": shape, "dtype": dtype.name, "bytes": _var_bytes(shape, dtype),
                "trainable": False}

    with graph.as_default():
        global_vars = graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
        trainable = graph.get_collection(tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES)
        trainable_names = {v.name for v in trainable}
        out_vars = []
        for v in global_vars:
            r = record(v)
            r["trainable"] = v.name in trainable_names
            out_vars.append(r)
        optimizers = []
        for opt in state.tf1_optimizers:
            slots = []
            for slot_name in opt.get_slot_names():
                for weight in trainable:
                    slot = opt.get_slot(weight, slot_name)
                    if slot is not None:
                        slots.append({"variable": slot.name.split(":")[0], "slot": slot_name,
                                      "weight": weight.name.split(":")[0], "bytes": record(slot)["bytes"]})
            opt_vars = [record(v) for v in opt.variables()]
            optimizers.append({
                "class": type(opt).__name__, "name": opt.get_name(), "slot_names": list(opt.get_slot_names()),
                "slots": slots, "variables": [v["name"] for v in opt_vars],
                "variables_bytes": sum(v["bytes"] for v in opt_vars),
                "slot_bytes": sum(s["bytes"] for s in slots),
            })
    return {
        "global_variables": out_vars,
        "trainable_variables": [v.name.split(":")[0] for v in trainable],
        "global_variables_bytes": sum(v["bytes"] for v in out_vars),
        "trainable_bytes": sum(v["bytes"] for v in out_vars if v["trainable"]),
        "optimizers": optimizers,
    }


def _saved_files(cwd: str) -> List[Dict[str, Any]]:
    """Checkpoints and model files the script saved, with their sizes."""
    out = []
    for root, _, files in os.walk(cwd):
        for f in sorted(files):
            path = os.path.join(root, f)
            kind = ("checkpoint" if (".index" in f or ".data-" in f or f == "checkpoint") else
                    "model" if f.endswith((".keras", ".h5")) else "other")
            out.append({"path": os.path.relpath(path, cwd), "bytes": os.path.getsize(path), "kind": kind})
    return out


def _tags(logdir: str) -> List[Dict[str, Any]]:
    """Every summary tag in the log dir's event files: run, tag, plugin (or the value's kind
    for TF1 summaries with no plugin), steps. TF1 run metadata is plugin graph_tagged_run_metadata."""
    from tensorboard.backend.event_processing import event_file_loader

    found: Dict[Tuple[str, str, str], List[int]] = {}
    for path in sorted(glob.glob(os.path.join(logdir, "**", "*tfevents*"), recursive=True)):
        run = os.path.relpath(os.path.dirname(path), logdir)
        for event in event_file_loader.LegacyEventFileLoader(path).Load():
            items = []
            if event.HasField("tagged_run_metadata"):
                items.append((event.tagged_run_metadata.tag, "graph_tagged_run_metadata"))
            if event.HasField("graph_def"):
                items.append(("__graph__", "graph_def"))
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name or value.WhichOneof("value") or ""
                items.append((value.tag, plugin))
            for tag, plugin in items:
                found.setdefault((run, tag, plugin), []).append(int(event.step))
    return [{"run": run, "tag": tag, "plugin": plugin, "steps": sorted(set(steps))}
            for (run, tag, plugin), steps in sorted(found.items())]


def _script_globals(tb: Any, script: str) -> Optional[Dict[str, Any]]:
    """The script's module globals from a traceback through it (run_path returns none on a raise)."""
    frame_globals = None
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == script and tb.tb_frame.f_code.co_name == "<module>":
            frame_globals = tb.tb_frame.f_globals
        tb = tb.tb_next
    return frame_globals


def _checks(state: State, kind: str, models: List[Dict[str, Any]], optimizers: List[Dict[str, Any]],
            g: Dict[str, Any]) -> List[Dict[str, Any]]:
    """What tb_modelmem should have written in modelmem mode, and the truth each one is held to."""
    if state.mode != "modelmem":
        return []
    if kind == "fit":
        if not state.fit_models:
            return []
        fitted = next(m for m in models if m["key"] == state.fit_calls[0]["model_key"])
        return [{"run": RUN, "tag": "storage", "models": [fitted["key"]], "optimizers": fitted["optimizers"],
                 "source": "MemoryCallback"}]
    if kind == "custom_loop":
        spec = CUSTOM_LOOPS[state.name]
        by_id = {id(g[k]): k for k in g if not k.startswith("__")}
        out = [{"run": RUN, "tag": tag, "models": [mk], "optimizers": [ok],
                "source": "summary.variables"} for tag, mk, ok in spec["pairs"]]
        if spec.get("checkpoint"):
            tag, key = spec["checkpoint"]
            ckpt = g[key]
            # everything the checkpoint tracks directly: its models and optimizers
            tracked = [by_id.get(id(v)) for v in vars(ckpt).values() if id(v) in by_id]
            # the checkpoint's own variable (made by its first save): training state, role "other"
            counter = ckpt.save_counter if getattr(ckpt, "_save_counter", None) is not None else None
            extra = [] if counter is None else [{"name": counter.name.split(":")[0], "role": "other",
                                                 "shape": counter.shape.as_list(), "dtype": counter.dtype.name,
                                                 "bytes": _var_bytes(counter.shape.as_list(), counter.dtype)}]
            out.append({"run": RUN, "tag": tag,
                        "models": [k for k in tracked if k in {m["key"] for m in models}],
                        "optimizers": [k for k in tracked if k in {o["key"] for o in optimizers}],
                        "extra_variables": extra,
                        "source": "summary.variables(tf.train.Checkpoint)"})
        return out
    return [{"run": RUN, "tag": "storage", "tf1": True, "source": "summary.variables (TF1 graph)"}]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", choices=sorted(SCRIPTS))
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--mode", choices=("modelmem", "plain"), default="modelmem")
    parser.add_argument("--jit-compile", action="store_true", help="compile every Keras model with jit_compile=True")
    parser.add_argument("--mixed-precision", action="store_true",
                        help='keras.mixed_precision.set_global_policy("mixed_float16") before the script')
    args = parser.parse_args(argv)

    started = time.time()
    logdir, out = os.path.abspath(args.logdir), os.path.abspath(args.out)
    artifacts = os.path.splitext(out)[0] + "_artifacts"
    cwd = os.path.join(artifacts, "cwd")
    os.makedirs(cwd, exist_ok=True)
    script = str(script_path(args.name))
    kind = SCRIPTS[args.name]
    state = State(args.name, args.mode, logdir, artifacts)
    result: Dict[str, Any] = {"version": RESULT_VERSION, "name": args.name, "kind": kind, "mode": args.mode,
                              "script": script, "logdir": logdir, "run": RUN, "artifacts": artifacts, "cwd": cwd}

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import keras
        import tensorflow as tf

        result["versions"] = {"tensorflow": tf.__version__, "keras": keras.__version__,
                              "python": sys.version.split()[0]}
        _install_truth_hooks(state)
        if kind == "fit":
            _install_fit_hook(state)
        if args.jit_compile:
            _install_jit_compile_hook()
        if args.mixed_precision:
            keras.mixed_precision.set_global_policy("mixed_float16")
        result["mixed_precision"] = bool(args.mixed_precision)

        os.chdir(cwd)
        argv_before = sys.argv
        sys.argv = [script] + (["--summaries_dir", logdir] if kind == "tf1" else [])
        g: Optional[Dict[str, Any]] = None
        result["error"] = None
        t0 = time.time()
        try:
            g = runpy.run_path(script, run_name="__main__")
        except SystemExit as e:  # tf.compat.v1.app.run ends with sys.exit
            g = _script_globals(e.__traceback__, script)
            if e.code not in (None, 0):
                result["error"] = _error(e)
        except BaseException as e:
            g = _script_globals(e.__traceback__, script)
            result["error"] = _error(e)
        finally:
            sys.argv = argv_before
        result["script_time_s"] = round(time.time() - t0, 3)
        g = g or {}

        t1 = time.time()
        if args.mode == "modelmem" and kind == "custom_loop" and result["error"] is None:
            try:
                _custom_loop_attach(state, g)
            except Exception as e:
                state.attach.append({"where": "custom_loop", "error": _error(e)})
        result["attach_time_s"] = round(time.time() - t1, 3)

        models, optimizers, checkpoints = _reachable(g)
        optimizer_keys = {id(o): k for k, o in optimizers}
        model_keys = {id(m): k for k, m in models}
        for call, model in zip(state.fit_calls, state.fit_models):
            call["model_key"] = model_keys.get(id(model))
        result["models"] = [_model_truth(k, m, optimizer_keys) for k, m in models]
        result["optimizers"] = [_optimizer_truth(k, o, state) for k, o in optimizers
                                if not isinstance(o, tf.compat.v1.train.Optimizer)]
        result["checkpoint_objects"] = [k for k, _ in checkpoints]
        result["losses"] = _losses(g)
        result["tf1"] = _tf1_truth(state) if kind == "tf1" else None
        result["run_metadata"] = state.run_metadata
        result["fit_calls"] = state.fit_calls
        result["attach"] = state.attach
        result["checks"] = _checks(state, kind, result["models"], result["optimizers"], g)
        result["saved_files"] = _saved_files(cwd)

    os.chdir(os.path.dirname(out) or ".")
    result["warnings"] = [{"category": w.category.__name__, "message": str(w.message)[:2000],
                           "filename": w.filename, "lineno": w.lineno} for w in caught]
    result["modelmem_warnings"] = [w for w in result["warnings"] if "tb_modelmem" in w["message"]]
    result["tags"] = _tags(logdir) if os.path.isdir(logdir) else []
    result["profiles"] = sorted(os.path.relpath(p, logdir) for p in
                                glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))
    result["tb_modelmem_imported"] = any(m == "tb_modelmem" or m.startswith("tb_modelmem.") for m in sys.modules)
    result["wall_time_s"] = round(time.time() - started, 3)
    with open(out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True, default=str)
    print(f"corpus {args.name} ({args.mode}): script {result['script_time_s']} s, total {result['wall_time_s']} s, "
          f"error: {result['error']['type'] if result['error'] else None}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
