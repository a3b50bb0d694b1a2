"""Storage figures for real public training scripts (tests/corpus/), against ground truth.

Each script runs once, in a subprocess, with tb_modelmem attached as a user attaches it
(``tests/corpus/harness.py``). What tb_modelmem wrote is read back through the real plugin
backend (``Served``); the truth comes from the live Keras/TF objects after training (byte
counts from shapes and dtypes with numpy/TF, slots as Keras created them, Keras'
``count_params()``), never from tb_modelmem. A failure lists every figure that differs.
"""

from __future__ import annotations

from typing import Any, Dict, List, Set, Tuple

import pytest

from tests.corpus import SCRIPTS, run
from tests.support.plugin_harness import Served, layer_rows


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """name -> the harness result (modelmem mode); each script runs once for the module."""
    base = tmp_path_factory.mktemp("corpus")
    return lambda name: run(name, "modelmem", base)


FIGURES = {
    "weight": "weight bytes", "non_trainable": "non_trainable bytes",
    "model_bytes": "weight + non_trainable bytes (= model variables)",
    "optimizer_slot": "optimizer_slot bytes", "other": "other bytes",
    "optimizer_bytes": "optimizer_slot + other bytes (= optimizer variables)",
    "variables": "number of variables", "total_params": "total params",
}


def _keras_truth(result: Dict[str, Any], check: Dict[str, Any]) -> Dict[str, Any]:
    models = [m for m in result["models"] if m["key"] in check["models"]]
    optimizers = [o for o in result["optimizers"] if o["key"] in check["optimizers"]]
    assert len(models) == len(check["models"]) and len(optimizers) == len(check["optimizers"]), check
    model_vars = {v["path"]: v for m in models for v in m["variables"]}
    opt_vars = {v["path"]: v for o in optimizers for v in o["variables"]}
    slots = {s["variable"]: s for o in optimizers for s in o["slots"]}
    weight = sum(v["bytes"] for v in model_vars.values() if v["trainable"])
    non_trainable = sum(v["bytes"] for v in model_vars.values() if not v["trainable"])
    extra = {v["name"]: v for v in check.get("extra_variables", [])}  # a checkpoint's save_counter
    optimizer_bytes = sum(v["bytes"] for v in opt_vars.values())
    slot_bytes = sum(s["bytes"] for s in slots.values())
    roles = {path: "weight" if v["trainable"] else "non_trainable" for path, v in model_vars.items()}
    roles.update({path: "optimizer_slot" if path in slots else "other" for path in opt_vars})
    roles.update({name: v["role"] for name, v in extra.items()})
    other_extra = sum(v["bytes"] for v in extra.values() if v["role"] == "other")
    layers = {m["name"]: _count(m) for m in models}
    layers.update({layer["path"]: _count(layer) for m in models for layer in m["layers"]})
    return {
        "weight": weight, "non_trainable": non_trainable, "model_bytes": weight + non_trainable,
        "optimizer_slot": slot_bytes, "other": optimizer_bytes - slot_bytes + other_extra,
        "optimizer_bytes": optimizer_bytes + other_extra,
        "variables": len(model_vars) + len(opt_vars) + len(extra),
        "total_params": sum(_count(m) for m in models),
        "slots": {(path, s["weight"]) for path, s in slots.items()},
        "roles": roles,
        "layers": layers,
    }


def _count(layer: Dict[str, Any]) -> int:
    """Keras' count_params(); for a layer Keras will not count (never built), the sum of its
    weights' sizes, which is what count_params() returns once it does."""
    return layer["count_params"] if layer["count_params"] is not None else layer["weights_params"]


