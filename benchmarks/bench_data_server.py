"""Why a first ``/breakdown`` on ``--load_fast=true`` waits ~45 ms before the plugin runs.

A diagnostic of TensorBoard, not of this plugin. TensorBoard's Rust data server accepts its gRPC
connections with Nagle's algorithm on (``TCP_NODELAY`` 0; TensorBoard's Python client sets it to
1). A reply written in pieces then holds its last small piece until the client's delayed ACK,
~40 ms on Linux. Any plugin reading a blob through ``context.data_provider`` pays it for some
replies, depending on their size.

This writes ``--runs`` runs, each a 10,000-variable breakdown, starts ``tensorboard
--load_fast=true``, and for each run times TensorBoard's own read of the blob (the
``read_blob_sequences`` and ``read_blob`` calls its GrpcDataProvider makes) and the plugin's first
``/breakdown`` over HTTP. Runs alternate between the server's sockets as shipped and the same
sockets with ``TCP_NODELAY`` set from outside (Linux >= 5.6: ``pidfd_getfd`` needs the right to
ptrace the data server, a descendant of this process). Medians, and their ratio.

    python -m benchmarks.bench_data_server [--runs 16] [--variables 10000]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import platform
import socket
import statistics
import tempfile
from typing import Dict, Iterator, List

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import psutil

from benchmarks import synthetic
from benchmarks.bench_serving import bare, data_server, data_server_read, fetch
from tb_modelmem import summary
from tb_modelmem.schema import payload
from tests.support.plugin_harness import write_events
from tests.support.tensorboard_process import TensorBoardProcess

SYS_PIDFD_GETFD = 438  # the same number on every Linux architecture


@contextlib.contextmanager
def socket_of(pid: int, fd: int) -> Iterator[socket.socket]:
    """A duplicate of another process's socket: it shares that socket's options."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        copy = libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
        if copy < 0:
            error = ctypes.get_errno()
            raise OSError(error, f"pidfd_getfd of pid {pid}'s fd {fd}: {os.strerror(error)}")
    finally:
        os.close(pidfd)
    sock = socket.socket(fileno=copy)
    try:
        yield sock
    finally:
        sock.close()  # the copy only


def connected_fds(server: psutil.Process) -> List[int]:
    return [c.fd for c in server.net_connections(kind="tcp") if c.status == psutil.CONN_ESTABLISHED]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--variables", type=int, default=10_000)
    args = parser.parse_args()
    if platform.system() != "Linux" or not hasattr(os, "pidfd_open"):
        raise SystemExit("this diagnostic needs Linux >= 5.6 (pidfd_getfd)")

    breakdown = synthetic.breakdown(args.variables)
    blob = payload.encode(breakdown)
    print(f"{args.variables:,}-variable breakdown: {len(blob):,} B stored")
    with tempfile.TemporaryDirectory() as logdir:
        for r in range(args.runs):
            write_events(os.path.join(logdir, f"run{r}"), [(0, summary.pb("storage", breakdown))])
        with TensorBoardProcess(logdir, load_fast=True) as tb:
            tb.wait_for_tab(expect_tags=args.runs)
            read = data_server_read(tb)
            fetch(tb, "runs")
            read("run0", "storage")  # both clients connected before any socket is touched
            server = data_server(tb)
            shipped_options = []
            for fd in connected_fds(server):
                with socket_of(server.pid, fd) as sock:
                    shipped_options.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            print(f"data server pid {server.pid}: TCP_NODELAY of its connections as shipped: {shipped_options}")
            results: Dict[bool, Dict[str, List[float]]] = {on: {"bare": [], "read": [], "first": []}
                                                           for on in (False, True)}
            for r in range(args.runs):
                on = r % 2 == 1
                for fd in connected_fds(server):
                    with socket_of(server.pid, fd) as sock:
                        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(on))
                got = results[on]
                got["bare"].append(bare(blob))
                got["read"].append(read(f"run{r}", "storage"))
                got["first"].append(fetch(tb, "breakdown", run=f"run{r}", tag="storage")[0])
    shipped, fixed = ({k: statistics.median(v) for k, v in results[on].items()} for on in (False, True))
    print(f"\nmedians of {args.runs // 2} runs each, alternating (bare decode {shipped['bare'] * 1e3:.1f} / "
          f"{fixed['bare'] * 1e3:.1f} ms):")
    for what, key in (("TensorBoard's read of the blob", "read"), ("first /breakdown", "first")):
        print(f"  {what:32s} as shipped {shipped[key] * 1e3:7.1f} ms ({shipped[key] / shipped['bare']:4.2f}x bare)   "
              f"TCP_NODELAY {fixed[key] * 1e3:7.1f} ms ({fixed[key] / fixed['bare']:4.2f}x bare)   "
              f"ratio {fixed[key] / shipped[key]:4.2f}")
    slowest = {on: max(results[on]["read"]) * 1e3 for on in (False, True)}
    print(f"  slowest read: as shipped {slowest[False]:.1f} ms, TCP_NODELAY {slowest[True]:.1f} ms")


if __name__ == "__main__":
    main()
