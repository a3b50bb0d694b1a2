"""``tb-modelmem``: inspect a model file or checkpoint, benchmark how each save format loads, or
estimate a logged step's peak at another batch size, optimizer, precision or replica count.

Errors about the user's input (a missing, corrupt or foreign file) are one line on
stderr naming the file and exit code 2, never a traceback: the CLI is often pointed at the
wrong thing. No arguments at all print the usage, also with exit code 2. A reader that goes
away (``tb-modelmem inspect X | head``) ends it quietly, as it ends ``cat``. ``inspect``
never imports TensorFlow (only ``--logdir`` does).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import textwrap
from typing import Any, Dict, List, NoReturn, Optional, Sequence

from tb_modelmem.messages import first_line
from tb_modelmem.rules.projection import CAUTIOUS_WORDS
from tb_modelmem.rules.projection_state import POLICIES, SHARDINGS
from tb_modelmem.rules.rollup import layer_rollup
from tb_modelmem.schema.names import ROLES
from tb_modelmem.schema.records import Breakdown, OpTrace, bytes_by_role
from tb_modelmem.text_table import text_table

EXIT_BAD_INPUT = 2
EXIT_PIPE_CLOSED = 128 + signal.SIGPIPE  # what a shell reports for cat stopped by a closed pipe


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors exit 2 with one line like every other bad input."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tb-modelmem", description="Where did my memory go? Model files, checkpoints, load cost.")
    sub = parser.add_subparsers(dest="command", required=True)
    ins = sub.add_parser("inspect", help="break down a model file or checkpoint by role and layer, to the byte")
    ins.add_argument("path", help="checkpoint prefix or folder, .keras, .h5/.hdf5, .weights.h5, SavedModel folder, "
                                  "PyTorch .pt/.pth, or a PyTorch memory snapshot .pickle/.pickle.gz")
    ins.add_argument("--logdir", help="also write the breakdown for the TensorBoard tab: a run per file, named after "
                                      "it (LOGDIR/FILE_NAME), tag 'inspect'")
    ins.add_argument("--run", help="the run under --logdir to write to instead of the file's name ('.': LOGDIR itself)")
    ins.add_argument("--json", action="store_true", help="print a machine-readable report instead of tables")
    bench = sub.add_parser("loadbench", help="save a model in each format and measure loading in fresh processes")
    bench.add_argument("model", help="a keras.applications name (built with weights=None) or a saved model path")
    bench.add_argument("--logdir", help="write the results as a summary for the TensorBoard tab")
    bench.add_argument("--repeats", type=int, default=3, help="fresh-process loads per format and mode (median)")
    bench.add_argument("--workdir", help="keep the saved files here (default: a temporary folder)")
    est = sub.add_parser("estimate", help="project a logged step's peak to another batch, sequence length, "
                                          "optimizer, precision, device count or sharding")
    est.add_argument("logdir", help="the log dir a run traced a step into (MemoryCallback, trace(), a profile)")
    est.add_argument("--run", help="the run (the folder under LOGDIR: train); needed when several have a step")
    est.add_argument("--batch", type=int, help="samples in one forward pass over all devices (split over "
                                                "--devices): under gradient accumulation a micro-batch, as traced")
    est.add_argument("--seq", type=int, help="tokens per sample (the traced step's input [batch, seq] gives the "
                                             "length it ran): what carries it grows with it, attention scores "
                                             "with its square")
    est.add_argument("--optimizer", help="a built-in Keras optimizer (Adam, SGD, AdamW, ...) or momentum; on a "
                     "PyTorch run a torch.optim class, its implementation named or not ('AdamW fused', "
                     "'Adam foreach')")
    est.add_argument("--policy", choices=list(POLICIES),
                     help="the Keras mixed-precision policy")
    est.add_argument("--devices", "--replicas", dest="replicas", type=int, default=1,
                     help="data-parallel devices the batch is split over (each with the whole state unless --shard)")
    est.add_argument("--shard", choices=list(SHARDINGS),
                     help="what else is split over --devices: optimizer (ZeRO-1), gradients (ZeRO-2), "
                          "weights (ZeRO-3, FSDP); replicated: nothing")
    est.add_argument("--budget", help="a device's memory (16GiB): also find the largest batch that fits")
    est.add_argument("--json", action="store_true", help="print one JSON object (peak_bytes, by_category, ...)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``tb-modelmem`` console script; returns the exit code."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:  # no command at all: show what the commands are, not only that one is missing
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    args = parser.parse_args(argv)
    try:
        code = {"inspect": _inspect, "loadbench": _loadbench, "estimate": _estimate}[args.command](args)
        sys.stdout.flush()  # here, not at exit: a closed pipe must be caught below
        return code
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # bad input of any kind: one line, no traceback
        sys.stderr.write(f"tb-modelmem: error: {first_line(e, limit=None)}\n")
        return EXIT_BAD_INPUT


def _reader_gone() -> int:
    """The reader of stdout went away: no message, and nothing more for Python to flush at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_PIPE_CLOSED