def _tf1_truth(result: Dict[str, Any]) -> Dict[str, Any]:
    tf1 = result["tf1"]
    assert tf1 is not None, "the TF1 script traced no RunMetadata (no graph to take the truth from)"
    opt_names = {name for o in tf1["optimizers"] for name in o["variables"]}
    slots = {s["variable"]: s for o in tf1["optimizers"] for s in o["slots"]}
    by_name = {v["name"]: v for v in tf1["global_variables"]}
    weight = sum(v["bytes"] for v in by_name.values() if v["trainable"])
    optimizer_bytes = sum(by_name[n]["bytes"] for n in opt_names)
    slot_bytes = sum(s["bytes"] for s in slots.values())
    model = [v for n, v in by_name.items() if n not in opt_names]
    layers: Dict[str, int] = {}
    for v in model:  # a TF1 "layer" is the top-level name scope its variables were made in
        if "/" in v["name"]:
            layers[v["name"].split("/")[0]] = layers.get(v["name"].split("/")[0], 0) + _params(v["shape"])
    roles = {v["name"]: "weight" if v["trainable"] else "non_trainable" for v in model}
    roles.update({name: "optimizer_slot" if name in slots else "other" for name in opt_names})
    return {
        "roles": roles,
        "weight": weight, "non_trainable": sum(v["bytes"] for v in model if not v["trainable"]),
        "model_bytes": sum(v["bytes"] for v in model),
        "optimizer_slot": slot_bytes, "other": optimizer_bytes - slot_bytes, "optimizer_bytes": optimizer_bytes,
        "variables": len(by_name), "total_params": sum(_params(v["shape"]) for v in model),
        "slots": {(path, s["weight"]) for path, s in slots.items()},
        "layers": layers,
    }


def _params(shape: List[int]) -> int:
    count = 1
    for d in shape:
        count *= d
    return count


