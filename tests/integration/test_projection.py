"""What if (issue 28): a traced step projected to another optimizer, precision, batch or budget, checked
against what Keras and real runs say (optimizer.variables of a real optimizer built on the same model,
the peak a real run at the other batch measured), never against tb_modelmem itself."""

from __future__ import annotations

import collections
import json
import math
import os
import re
import statistics
import subprocess
import sys
from typing import Any, Dict, List

import pytest

import tb_modelmem
from tb_modelmem.cli import format_estimate
from tb_modelmem.readers.logdir import read_run
from tb_modelmem.rules.projection import WhatIf, project
from tb_modelmem.schema.names import STEP_ONLY_CATEGORIES
from tests.support.basis_arithmetic import SIZE, UNIT, basis_arithmetic
from tests.support.quiet import run_alone

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPTIMIZERS = ["SGD", "momentum", "Adam", "AdamW", "Adamax", "Nadam", "RMSprop", "Adagrad", "Adadelta", "Ftrl",
              "Lion", "Adafactor"]


def _run(logdir: str, batch: int, *extra: str, ordered: bool = False) -> Dict[str, Any]:
    """A real LeNet run; ``ordered``: TensorFlow on one inter-op and one intra-op thread, so that runs of one
    setting run their ops in one order and peak alike. Batch 32 under Adam, five runs on an idle machine:
    87.32, 87.32, 86.80, 87.29, 87.29 MB; with the intra-op threads free, 77.57-87.32; free-running, up to 20%
    apart. Under load the order moves again (80.53-87.04 MB in four ordered runs beside two busy processes):
    the tests that compare a projection with real runs are marked ``quiet`` and run alone (scripts/test.sh), and
    an ordered run made beside other processes is made again (``quiet.run_alone``)."""
    truth = logdir + ".json"
    env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
    args = [sys.executable, "-m", "tests.support.projection_run", logdir, "lenet", str(batch), "--truth", truth,
            *extra]
    if not ordered:
        result = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
        assert result.returncode == 0, result.stderr[-3000:]
        with open(truth) as f:
            return json.load(f)
    env.update(TF_NUM_INTEROP_THREADS="1", TF_NUM_INTRAOP_THREADS="1")
    return run_alone(args, truth, logdir, cwd=REPO, timeout=600, env=env)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """Seed 002's LeNet, batch 32, Adam, every CPU allocation recorded."""
    logdir = str(tmp_path_factory.mktemp("whatif") / "lenet_32")
    return logdir, _run(logdir, 32)


TWO_STEPS = ("--profile-steps", "3,4")


def _ordered_two_steps(logdir: str, batch: int, *extra: str) -> Dict[str, Any]:
    """A real ordered run with steps 3 and 4 traced; its peak over them is ``max(run["allocator_step_peaks"])``,
    as TensorFlow's allocator counted each (``_run``)."""
    return _run(logdir, batch, *extra, *TWO_STEPS, ordered=True)


@pytest.fixture(scope="module")
def traced_in_order(tmp_path_factory) -> List[str]:
    """Five log dirs of the same, ordered, steps 3 and 4 traced together, as What if's caveat asks (``_run``): the
    traces the ``quiet`` tests project from, each figure the median of the five projections, checked against real
    runs' peaks over the same two steps. A run's order is one of a few: most traces read 87.32 and 84.42 MB or 86.80
    and 87.43, but about one in ten runs takes another order throughout (80.88 and 80.76 MB), and projects 13-16%
    low on every question asked of it (its own figures in each test). With three traces, two of them in that order
    (about 3 sets in 100) made the median one of them: a CI run of e333e19 read -12.8% (momentum) and -13.9%
    (batch 64), and passed run again; five make it about 1 in 100."""
    folder = tmp_path_factory.mktemp("whatif_ordered")
    logdirs = [str(folder / f"lenet_32_{i}") for i in range(5)]
    for logdir in logdirs:
        _ordered_two_steps(logdir, 32)
    return logdirs


def _what_the_traces_read(logdirs: List[str]) -> List[Any]:
    """Each trace's own peaks, as TensorFlow counted them, and the cores others took beside it: for a failure's
    message."""
    said = []
    for logdir in logdirs:
        with open(logdir + ".json") as f:
            truth = json.load(f)
        said.append((truth["allocator_step_peaks"], truth["others_busy_cores"], truth["attempts"]))
    return said