def _inspect(args: argparse.Namespace) -> int:
    from tb_modelmem.readers.bounded import InspectError
    from tb_modelmem.readers.model_file import read_path

    run = _run_of(args)  # a usage error before any reading
    if args.path.endswith((".pickle", ".pickle.gz", ".pt.trace.json", ".pt.trace.json.gz")):  # an OpTrace
        return _inspect_trace(args, run)
    try:
        bd = read_path(args.path)
    except InspectError:
        raise
    except Exception as e:  # anything else a file made a reader raise still names the file
        raise InspectError(f"{args.path}: cannot read ({type(e).__name__}: {first_line(e)})") from None
    if args.logdir:
        run_dir = os.path.normpath(os.path.join(args.logdir, run))
        if os.path.isdir(run_dir) and any("tfevents" in name for name in os.listdir(run_dir)):
            sys.stderr.write(f"tb-modelmem: note: {run_dir} already has event files: if they hold an 'inspect' summary "
                             f"(of another {run}?), the tab shows one of the two; --run NAME writes this one apart\n")
        _write_summary(run_dir, "inspect", bd)
    if args.json:
        print(json.dumps(report(bd, args.path), indent=2))
    else:
        print(format_breakdown(bd, args.path))
    return 0


def _inspect_trace(args: argparse.Namespace, run: str) -> int:
    """A PyTorch memory snapshot or profiler trace: the summary the tab's Ops view opens with."""
    from tb_modelmem.readers.torch_snapshot import read_snapshot_file
    from tb_modelmem.readers.torch_trace import read_trace_file

    if args.path.endswith((".pickle", ".pickle.gz")):
        trace = read_snapshot_file(args.path)
    else:
        trace = read_trace_file(args.path)
    if args.logdir:
        _write_summary(os.path.normpath(os.path.join(args.logdir, run)), "inspect", trace)
    if args.json:
        print(json.dumps(snapshot_report(trace, args.path), indent=2))
    else:
        print(format_snapshot(trace, args.path))
    return 0


def snapshot_report(trace: OpTrace, path: str) -> Dict[str, Any]:
    """The ``--json`` report of a memory snapshot or a profiler trace: the peak, its categories, the
    allocator, the ops (a snapshot's are its allocating sites), and a timed trace's op count and time."""
    by_category: Dict[str, int] = {}
    for size, category in zip(trace.peak_buffers.column("bytes"), trace.peak_buffers.column("category")):
        by_category[category] = by_category.get(category, 0) + size
    sites = sorted(zip(trace.ops.column("name"), trace.ops.column("alloc_bytes"), trace.ops.column("calls")),
                   key=lambda s: -s[1])
    return {"path": path, "source": trace.source, "devices": trace.devices, "steps": trace.steps,
            "op_count": len(trace.ops), "total_time_us": sum(trace.ops.column("time_us")) if trace.timed else None,
            "peak_bytes": trace.peak_bytes,
            "peak_time_us": trace.peak_time_us, "peak_by_category": by_category, "allocators": trace.allocators,
            "note": trace.allocations_note,
            "sites": [{"site": n, "alloc_bytes": b, "allocations": c} for n, b, c in sites],
            "peak_blocks": [{"site": op, "bytes": b, "category": c} for op, b, c in zip(
                trace.peak_buffers.column("op"), trace.peak_buffers.column("bytes"),
                trace.peak_buffers.column("category"))]}