def _attach_outcomes(result: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The tb_modelmem calls the harness made, errors as "Type: first line"."""
    def short(error: Dict[str, str]) -> str:
        return f"{error['type']}: {error['message'].splitlines()[0][:160]}"

    out = []
    for call in result["attach"]:
        row = {k: v for k, v in call.items() if k not in ("error", "calls")}
        if "error" in call:
            row["error"] = short(call["error"])
        for what, outcome in call.get("calls", {}).items():
            row[what] = short(outcome["error"]) if "error" in outcome else outcome.get("returned")
        out.append(row)
    return out


def _compare(served: Served, tags: Dict[Tuple[str, str], Any], result: Dict[str, Any],
             check: Dict[str, Any]) -> List[str]:
    """Every figure of one breakdown that differs from the truth, as 'what: expected X, got Y'."""
    where = f"{check['run']}/{check['tag']} ({check['source']})"
    if (check["run"], check["tag"]) not in tags:
        return [f"{where}: no breakdown written; tags in the log dir: {sorted(tags)}; "
                f"harness calls: {_attach_outcomes(result)}"]
    truth = _tf1_truth(result) if check.get("tf1") else _keras_truth(result, check)
    body = served.json("/breakdown", run=check["run"], tag=check["tag"])
    totals = body["totals"]
    rows = served.all_variables(check["run"], check["tag"])
    got = {
        "weight": totals["weight"], "non_trainable": totals["non_trainable"],
        "model_bytes": totals["weight"] + totals["non_trainable"],
        "optimizer_slot": totals["optimizer_slot"], "other": totals["other"],
        "optimizer_bytes": totals["optimizer_slot"] + totals["other"],
        "variables": len(rows), "total_params": body["total_params"],
    }
    problems = [f"{where}: {FIGURES[figure]}: expected {truth[figure]:,}, got {got[figure]:,}"
                for figure in got if got[figure] != truth[figure]]
    got_roles = {v["name"]: v["role"] for v in rows}
    wrong = [f"{name} expected {role}, got {got_roles[name]}" for name, role in truth["roles"].items()
             if name in got_roles and got_roles[name] != role]
    if wrong:
        problems.append(f"{where}: {len(wrong)} variables in the wrong role: {wrong[:8]}")
    absent = sorted(set(truth["roles"]) - set(got_roles))
    if absent:
        problems.append(f"{where}: {len(absent)} variables missing from the breakdown: {absent[:8]}")
    foreign = sorted(set(got_roles) - set(truth["roles"]))
    if foreign:
        problems.append(f"{where}: {len(foreign)} variables in the breakdown that the truth does not have: "
                        f"{foreign[:8]}")
    got_slots: Set[Tuple[str, str]] = {(v["name"], v["slot_of"]) for v in rows if v["role"] == "optimizer_slot"}
    missing, extra = sorted(truth["slots"] - got_slots), sorted(got_slots - truth["slots"])
    if missing:
        problems.append(f"{where}: {len(missing)} slot variables not recorded as slots of their weight: {missing[:6]}")
    if extra:
        problems.append(f"{where}: {len(extra)} variables recorded as slots that are not: {extra[:6]}")
    leaves = [r for r in layer_rows(body) if r["leaf"]]  # composite rows total their leaves: count leaves once
    for path, expected in truth["layers"].items():
        below = [r for r in leaves if r["layer"] == path or r["layer"].startswith(path + "/")]
        if not below and any(path.startswith(r["layer"] + "/") for r in leaves):
            continue  # shown as part of an enclosing layer (MultiHeadAttention, LSTM): that row is checked
        params = sum(r["params"] for r in below)
        if params != expected:
            problems.append(f"{where}: layer {path}: params expected {expected:,} (count_params), got {params:,}")
    unknown = [r["layer"] for r in leaves if r["params"] and r["layer"] not in truth["layers"]
               and not check.get("tf1")]
    if unknown:
        problems.append(f"{where}: layer rows with params that are no layer of the model: {unknown[:6]}")
    return problems


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_storage_matches_ground_truth(corpus, name):
    result = corpus(name)
    assert result["error"] is None, f"{name} did not run:\n{result['error']['traceback']}"
    assert result["checks"], f"{name}: the harness expected no breakdown (fit not called?)"
    served = Served(result["logdir"])
    tags = served.tags()
    problems = []
    for check in result["checks"]:
        problems += _compare(served, tags, result, check)
    warned = [w["message"] for w in result["modelmem_warnings"]]
    assert not problems, "\n".join([f"{name}: tb_modelmem differs from the ground truth:"] + problems
                                   + [f"tb_modelmem warned: {w}" for w in warned])


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_ops_summary_is_written(corpus, name):
    """The profiled step's op table is there (MemoryCallback profile_steps, tb_modelmem.trace,
    or summary.run_metadata next to add_run_metadata)."""
    result = corpus(name)
    assert result["error"] is None, f"{name} did not run:\n{result['error']['traceback']}"
    tags = Served(result["logdir"]).tags()
    assert (result["run"], "ops") in tags, (
        f"{name}: no ops summary; tags: {sorted(tags)}; harness calls: {_attach_outcomes(result)}; "
        f"tb_modelmem warned: {[w['message'] for w in result['modelmem_warnings']]}")
    assert tags[(result["run"], "ops")]["kind"] == "ops" and not tags[(result["run"], "ops")]["error"]


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_the_peaks_optimizer_slots_are_the_optimizers_own(corpus, name):
    """Issue 38: one rule for the optimizer slots. The Ops peak's slots (``rules.peak.resident_state``) are
    the bytes of every slot variable the optimizers made (Keras' add_variable_from_reference, TF1's
    slots, recorded by the harness), to the byte: the same figure Storage shows."""
    result = corpus(name)
    assert result["error"] is None, f"{name} did not run:\n{result['error']['traceback']}"
    served = Served(result["logdir"])
    checks = [c for c in result["checks"] if c["run"] == result["run"]]
    assert checks, f"{name}: the harness expected no breakdown in the traced run {result['run']}"
    if checks[0].get("tf1"):
        expected = _tf1_truth(result)["optimizer_slot"]
    else:
        optimizers = [o for o in result["optimizers"] if o["key"] in {key for c in checks for key in c["optimizers"]}]
        assert optimizers, (name, checks)
        expected = sum(s["bytes"] for o in optimizers for s in o["slots"])
    counted: Set[str] = set()  # Storage's slots, each optimizer once (a checkpoint's breakdown holds several)
    storage = 0
    for check in sorted(checks, key=lambda c: -len(c.get("optimizers") or ())):
        if not counted & set(check.get("optimizers") or ()):
            storage += served.json("/breakdown", run=check["run"], tag=check["tag"])["totals"]["optimizer_slot"]
            counted |= set(check.get("optimizers") or ())
    assert storage == expected > 0, (name, storage, expected)
    peak = served.json("/ops", run=result["run"], tag="ops")["peak_by_category"]
    if "optimizer_slots" in peak["unknown"]:  # a profile with no allocation events: unknown, never 0
        assert peak["optimizer_slots"] is None and "allocation" in peak["unknown"]["optimizer_slots"], peak
        return
    assert peak["optimizer_slots"] == storage, f"{name}: the peak's slots {peak['optimizer_slots']:,} != {storage:,}"
