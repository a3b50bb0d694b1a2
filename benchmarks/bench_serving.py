"""What serving a 200,000-op trace costs, on both TensorBoard loaders, against decoding its blob.

Writes ``--runs`` runs, each a 200,000-op trace of one training step with a 10,000-variable
breakdown beside it (benchmarks/synthetic.py), starts a real ``tensorboard`` process with
``--load_fast=true`` and another with ``--load_fast=false``, and times over HTTP:

  first   /ops       the first request for a run's trace (read both blobs, decode, join, answer)
  repeat  /ops       the same request again (from the store)
  first   /breakdown the breakdown's own first request (another process, so it is not cached)
  repeat  /breakdown

each against the bare decode of the same blob (zstd and the stdlib's json.loads: what reading
it costs any reader; the plugin parses with orjson, and its bare decode is printed beside) timed
in this process, interleaved; medians. On ``--load_fast=true`` also TensorBoard's own read of the breakdown's
blob, asked by this process of the same data server over gRPC just before (the floor under
any plugin's first request: the plugin reads through the same server; ``bench_data_server``
shows why it is sometimes ~45 ms). Then TensorBoard's RSS after opening every run, against its
RSS before and the plugin's cache bound (--modelmem_cache_mb). First, where a first /breakdown's
time goes in process (decode and check, the view, the gzipped answer), against the same bare
decode.

    python -m benchmarks.bench_serving [--runs 10] [--ops 200000] [--variables 10000] [--cache-mb 512]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Callable, Dict, List, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import orjson
import psutil
import zstandard

from benchmarks import synthetic
from tb_modelmem import summary
from tb_modelmem.schema import metadata, payload
from tests.support.plugin_harness import write_events
from tests.support.tensorboard_process import TensorBoardProcess


def fetch(tb: TensorBoardProcess, route: str, **params: str) -> Tuple[float, int]:
    """Seconds until the 200 answer of a route (following 202s), and the answer's bytes."""
    url = f"{tb.url}/data/plugin/modelmem/{route}?{urllib.parse.urlencode(params)}"
    started = time.perf_counter()
    while True:
        with urllib.request.urlopen(url, timeout=600) as response:
            body = response.read()
            if response.status == 200:
                return time.perf_counter() - started, len(body)
        time.sleep(0.05)


def bare(blob: bytes, loads: Callable[[bytes], object] = json.loads) -> float:
    """Seconds to decompress ``blob`` and parse its JSON (the stdlib's ``json.loads`` unless told)."""
    started = time.perf_counter()
    loads(zstandard.ZstdDecompressor().decompress(blob))
    return time.perf_counter() - started


def breakdown_parts(blob: bytes, rounds: int = 15) -> None:
    """A first /breakdown's steps in this process, each against the bare decode, interleaved; medians."""
    from tb_modelmem.gc_paused import paused_gc
    from tb_modelmem.plugin import plugin
    from tb_modelmem.plugin.views import breakdown, pager

    record = payload.decode(blob)
    view = breakdown.BreakdownView(record)

    def answer() -> bytes:
        page = view.variables.page(offset=0, limit=pager.PAGE, sort=None, order="desc", query="",
                                   fields=breakdown.VARIABLE_FIELDS)
        return plugin._gzipped_json(dict(view.summary(), variables=page))

    steps = {"decode and check": lambda: payload.decode(blob), "view (roll-up, layer tree)":
             lambda: breakdown.BreakdownView(record), "answer (JSON, gzip)": answer}
    times: Dict[str, List[float]] = {k: [] for k in ("bare", "bare, orjson", *steps)}
    with paused_gc():  # as the plugin builds them
        for _ in range(rounds):
            times["bare"].append(bare(blob))
            times["bare, orjson"].append(bare(blob, orjson.loads))
            for name, step in steps.items():
                started = time.perf_counter()
                step()
                times[name].append(time.perf_counter() - started)
    base = statistics.median(times["bare"])
    print(f"first /breakdown in process (medians of {rounds}, interleaved; bare decode {base * 1e3:.1f} ms):")
    for name in ("bare, orjson", *steps):
        _row(name, statistics.median(times[name]), base)
    print(f"  answer: {len(answer()):,} B gzipped")


def data_server(tb: TensorBoardProcess) -> psutil.Process:
    """TensorBoard's Rust data server (``--load_fast=true``): its one child that listens."""
    (server,) = [p for p in psutil.Process(tb.pid).children(recursive=True)
                 if any(c.status == psutil.CONN_LISTEN for c in p.net_connections(kind="tcp"))]
    return server