def _median_projection(logdirs: List[str], **asked: Any) -> float:
    """The median over the traces of What if's projected peak."""
    return statistics.median(tb_modelmem.estimate(logdir, **asked)["peak_bytes"] for logdir in logdirs)


def _real_optimizer_bytes(name: str, policy: str = "float32") -> Dict[str, int]:
    """Bytes of the variables a real Keras optimizer builds for the LeNet's trainable weights."""
    import keras
    import numpy as np

    from demo.models import seed001_convnet

    model = seed001_convnet()
    optimizer = keras.optimizers.SGD(momentum=0.9) if name == "momentum" else keras.optimizers.get(name.lower())
    if policy == "mixed_float16":
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    optimizer.build(model.trainable_variables)

    def nbytes(variables: Any) -> int:
        return sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in variables)

    # The optimizer's own counters and rates, as Keras names them in its build(); all else is per weight
    # (Adafactor's factors of a bias are scalars too). Nadam's momentum product is auto-named "variable", and
    # "variable_7" once the process has made others.
    state = [v for v in optimizer.variables if re.fullmatch(_KERAS_STATE, v.name)]
    return {"slots": nbytes(optimizer.variables) - nbytes(state), "scalars": nbytes(state)}


_KERAS_STATE = r"iteration|learning_rate|variable(_\d+)?|step_counter|dynamic_scale"


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_the_state_of_another_optimizer_is_what_keras_builds(traced, name):
    logdir, truth = traced
    result = tb_modelmem.estimate(logdir, optimizer=name)
    real = _real_optimizer_bytes(name)
    assert result["by_category"]["optimizer_slots"] == real["slots"], name
    assert result["by_category"]["other_state"] == real["scalars"], name
    assert result["by_category"]["weights"] == truth["weights"] == 13_098_536
    line = [b for b in result["basis"] if b["category"] == "optimizer_slots"][0]
    assert line["how"] == "computed" and "build()" in line["formula"]


def test_mixed_float16_adds_the_loss_scale_state(traced):
    logdir, _ = traced
    result = tb_modelmem.estimate(logdir, policy="mixed_float16")
    real = _real_optimizer_bytes("Adam", "mixed_float16")
    assert result["by_category"]["optimizer_slots"] == real["slots"]
    assert result["by_category"]["other_state"] == real["scalars"]
    bfloat = tb_modelmem.estimate(logdir, policy="mixed_bfloat16")
    traced_peak = tb_modelmem.estimate(logdir)
    assert bfloat["by_category"]["activations"] < traced_peak["by_category"]["activations"]


def test_what_a_bfc_peak_holds_from_before_the_trace_is_named(traced):
    """Issue 38 item 1: a LeNet step's BFC peak holds 4-10% that no allocation in the trace made. It is in the
    count TensorFlow reported as step 3 began (less model.weights + optimizer.variables), and the peak names
    it: what earlier steps left and this one frees, what stays all through it (the chunk slack), with why.
    TensorFlow's count is read as the step begins, before MemoryCallback's profiler starts: what other threads
    allocate in between is before the window too (clean CI runs read 26,880 and 67,840 B over the count), so the
    bound is the count within 1% of the peak."""
    from tb_modelmem.plugin.views.breakdown import BreakdownView
    from tb_modelmem.plugin.views.peak import peak_by_category, peak_notes

    logdir, truth = traced
    logged = read_run(logdir)
    breakdown = BreakdownView(logged.breakdown)
    peak = peak_by_category(logged.trace, breakdown)
    state = truth["weights"] + truth["non_trainable"] + truth["optimizer_slots"] + truth["optimizer_scalars"]
    held_before = truth["allocator_before_trace"] - state  # TensorFlow's figures, not tb_modelmem's
    before = peak["earlier_steps"] + peak["held_between_steps"] + peak["unattributed"]
    assert 0 < peak["held_between_steps"] <= before <= held_before + 0.01 * peak["total"], (peak, held_before)
    assert peak["unattributed"] <= 0.02 * peak["total"], peak
    why = peak_notes(logged.trace, breakdown, peak)["held_between_steps"]
    assert f"{peak['held_between_steps']:,} B" in why and f"beyond the run's variables ({state:,} B" in why, why
    assert "the chunks the allocator handed the variables" in why and "% more than they asked" in why


