"""How much of a profiled step's layer work the join put on the model's layers: the check the op
tests share (corpus scripts, LeNet, a plain Keras profile, a TF1 session)."""

from __future__ import annotations

from typing import Any, Collection, Dict, Iterable, List, Mapping, Tuple

from tb_modelmem.schema.names import BACKWARD, FORWARD


def on_layers(ops: Iterable[Tuple[str, str, float]], layers: Collection[str],
              leave_out_longest: bool = False) -> Tuple[float, List[Tuple[str, float]]]:
    """(fraction of the forward and backward ops' time that is on ``layers``, the five biggest
    other places it went), for ops given as (phase, layer, time_us).

    Each forward or backward op runs inside a layer. The other ops are left out. Optimizer,
    metrics, loss, input and executor ops belong to no layer by design, or not all of them do
    (the optimizer's counters). A profile's times are one step's: one of those variable writes
    waiting 1.5-3 ms on its lock is a quarter of a small model's step. That happened to a
    metric's AssignVariableOp on quickstart_advanced, in 1 run of 6 and once in CI.

    ``leave_out_longest`` leaves the step's one longest op out of both sides, wherever it ran: a
    scheduler can stall any one op of a step timed beside other work, while a join that misses a
    layer misses every op of it, the longest left out or not. In one CI run, mnist_with_summaries'
    backward ops on no layer (dropout's and the loss's gradients) took 19.9 ms of a 37 ms pass;
    alone they take 0.13 ms of 4.6, the longest of them 0.09."""
    timed = [(phase, layer, time_us) for phase, layer, time_us in ops if phase in (FORWARD, BACKWARD)]
    if leave_out_longest and timed:
        timed.remove(max(timed, key=lambda op: op[2]))
    total = joined = 0.0
    elsewhere: Dict[str, float] = {}
    for phase, layer, time_us in timed:
        total += time_us
        if layer in layers:
            joined += time_us
        else:
            key = layer or f"({phase})"
            elsewhere[key] = elsewhere.get(key, 0.0) + time_us
    return (joined / total if total else 0.0), sorted(elsewhere.items(), key=lambda kv: -kv[1])[:5]


def rows_on_layers(rows: Iterable[Mapping[str, Any]], layers: Collection[str],
                   leave_out_longest: bool = False) -> Tuple[float, List[Tuple[str, float]]]:
    """``on_layers`` of op rows as the plugin serves them (``Served.all_ops``)."""
    return on_layers(((row["phase"], row["layer"], row["time_us"]) for row in rows), layers, leave_out_longest)