def format_snapshot(trace: OpTrace, path: str) -> str:
    """Terminal report of a memory snapshot."""
    r = snapshot_report(trace, path)
    # the allocator that says what it reserved (a snapshot's one device, a CUDA trace's caching allocator)
    alloc = next((a for a in trace.allocators or () if "reserved_at_peak_bytes" in a),
                 trace.allocators[0] if trace.allocators else {})
    timed = (f", {r['op_count']:,} ops, {r['total_time_us'] / 1000:,.2f} ms op time over {trace.steps} traced "
             f"step{'s' if trace.steps != 1 else ''}" if trace.timed else "")
    out = [f"{path}: {trace.source}, {', '.join(trace.devices) or 'no device recorded'}{timed}", "",
           f"peak allocated: {_fmt(trace.peak_bytes)} at {trace.peak_time_us:,.0f} us into the window"]
    if "reserved_at_peak_bytes" in alloc:
        out.append(f"reserved at the peak: {_fmt(alloc['reserved_at_peak_bytes'])} "
                   f"({alloc['fragmentation_at_peak']:.1%} of it not allocated: cached free blocks, which an "
                   f"out-of-memory error counts too); max reserved {_fmt(alloc['max_reserved_bytes'])}"
                   + (f", {alloc['segments_at_dump']} segments at the dump" if "segments_at_dump" in alloc else ""))
    out += ["", text_table(["category at the peak", "bytes"],
                           [[c, f"{b:,}"] for c, b in sorted(r["peak_by_category"].items(), key=lambda x: -x[1])],
                           left=1)]
    out += ["", text_table(["allocating site", "allocations", "bytes"],
                           [[s["site"], f"{s['allocations']:,}", f"{s['alloc_bytes']:,}"] for s in r["sites"][:20]],
                           left=1)]
    if r["note"]:
        out += ["", r["note"]]
    return "\n".join(out)


def _run_of(args: argparse.Namespace) -> str:
    """The run ``inspect --logdir`` writes to: one per file, named after it, so that several files
    inspected into one log dir are each shown (and can be compared side by side); or ``--run``."""
    if args.run is None:
        return os.path.basename(os.path.abspath(args.path))  # "ckpt-3", "model.keras", a SavedModel folder's name
    if not args.logdir:
        raise ValueError("--run names a run under --logdir: give --logdir too")
    parts = os.path.normpath(args.run).split(os.sep)
    if not args.run or os.path.isabs(args.run) or parts[0] == "..":
        raise ValueError(f"--run {args.run!r}: expected a run name under --logdir (such as 'adam/ckpt-3', or '.')")
    return args.run


def _loadbench(args: argparse.Namespace) -> int:
    from tb_modelmem import loadbench

    if args.repeats < 1:
        raise ValueError("--repeats must be at least 1")
    bench = loadbench.run(args.model, repeats=args.repeats, workdir=args.workdir)
    print(loadbench.format_table(bench))
    if args.logdir:
        _write_summary(args.logdir, "loadbench", bench)
    return 0


def _estimate(args: argparse.Namespace) -> int:
    from tb_modelmem.whatif import estimate

    result = estimate(args.logdir, args.run, args.batch, args.optimizer, args.policy, args.replicas, args.budget,
                      args.shard, args.seq)
    print(json.dumps(result, indent=2) if args.json else format_estimate(result))
    return 0


def _estimate_header(result: Dict[str, Any]) -> List[str]:
    """What was read: the run, its trace and breakdown, and each breakdown passed over as not readable."""
    run = "the log dir itself" if result["run"] == "." else result["run"]  # TensorBoard's name for its root
    joined = f", breakdown {result['breakdown']}" if result["breakdown"] else ", no breakdown"
    return [f"{run}: {result['trace']}{joined}",
            *(f"  passed over (not readable): {why}" for why in result.get("breakdowns_unreadable", [])), ""]