def test_two_traced_steps_each_peak_as_tensorflow_counted_and_give_the_spread(tmp_path):
    """Issue 38 item 3: a projection from one noisy trace says how noisy. Steps 3 and 4 traced together: each
    step's own peak is BFC's high-water mark over that step, as TensorFlow reports it (its stats reset as the
    step begins), and What if projects each, the spread of the two beside the one figure."""
    logdir = str(tmp_path / "lenet_two_steps")
    truth = _run(logdir, 32, "--profile-steps", "3,4")
    real = truth["allocator_step_peaks"]
    result = tb_modelmem.estimate(logdir, batch=128)
    traced_steps = tb_modelmem.estimate(logdir)["steps"]
    assert len(real) == 2 and len(result["steps"]) == 2 and len(traced_steps) == 2, (real, result["steps"])
    for step, tensorflows in zip(result["steps"], real):
        # what TensorFlow counted between the step's hooks; the trace's step runs to the next one's start
        assert abs(step["traced_peak_bytes"] - tensorflows) <= 0.005 * tensorflows, (step, tensorflows)
    assert [s["peak_bytes"] for s in traced_steps] == [s["traced_peak_bytes"] for s in traced_steps]
    assert max(s["peak_bytes"] for s in result["steps"]) == result["peak_bytes"]
    assert all(s["peak_bytes"] >= s["traced_peak_bytes"] for s in result["steps"])  # batch x4: none below its own
    report = format_estimate(result)
    assert "the 2 traced steps peaked at" in report and "a spread of" in report, report


def test_a_profile_of_the_first_step_says_it_made_the_optimizers_state(traced, tmp_path):
    """Seen on a profile of step 1: Adam makes its slots in its first step (their initializers run inside the
    window), so that trace's peak counts them with the step's own buffers. The answers say so, naming the
    initializers, one per slot Keras made; the step-3 profile ran none and says nothing of it."""
    from tb_modelmem.plugin.views.breakdown import BreakdownView
    from tb_modelmem.plugin.views.trace import TraceView

    first = _run(str(tmp_path / "lenet_first"), 32, "--profile-steps", "1,1")
    logged = read_run(str(tmp_path / "lenet_first"))
    notes = TraceView(logged.trace, BreakdownView(logged.breakdown)).peak_notes
    ran = sorted(name for name in logged.trace.ops.column("name") if "/Initializer/" in name)
    # Keras' slot paths ("adam/lenet_fc1_kernel_momentum"): the initializers are of those slots
    assert ran and {name.partition("/Initializer/")[0] for name in ran} <= set(first["optimizer_slot_paths"]), ran
    window = notes["window"]
    assert f"ran {len(ran):,} variable initializer" in window and "MemoryCallback(profile_steps=" in window
    third = read_run(traced[0])
    assert "window" not in TraceView(third.trace, BreakdownView(third.breakdown)).peak_notes


FC1_KERNEL = 3136 * 1024 * 4  # LeNet's largest weight (Keras' own shape for fc1), float32


def _check_every_basis(result) -> bool:
    """Every line's arithmetic gives its figure; whether an update's scratch was kept at one buffer of the
    largest weight (fc1's kernel) rather than scaled below it."""
    floored = False
    for line in result["basis"]:
        if line["category"] in result["unknown"]:
            continue
        assert line["projected_bytes"] == result["by_category"][line["category"]], line
        value, slack = basis_arithmetic(line["formula"])
        assert abs(value - line["projected_bytes"]) <= slack + 1, (line, value)
        if "kept up to the largest weight's lr x grad" in line["formula"]:
            assert line["projected_bytes"] <= FC1_KERNEL + 1, line  # never above one buffer of fc1's kernel
            floored = floored or abs(line["projected_bytes"] - FC1_KERNEL) <= 1
    return floored