def data_server_read(tb: TensorBoardProcess) -> Callable[[str, str], float]:
    """Seconds TensorBoard's data server (``--load_fast=true``) takes to give a tag's latest blob
    to a gRPC client: the reads TensorBoard's GrpcDataProvider makes for a plugin."""
    import grpc
    from tensorboard import context
    from tensorboard.data import grpc_provider, provider

    (port,) = {c.laddr.port for c in data_server(tb).net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
    data = grpc_provider.GrpcDataProvider(f"127.0.0.1:{port}", grpc_provider.make_stub(
        grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 2**28)])))

    def read(run: str, tag: str) -> float:
        started = time.perf_counter()
        sequences = data.read_blob_sequences(context.RequestContext(), experiment_id="",
                                             plugin_name=metadata.PLUGIN_NAME, downsample=1,
                                             run_tag_filter=provider.RunTagFilter([run], [tag]))
        data.read_blob(context.RequestContext(), blob_key=sequences[run][tag][-1].values[0].blob_key)
        return time.perf_counter() - started

    return read


def measure(load_fast: bool, logdir: str, runs: int, blobs: Dict[str, bytes], cache_mb: int) -> Dict[str, float]:
    with TensorBoardProcess(logdir, load_fast=load_fast, extra_args=[f"--modelmem_cache_mb={cache_mb}"]) as tb:
        tb.wait_for_tab(expect_tags=2 * runs)
        process = psutil.Process(tb.pid)
        before = process.memory_info().rss
        results: Dict[str, List[float]] = {k: [] for k in ("ops1", "ops2", "bd1", "bd2", "bare_ops", "bare_bd")}
        read = data_server_read(tb) if load_fast else None
        if read:
            results["read_bd"] = []
        size = 0
        for r in range(runs):
            results["bare_bd"].append(bare(blobs["storage"]))
            if read:
                results["read_bd"].append(read(f"run{r}", "storage"))
            seconds, _ = fetch(tb, "breakdown", run=f"run{r}", tag="storage")
            results["bd1"].append(seconds)
            results["bd2"].append(fetch(tb, "breakdown", run=f"run{r}", tag="storage")[0])
        for r in range(runs):
            results["bare_ops"].append(bare(blobs["ops"]))
            seconds, size = fetch(tb, "ops", run=f"run{r}", tag="ops", breakdown="storage")
            results["ops1"].append(seconds)
            results["ops2"].append(fetch(tb, "ops", run=f"run{r}", tag="ops", breakdown="storage")[0])
        after = process.memory_info().rss
    out = {k: statistics.median(v) for k, v in results.items()}
    out.update(first_screen_bytes=size, rss_before=before, rss_after=after)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--ops", type=int, default=200_000)
    parser.add_argument("--variables", type=int, default=10_000)
    parser.add_argument("--cache-mb", type=int, default=512)
    args = parser.parse_args()

    trace, breakdown = synthetic.trace(args.ops), synthetic.breakdown(args.variables)
    blobs = {"ops": payload.encode(trace), "storage": payload.encode(breakdown)}
    print(f"{args.ops:,}-op trace: {len(blobs['ops']):,} B stored, "
          f"{len(payload.inflate(blobs['ops'])):,} B of JSON; {args.variables:,}-variable breakdown: "
          f"{len(blobs['storage']):,} B stored")
    breakdown_parts(blobs["storage"])
    with tempfile.TemporaryDirectory() as logdir:
        for r in range(args.runs):
            write_events(os.path.join(logdir, f"run{r}"), [(0, summary.pb("storage", breakdown)),
                                                            (1, summary.pb("ops", trace))])
        for load_fast in (True, False):
            m = measure(load_fast, logdir, args.runs, blobs, args.cache_mb)
            loader = "--load_fast=true " if load_fast else "--load_fast=false"
            print(f"\n{loader} (medians of {args.runs} runs, each measured once cold)")
            _row("first /ops (with the breakdown)", m["ops1"], m["bare_ops"])
            _row("repeated /ops", m["ops2"], m["bare_ops"])
            if "read_bd" in m:
                _row("  TensorBoard's own read of its blob", m["read_bd"], m["bare_bd"])
            _row("first /breakdown", m["bd1"], m["bare_bd"])
            _row("repeated /breakdown", m["bd2"], m["bare_bd"])
            print(f"  first /ops answer: {m['first_screen_bytes']:,} B (the first screen, the rest is paged)")
            grown = (m["rss_after"] - m["rss_before"]) / 2**20
            print(f"  TensorBoard RSS {m['rss_before'] / 2**20:,.0f} -> {m['rss_after'] / 2**20:,.0f} MiB after "
                  f"{args.runs} traces: +{grown:,.0f} MiB, bound {args.cache_mb:,} MiB "
                  f"({'within' if grown <= args.cache_mb else 'OVER'})")


def _row(what: str, seconds: float, baseline: float) -> None:
    print(f"  {what:34s} {seconds * 1e3:9.1f} ms   bare decode {baseline * 1e3:8.1f} ms   "
          f"ratio {seconds / baseline:5.2f}x")


if __name__ == "__main__":
    main()