def format_estimate(result: Dict[str, Any]) -> str:
    """Terminal report of a projection: each category traced and projected, how, and the peak."""
    def size(n: Optional[int], unit: str = "") -> str:
        return "unknown" if n is None else f"{n:,}{unit}"

    traced = result["traced"]
    out = _estimate_header(result)
    # where the projected peak falls at another moment, what the traced step held then: each row's basis
    then = any(b.get("traced_then_bytes") is not None for b in result["basis"])
    out.append(text_table(["category", "how", "traced bytes"] + ["traced then"] * then + ["projected bytes"], [
        [b["category"], b["how"], size(b["traced_bytes"])] + [size(b.get("traced_then_bytes"))] * then
        + [size(b["projected_bytes"])] for b in result["basis"]], left=2))
    unknown = result["unknown"]  # each reason once, below, naming every category it leaves unknown
    out += [""] + [f"{b['category']}: " + ("unknown (why: below)" if unknown.get(b["category"]) == b["formula"]
                                           else b["formula"]) for b in result["basis"]]
    peak = result["peak_bytes"]
    per = result["batch_per_replica"]
    out += ["", f"projected peak: {size(peak, ' B')}" + (f" ({peak / 2**20:,.1f} MiB)" if peak is not None else "")
            + (f" per device, batch {per} on each of {result['replicas']}"
               + (f", {SHARDINGS[result['shard']]}" if result.get("shard") else "") if result["replicas"] > 1 else
               f" at batch {per}" if per else "")
            + (f", sequence {result['seq']}" if result.get("seq") else "")
            + (f", under {result['optimizer']}" if result.get("optimizer") else "")
            + f"; traced: {size(traced.get('peak_bytes'), ' B')} at batch {traced.get('batch') or 'unknown'}"
            + (f", sequence {traced['seq']}" if traced.get("seq") else "")
            + (f", under {traced['optimizer']}" if result.get("optimizer") and traced.get("optimizer") else "")]
    steps = result.get("steps") or []
    if len(steps) > 1:
        low, high = min(s["peak_bytes"] for s in steps), max(s["peak_bytes"] for s in steps)
        out.append(f"the {len(steps)} traced steps peaked at "
                   + ", ".join(f"{s['traced_peak_bytes'] / 2**20:,.1f}" for s in steps)
                   + f" MiB: each projects to {low / 2**20:,.1f}-{high / 2**20:,.1f} MiB, a spread of "
                   f"{100 * (high - low) / high:.1f}% (how far one step's trace can be trusted)")
    band = result.get("band")
    if band:
        largest = f"{band['op'] or 'unnamed'} ({band['shape'] or 'no shape'} as traced)"
        if band.get("copy"):
            largest = f"the loss's float32 copy of {largest}"
        out.append(f"allocator band: {band['low_bytes'] / 2**20:,.1f}-{band['high_bytes'] / 2**20:,.1f} MiB: a BFC "
                   "allocator hands a request a free chunk whole when it is under twice the request and less than "
                   "128 MiB over it, so a buffer holds from its size to the lesser of twice it and 128 MiB more, "
                   "and runs of one setting differ by which it gets: from every buffer at the traced peak handed "
                   f"just its request ({band['slack_bytes'] / 2**20:,.1f} MiB less) to the largest, {largest}, "
                   f"asking {band['requested_bytes'] / 2**20:,.1f} MiB here (counted at "
                   f"{band['counted_bytes'] / 2**20:,.1f} MiB), handed the most BFC would: "
                   f"{band['most_bytes'] / 2**20:,.1f} MiB"
                   + ("; where the asked setting changes the step or the state, the projected peak is the band's "
                      "middle (the allocator_chunking line)"
                      if result["by_category"].get("allocator_chunking") is not None else ""))
    if result.get("peak_moved"):
        out.append(f"the projected peak falls {result['peak_time_us'] / 1000:,.2f} ms into the trace, the traced "
                   f"one at {traced['peak_time_us'] / 1000:,.2f} ms: each projected figure is what is in use then, "
                   "and its basis is taken there, on what the traced step held then (traced then); traced bytes "
                   "are the traced peak's (no allocator band: the trace keeps the buffers of its own peak only)")
    if result.get("allocations_note"):
        out.append(f"note: {result['allocations_note']}")
    reasons: Dict[str, List[str]] = {}  # one line per reason, naming every category it leaves unknown
    for category, reason in unknown.items():
        reasons.setdefault(reason, []).append(category)
    for reason, categories in reasons.items():
        out.append(f"unknown {', '.join(categories)}: {reason}")
    reserved = result.get("reserved")
    if reserved:
        out.append("reserved by the caching allocator: " + ("unknown" if reserved["bytes"] is None else
                   f"{reserved['bytes']:,} B") + f" (traced {reserved['traced_bytes']:,} B): {reserved['how']}")
    if result.get("caveat") and peak is not None:
        out.append(f"how far to trust it: {result['caveat']}")
    if "largest_batch" in result:
        found, note = result["largest_batch"], result.get("largest_batch_note")
        cautious = result.get("cautious_batch")
        budget, at = result["budget_bytes"], result.get("largest_batch_peak_bytes")
        out.append(f"largest batch within {budget:,} B ({budget / 2**20:,.1f} MiB): "
                   + ("none" if found is None else "none fits" if found == 0 else f"{found:,}")
                   + (f", projected {at:,} B ({(budget - at) / 2**20:,.1f} MiB to spare)" if found and at else "")
                   + (f" ({note})" if note else "")
                   + (f"; {cautious:,} with {CAUTIOUS_WORDS[result.get('cautious_by') or 'band']} within it too"
                      if cautious is not None and found and cautious < found else ""))
    return "\n".join(out)


def _write_summary(logdir: str, name: str, record: Any) -> None:
    """One summary into a new event file of ``logdir``, through the package's own writer: no TensorFlow
    (``inspect --logdir`` on a machine without it, and 3 s less where it is)."""
    from tb_modelmem import summary
    from tb_modelmem.writer import FileWriter

    try:
        writer = FileWriter(logdir)
        ok = summary.write(name, record, step=0, writer=writer)
    except OSError as e:
        raise RuntimeError(f"{logdir}: cannot write summaries there ({first_line(e)})") from None
    if not ok:
        raise RuntimeError(f"could not write the summary to {logdir}")