def test_every_basis_gives_the_figure_beside_it_where_the_peak_moves_too(traced, tmp_path):
    """Issue 39: a projected peak at another moment of the step than the traced one takes each category
    there, and its basis line must say that moment's arithmetic, not the traced peak's. Every line of
    every projection here (and of a first-step trace, whose state the step itself creates) gives, to its
    printed rounding, the figure the API, the CLI and the tab show beside it."""
    _run(str(tmp_path / "lenet_first"), 32, "--profile-steps", "1,1")
    moved = floored = said_moved = 0
    for logdir in (traced[0], str(tmp_path / "lenet_first")):
        logged = read_run(logdir)
        # 1 and 4096: the batch-carrying buffers shrink to nothing or outweigh the rest, so the projected peak
        # falls where they do, whatever order this run's executor chose (a CI run once moved none of 1..128)
        for batch in (None, 1, 8, 128, 4096):
            for optimizer in (None, "SGD", "momentum", "Adafactor"):
                for policy in (None, "mixed_float16"):
                    result = project(logged.trace, logged.breakdown, WhatIf(batch, optimizer, policy))
                    floored += _check_every_basis(result)
                    if result["peak_moved"]:  # each line's bytes are the trace's at the projected peak's moment
                        moved += 1
                        timeline = logged.trace.timeline
                        at = timeline.t_us.index(result["peak_time_us"])
                        assert result["peak_time_us"] != result["traced"]["peak_time_us"]
                        for line in result["basis"]:
                            if (line["how"] == "scaled" and line["category"] not in result["unknown"]
                                    and line["category"] in STEP_ONLY_CATEGORIES):
                                then = sum(float(m.group(1)) * UNIT[m.group(2)] for m in re.finditer(
                                    SIZE + " (?:carry|do not)", line["formula"]))
                                assert abs(then - timeline.by_category[line["category"]][at]) <= 0.02 * 2**20
                            # a figure not scaled says "kept" only where it is the traced peak's, else "moved"
                            if line["how"] in ("kept", "moved") and line["category"] not in result["unknown"]:
                                same = line["projected_bytes"] == line["traced_bytes"]
                                assert line["how"] == ("kept" if same else "moved"), line
                                assert same or "at the traced peak" in line["formula"], line  # and says from what
                                said_moved += not same
    assert moved, "no projection moved the peak: nothing here checks the moved case"
    assert said_moved, "no figure moved with the peak: nothing here checks the 'moved' word"
    assert floored, "no projection kept an update buffer of the largest weight: nothing checks it"


@pytest.mark.quiet
@pytest.mark.parametrize("optimizer", ["SGD", "momentum"])
def test_another_optimizer_against_a_real_run_of_it(traced_in_order, tmp_path, optimizer):
    """Adam's traces asked for SGD, plain and with momentum, the median of five traces' figures against the median
    of TensorFlow's allocator peaks of five real runs of each over the same two steps, all ordered and run alone
    (``_run``, ``quiet``). Most real runs of one setting agree (SGD 57.95-61.78 MB, momentum 68.94-73.74), but 5 SGD
    runs in 44 read 34.15-34.33 (13.7 MB held as step 3 began, not 17.7: another order for the whole run, not the
    hash seed's). Measured in three sets: SGD +6.8, +7.7, +9.8%; momentum -2.6, -2.6, -2.5%. From one trace: SGD
    -15.5 ... +9.8% (what BFC held past the variables moves with the order: Adam's traces 4.22-12.10 MiB, SGD runs
    4.25-7.9), momentum -12.8 ... -1.5%, the low ends from the traces in the odd order. Free-running, five Adam
    traces read +1.5 ... -10.5% of SGD runs; CI once read +27% where all three SGD runs peaked low (40.6-45.7 MB).
    SGD's update still makes lr x gradient, a buffer of fc1's kernel's size, where Adam's held 19.75 MiB; a momentum
    run holds nothing past the variables' sizes (its assign takes each new value's buffer), and holds every m x
    momentum at its peak: those the asserts below check."""
    runs = [_ordered_two_steps(str(tmp_path / f"{optimizer}_{i}"), 32, "--optimizer", optimizer.lower())
            for i in range(5)]
    real = runs[0]
    peaks = [max(run["allocator_step_peaks"]) for run in runs]
    projected = _median_projection(traced_in_order, optimizer=optimizer)
    measured = statistics.median(peaks)
    bound = {"SGD": 0.20, "momentum": 0.05}[optimizer]
    assert abs(projected - measured) <= bound * measured, (projected, peaks, _what_the_traces_read(traced_in_order))
    answer = tb_modelmem.estimate(traced_in_order[0], optimizer=optimizer)
    assert answer["by_category"]["optimizer_temporaries"] >= FC1_KERNEL - 1
    assert (answer["by_category"]["held_between_steps"] == 0) == (optimizer == "momentum")
    if optimizer == "momentum":
        # m x momentum needs no gradient: the real run's peak holds one for every slot Keras built (TF's own
        # record of the requests, against the sizes of Keras' own weights, each slot's; an update's lr x
        # gradient, also a Mul, may be there too), and the projection counts them all
        import numpy as np

        from demo.models import seed001_convnet

        buffers = read_run(str(tmp_path / f"{optimizer}_0")).trace.peak_buffers
        early = collections.Counter(asked for op, asked in zip(buffers.column("op"), buffers.column("requested_bytes"))
                                    if re.search(r"/sgd/Mul(_\d+)?$", op))
        slots = collections.Counter(int(np.prod(w.shape)) * 4 for w in seed001_convnet().trainable_weights)
        assert sum(slots.values()) == 8 and sum(n * k for n, k in slots.items()) == real["optimizer_slots"]
        assert not slots - early, (early, slots)
        assert answer["by_category"]["optimizer_temporaries"] >= real["optimizer_slots"]


def test_the_traced_step_projects_to_itself(traced):
    logdir, _ = traced
    logged = read_run(logdir)
    result = project(logged.trace, logged.breakdown, WhatIf())
    assert result["traced"]["batch"] == 32 and result["peak_bytes"] == logged.trace.peak_bytes
    assert sum(result["by_category"].values()) == result["peak_bytes"]


@pytest.mark.quiet
def test_a_larger_batch_against_a_real_run_at_it(traced_in_order, tmp_path):
    """Batch 32 projected to 64, the median of five traces' figures against the median of five real runs' peaks
    over the same two steps, all ordered and run alone (``_run``, ``quiet``; runs 92.7-97.9 MB). Measured in three
    sets: -0.3, +3.2, +2.5%. From one trace, -0.3 ... +3.8%, and -15% from the traces in the odd order (82.98 MB).
    Each real run holds LeNet's weights (TensorFlow's variables, 13,098,536 B). Free-running, the executor's order
    moves a LeNet step's BFC peak by up to ~15% from run to run (benchmarks/bench_projection.py measures the error
    over runs)."""
    runs = [_ordered_two_steps(str(tmp_path / f"lenet_64_{i}"), 64) for i in range(5)]
    assert all(run["weights"] == 13_098_536 for run in runs)
    real = statistics.median(max(run["allocator_step_peaks"]) for run in runs)
    figure = _median_projection(traced_in_order, batch=64)
    assert abs(figure - real) <= 0.10 * real, (figure, real, _what_the_traces_read(traced_in_order))
    # never below a trace's own peak at twice its batch (a trace in the odd order projects 13-16% low: to its
    # own peak, the floor, at most: one here read 77,352,192 B both ways), and above it from the median trace
    peaks = {logdir: tb_modelmem.estimate(logdir)["peak_bytes"] for logdir in traced_in_order}
    assert all(tb_modelmem.estimate(logdir, batch=64)["peak_bytes"] >= peak for logdir, peak in peaks.items())
    typical = sorted(peaks, key=peaks.__getitem__)[len(peaks) // 2]
    projected = tb_modelmem.estimate(typical, batch=64)
    assert projected["peak_bytes"] > peaks[typical]
    grows = {b["category"] for b in projected["basis"] if b["how"] == "scaled"}
    assert {"activations", "inputs"} <= grows


def test_the_band_at_twice_the_batch_is_bfcs_split_rule(traced):
    """The allocator band: BFC hands the largest buffer at the traced peak (its shape as TensorFlow recorded
    it) between its request at the asked batch and the lesser of twice that and 128 MiB more (BFC's split
    rule); at another batch the figure is the band's middle, and the signed chunking row is how far that is
    from the traced chunks scaled."""
    logdir, _ = traced
    projected = tb_modelmem.estimate(logdir, batch=64)
    band = projected["band"]
    dims = [int(d) for d in band["shape"].strip("[]").split(",")]
    asked = math.prod(dims) * 4 * (64 // 32 if dims[0] == 32 else 1)
    assert band["requested_bytes"] == asked and asked <= band["counted_bytes"] < 2 * asked, band
    assert band["slack_bytes"] >= band["counted_bytes"] - asked  # every buffer at its request: the low end
    scaled = projected["peak_bytes"] - projected["by_category"]["allocator_chunking"]
    assert band["low_bytes"] == scaled - band["slack_bytes"]
    most = asked + min(asked, 128 << 20)
    assert band["most_bytes"] == most and not band["copy"]
    assert band["high_bytes"] == scaled + most - band["counted_bytes"]
    assert projected["peak_bytes"] == (band["low_bytes"] + band["high_bytes"]) // 2
    assert sum(projected["by_category"].values()) == projected["peak_bytes"]


@pytest.mark.quiet
def test_ten_percent_past_the_largest_batch_a_real_run_is_over_the_budget(traced_in_order, tmp_path):
    """Issue 54: the search checked against real runs, not against ``project()``: LeNet traced at batch 32, a 200
    MiB budget, a real run at 10% more than the largest batch found is over it (TensorFlow's own high-water mark
    over the step). That a run at the largest batch fits is not checked here, and it does not (docs/WHAT_IF.md:
    242.28 MB at 516): on BFC it does not hold from one run to the next. Even on one inter-op thread
    (``_run(ordered=True)``, where runs of one batch agree: 187.87, 187.84, 187.87 MB at 368) BFC's chunks jump
    between nearby batches and are not monotone in them: 211.29 MB at 509 (the projection read 209.71, -0.74%),
    243.10 at 528, 254.16 at 576 against 242.12 at 634. Ordered and run alone, eight single-step traces found
    502-576 (522 in six; a run at 559 read 246.30 MB), the median of three two-step traces' batches (497-545) 516 in
    three sets (a run at 568 read 246.66-264.53 MB over the same two steps); run beside other tests, CI once found
    346, where a real run at 381 read 189.20 MB. Runs that must fit are checked where the allocator is exact
    (test_projection_torch.py); replicas against real runs on 8 host devices in test_sharded.py."""
    budget = 200 * 2**20
    answers = [tb_modelmem.estimate(logdir, budget="200MiB") for logdir in traced_in_order]
    assert all(a["largest_batch"] and a["largest_batch_note"] == "" for a in answers), answers
    found = int(statistics.median(a["largest_batch"] for a in answers))
    assert found > 32
    over = max(_ordered_two_steps(str(tmp_path / "over"), math.ceil(found * 1.1))["allocator_step_peaks"])
    assert over > budget, (found, over)


def test_what_the_trace_cannot_say_is_unknown_not_zero(traced):
    logdir, _ = traced
    logged = read_run(logdir)
    logged.trace.batch_size = None  # a trace written before traces kept their batch
    result = project(logged.trace, logged.breakdown, WhatIf(batch=64))
    assert result["peak_bytes"] is None and result["by_category"]["activations"] is None
    assert "batch" in result["unknown"]["activations"]
    no_breakdown = project(logged.trace, None, WhatIf(optimizer="SGD"))
    assert no_breakdown["peak_bytes"] is None and "breakdown" in no_breakdown["unknown"]["optimizer_slots"]
    with pytest.raises(ValueError, match="no built-in Keras or torch.optim optimizer 'Adamm'"):
        tb_modelmem.estimate(logdir, optimizer="Adamm")
    with pytest.raises(ValueError, match="a budget must be under 8 EiB"):  # 1e400 is inf as a float
        tb_modelmem.estimate(logdir, budget="1e400")
    with pytest.raises(ValueError, match="batch must be a positive integer up to 1,000,000,000"):
        tb_modelmem.estimate(logdir, batch=10**20)
    with pytest.raises(ValueError, match="policy"):
        tb_modelmem.estimate(logdir, policy="float16")


def test_the_command_line_gives_the_same_numbers(traced):
    logdir, _ = traced
    env = dict(os.environ, PYTHONPATH=REPO)
    done = subprocess.run([sys.executable, "-m", "tb_modelmem.cli", "estimate", logdir, "--batch", "64",
                           "--optimizer", "momentum", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    api = tb_modelmem.estimate(logdir, batch=64, optimizer="momentum")
    assert printed["peak_bytes"] == api["peak_bytes"] and printed["by_category"] == api["by_category"]
    assert isinstance(printed["peak_bytes"], int)
    table = subprocess.run([sys.executable, "-m", "tb_modelmem.cli", "estimate", logdir, "--budget", "300MiB"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert table.returncode == 0 and "largest batch within 314,572,800 B" in table.stdout
    bad = subprocess.run([sys.executable, "-m", "tb_modelmem.cli", "estimate", logdir, "--policy", "float8"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "--policy: invalid choice: 'float8'" in bad.stderr and "Traceback" not in bad.stderr
    bare = subprocess.run([sys.executable, "-m", "tb_modelmem.cli", "estimate", logdir, "--budget", "60"],
                          capture_output=True, text=True, env=env, timeout=120)  # meant 60 GiB: not 60 bytes
    assert bare.returncode == 2 and "say its unit" in bare.stderr and "Traceback" not in bare.stderr, bare.stderr


def test_a_mixed_float16_run_keeps_its_loss_scale_state_under_another_optimizer(tmp_path):
    """A run traced under mixed_float16 (LossScaleOptimizer around Adam): asking for SGD with momentum
    keeps the wrapper's state and drops Adam's, as Keras builds them; asking for float32 drops the wrapper."""
    logdir = str(tmp_path / "lenet_mixed")
    truth = _run(logdir, 16, "--policy", "mixed_float16")
    traced = tb_modelmem.estimate(logdir)
    assert traced["traced"]["optimizer"] == "Adam in LossScaleOptimizer"
    assert traced["traced"]["policy"] != "float32"  # its activations are float16
    assert traced["by_category"]["optimizer_slots"] == truth["optimizer_slots"]
    momentum = tb_modelmem.estimate(logdir, optimizer="momentum")
    real = _real_optimizer_bytes("momentum", "mixed_float16")
    assert momentum["by_category"]["optimizer_slots"] == real["slots"]
    assert momentum["by_category"]["other_state"] == real["scalars"]
    plain = tb_modelmem.estimate(logdir, policy="float32")
    assert plain["by_category"]["other_state"] == _real_optimizer_bytes("Adam")["scalars"]
    # float16 activations twice as wide; where the peak falls in the optimizer's update (batch 16: its
    # temporaries outweigh the activations, whichever order the executor ran) there are none at the peak
    if traced["by_category"]["activations"]:
        assert plain["by_category"]["activations"] > traced["by_category"]["activations"]


def test_without_a_breakdown_the_state_stays_counted_whole(traced):
    """No variable breakdown: a new batch still projects (the variables are in what was in use before
    the step, unsplit); a new optimizer cannot (its slots need the weights' shapes)."""
    logdir, _ = traced
    logged = read_run(logdir)
    with_state = project(logged.trace, logged.breakdown, WhatIf(batch=64))
    without = project(logged.trace, None, WhatIf(batch=64))
    assert without["peak_bytes"] == with_state["peak_bytes"]
    assert without["by_category"]["weights"] is None and "unattributed" in without["unknown"]["weights"]
    assert without["by_category"]["unattributed"] >= with_state["by_category"]["weights"]


def test_the_tab_asks_the_same_question_and_gets_the_same_answer(traced):
    """The plugin's /whatif route (TensorBoard's multiplexer on the same log dir) answers as the API
    does; a bad question is a 400 naming what is wrong."""
    from tests.support.plugin_harness import Served

    logdir, _ = traced
    logged = read_run(logdir)
    tag = logged.source.rpartition(" step ")[0]
    served = Served(logdir)
    body = served.json("/whatif", run=logged.run, tag=tag, batch=64, optimizer="momentum", budget="300MiB")
    api = tb_modelmem.estimate(logdir, batch=64, optimizer="momentum", budget="300MiB")
    assert body["whatif"]["peak_bytes"] == api["peak_bytes"] and body["whatif"]["by_category"] == api["by_category"]
    assert body["budget"]["largest_batch"] == api["largest_batch"] and body["budget"]["bytes"] == 300 * 2**20
    assert "Adam" in body["choices"]["optimizers"] and body["choices"]["policies"][0] == "float32"
    for bad, says in (({"batch": "x"}, "batch must be an integer"), ({"policy": "float8"}, "policy"),
                      ({"optimizer": "<script>"}, "no built-in Keras or torch.optim optimizer"),
                      ({"budget": "lots"}, "not a size"), ({"budget": "1e400"}, "a budget must be under 8 EiB"),
                      ({"batch": "0"}, "batch must be between 1 and"), ({"seq": "0"}, "seq must be between 1 and"),
                      ({"devices": "0"}, "devices must be between 1 and"),
                      ({"batch": "99999999999"}, "batch must be between 1 and 1,000,000,000")):
        response = served.get("/whatif", run=logged.run, tag=tag, **bad)
        assert response.status_code == 400 and says in response.get_data(as_text=True), bad


@pytest.mark.parametrize("model", ["lenet", "transformer"])
def test_an_xla_step_on_a_gpu_projects_to_8x_its_batch(model):
    """Keras 3 on JAX on an H100 (tests/fixtures/keras_jax_batches.py): the batch-32 step's profile, with no
    breakdown (the program's parameters say what state they hold), projected to batch 256 against the run at
    256: its GPU allocator's peak, read from its profile with TensorFlow's own xplane_pb2."""
    import gzip

    from tb_modelmem.readers import xspace
    from tests.support import xplane_truth

    fixtures = os.path.join(REPO, "tests", "fixtures")

    def profile(batch: int) -> bytes:
        with gzip.open(os.path.join(fixtures, f"keras_jax_{model}_b{batch}.xplane.pb.gz")) as f:
            return f.read()

    with open(os.path.join(fixtures, "keras_jax_batches.truth.json")) as f:
        runs = json.load(f)["runs"][model]
    base = xspace.reduce_xspace(xspace.load_xspace(profile(32)))
    assert base.batch_size == 32 and base.resident["weight"] == runs["32"]["weight_bytes"]
    measured = max(after for after, _ in xplane_truth.read(profile(256)).in_use["GPU_0_bfc"])
    assert measured <= runs["256"]["peak_bytes_in_use"]  # the step's peak; JAX's own count is the process's
    projected = project(base, None, WhatIf(batch=256))
    assert projected["unknown"] == {} and abs(projected["peak_bytes"] - measured) <= 0.05 * measured, (
        projected["peak_bytes"], measured)


def test_each_buffer_at_the_peak_says_what_it_asked_for(traced):
    """Issue 30 item 1: a buffer's bytes are the BFC allocator's chunk (they sum to the peak); beside them
    what the op asked for, which is its tensor's bytes: shape x 4 for float32."""
    import math

    logdir, _ = traced
    buffers = read_run(logdir).trace.peak_buffers
    rows = list(zip(buffers.column("shape"), buffers.column("dtype"), buffers.column("bytes"),
                    buffers.column("requested_bytes")))
    asked = [(shape, size, requested) for shape, dtype, size, requested in rows
             if requested is not None and dtype == "float32" and shape.startswith("[") and shape != "[]"]
    assert len(asked) >= 5
    for shape, size, requested in asked:
        assert requested == math.prod(int(d) for d in shape.strip("[]").split(",")) * 4, shape
        assert size >= requested
    assert any(size > requested for _, size, requested in asked)  # the allocator rounds, or hands out a whole chunk


def test_what_cannot_be_asked_says_so_once_and_names_what_is_there(traced, tmp_path):
    """A new user's mistakes (found trying the CLI): a misspelt run lists the runs that have a traced step
    (the asked one alone was read before: "none"); a model file is not a log dir; --seq on LeNet, whose input
    is no sequence, leaves every step category unknown for one reason, said once."""
    logdir, _ = traced
    run = tb_modelmem.estimate(logdir)["run"]
    with pytest.raises(ValueError, match=rf"run 'trian' has no traced step \(runs with one: {re.escape(run)}\)"):
        tb_modelmem.estimate(logdir, run="trian")
    model = tmp_path / "model.keras"
    model.write_bytes(b"PK")
    with pytest.raises(ValueError, match="a file, not a log dir"):
        tb_modelmem.estimate(str(model))
    text = subprocess.run([sys.executable, "-m", "tb_modelmem.cli", "estimate", logdir, "--seq", "256"], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=True).stdout
    unknown = [line for line in text.splitlines() if line.startswith("unknown ")]
    assert len(unknown) == 1 and "activations" in unknown[0] and "gradients" in unknown[0], unknown
    assert "projected peak: unknown" in text
    assert "\nactivations: unknown (why: below)\n" in text  # the reason once, not once per category


def test_a_budget_also_says_the_batch_whose_allocator_band_fits(traced):
    """A new user took the largest batch within a budget at its word (its peak at 199.9 of 200 MiB): the
    answer also gives the largest batch whose allocator band's high end fits, each checked against the
    projection at it and at the next batch."""
    logdir, _ = traced
    budget = 200 * 2**20
    answer = tb_modelmem.estimate(logdir, budget=budget)
    found, cautious = answer["largest_batch"], answer["cautious_batch"]
    assert 0 < cautious <= found, (cautious, found)
    peak_at_found = tb_modelmem.estimate(logdir, batch=found)["peak_bytes"]
    assert answer["largest_batch_peak_bytes"] == peak_at_found <= budget
    assert tb_modelmem.estimate(logdir, batch=found + 1)["peak_bytes"] > budget

    at, after = (tb_modelmem.estimate(logdir, batch=b) for b in (cautious, cautious + 1))
    assert max(at["peak_bytes"], at["band"]["high_bytes"] if at["band"] else 0) <= budget
    if after["band"]:  # none where the next batch's peak moves to another moment than the traced one
        assert max(after["peak_bytes"], after["band"]["high_bytes"]) > budget
    text = subprocess.run([sys.executable, "-m", "tb_modelmem.cli", "estimate", logdir, "--budget", "200MiB"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=True).stdout
    assert (f"largest batch within {budget:,} B (200.0 MiB): {found:,}, projected {peak_at_found:,} B "
            f"({(budget - peak_at_found) / 2**20:,.1f} MiB to spare)") in text
    assert cautious == found or f"; {cautious:,} with the allocator band's high end within it too" in text