def report(bd: Breakdown, path: str) -> Dict[str, Any]:
    """The ``--json`` report: ``total_bytes`` is the variables' bytes; plus overhead = ``file_bytes``."""
    total = sum(v.bytes for v in bd.variables)
    overhead = sum(o["bytes"] for o in bd.overhead)
    return {
        "path": path, "source": bd.source, "model_name": bd.model_name,
        "file_bytes": bd.file_bytes, "total_bytes": total, "overhead_bytes": overhead,
        "reconciled": bd.file_bytes == total + overhead,
        "by_role": bytes_by_role(bd.variables), "optimizer": bd.optimizer, "overhead": bd.overhead,
        "variables": [v.to_dict() for v in bd.variables],
    }


def _fmt(n: int) -> str:
    return f"{n:,} B ({n / 2**20:,.2f} MiB)"


OVERHEAD_WIDTH = 96  # characters of an overhead line before it wraps: the table fits a terminal


def format_breakdown(bd: Breakdown, path: str, max_variables: int = 40) -> str:
    """Terminal report: by role, by layer, largest variables, optimizer, reconciliation."""
    roles = bytes_by_role(bd.variables)
    total = sum(roles.values())
    out = [f"{path}  [{bd.source}]", ""]
    out.append(text_table(["role", "bytes", "MiB", "share", "variables"], [
        [role, f"{b:,}", f"{b / 2**20:,.2f}", f"{100 * b / total:.1f}%" if total else "-",
         str(sum(1 for v in bd.variables if v.role == role))] for role, b in roles.items()]))
    layers = sorted(layer_rollup(bd), key=lambda row: -row["total_bytes"])
    out += ["", text_table(["layer", *ROLES, "total"], [
        [row["name"], *(f"{row['bytes'][r]:,}" for r in ROLES), f"{row['total_bytes']:,}"] for row in layers])]
    biggest = sorted(bd.variables, key=lambda v: -v.bytes)[:max_variables]
    out += ["", text_table(["variable", "shape", "dtype", "role", "slot of", "bytes"], [
        [v.name, str(v.shape), v.dtype, v.role + (f" ({v.slot})" if v.slot else ""), v.slot_of or "", f"{v.bytes:,}"]
        for v in biggest])]
    if len(bd.variables) > max_variables:
        out.append(f"... {len(bd.variables) - max_variables} smaller variables not shown (use --json for all)")
    out += ["", "optimizer: " + _describe_optimizer(bd.optimizer), ""]
    overhead = sum(o["bytes"] for o in bd.overhead)
    out.append(text_table(["overhead", "bytes"], [  # a long line wrapped, its bytes on its first
        [part, f"{o['bytes']:,}" if i == 0 else ""] for o in bd.overhead
        for i, part in enumerate(textwrap.wrap(str(o["what"]), OVERHEAD_WIDTH, subsequent_indent="  ") or [""])]))
    if bd.file_bytes is not None:
        status = "reconciled to the byte" if total + overhead == bd.file_bytes else "DOES NOT RECONCILE"
        out += ["", f"variables {total:,} B + overhead {overhead:,} B = {total + overhead:,} B; "
                    f"on disk {_fmt(bd.file_bytes)}: {status}"]
    return "\n".join(out)


def _describe_optimizer(opt: Optional[Dict[str, Any]]) -> str:
    if not opt:
        return "none stored"
    from tb_modelmem.plugin.views.breakdown import optimizer_summary  # the tab's text: float32 rates as 0.001

    summary = optimizer_summary(opt) if opt.get("class_name") else None
    if summary is not None:
        described = summary["text"]
    else:  # a config the tab cannot read either: its plain values, as stored
        stored = opt.get("config")
        config: Dict[str, Any] = stored if isinstance(stored, dict) else {}
        shown = ", ".join(f"{k}={v}" for k, v in config.items() if v is not None and k != "name")
        name = opt.get("class_name") if isinstance(opt.get("class_name"), str) else ""
        described = f"{name or 'class not recorded'}({shown})"
    extra = f"; slots: {', '.join(opt['slots'])}" if opt.get("slots") else ""
    where = f"  [{opt['recorded_in']}]" if opt.get("recorded_in") else ""
    return f"{described}{extra}{where}"


if __name__ == "__main__":
    sys.exit(main())
