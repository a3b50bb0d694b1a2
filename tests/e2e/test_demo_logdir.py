"""demo/run.sh never deletes what the demo did not write (issue 39).

run.sh is run as a user runs it (``bash demo/run.sh --logdir DIR``), from a copy of the repository's demo/
beside a stand-in for scripts/setup_env.sh that records it ran and stops: the log dir is checked before
anything is installed or trained, so a refusal leaves no trace of an install and takes well under a second.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARKER = ".tb_modelmem_demo"


@pytest.fixture
def repo(tmp_path):
    """A copy of demo/run.sh and demo/logdir_guard.py; scripts/setup_env.sh only notes that it ran."""
    copy = tmp_path / "repo"
    (copy / "demo").mkdir(parents=True)
    (copy / "scripts").mkdir()
    for name in ("run.sh", "logdir_guard.py"):
        shutil.copy(os.path.join(ROOT, "demo", name), copy / "demo" / name)
    (copy / "scripts" / "setup_env.sh").write_text('touch "$(dirname "$0")/../setup_ran"; exit 7\n')
    return copy


def run_demo(repo, logdir) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(repo / "demo" / "run.sh"), "--logdir", str(logdir)], capture_output=True,
                          text=True, timeout=60, cwd=str(repo.parent))


def snapshot(folder) -> dict:
    """Every path under ``folder`` with its content's digest (a link: where it points)."""
    out = {}
    for base, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(base, name)
            rel = os.path.relpath(path, folder)
            if os.path.islink(path):
                out[rel] = "-> " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    out[rel] = hashlib.sha256(f.read()).hexdigest()
            else:
                out[rel] = "dir"
    return out


def test_a_folder_of_someone_elses_logs_is_refused_untouched_before_any_install(repo, tmp_path):
    logs = tmp_path / "my_training_logs"
    (logs / "train").mkdir(parents=True)
    (logs / "train" / "events.out.tfevents.1700000000.host").write_bytes(os.urandom(4096))
    (logs / "notes.txt").write_text("three weeks of runs\n")
    before = snapshot(logs)
    start = time.monotonic()
    result = run_demo(repo, logs)
    took = time.monotonic() - start
    assert result.returncode == 2, result.stderr
    assert snapshot(logs) == before  # every file and folder, byte for byte; no marker added
    assert not (repo / "setup_ran").exists(), "run.sh went on to install after refusing"
    assert took < 10, took
    message = result.stderr
    assert str(logs) in message and "'notes.txt'" in message and "'train'" in message
    assert "Nothing was changed" in message and "--logdir" in message


def test_an_earlier_demos_folder_is_reused_and_only_its_runs_removed(repo, tmp_path):
    logs = tmp_path / "demo_logs"
    (logs / "lenet_peak").mkdir(parents=True)
    (logs / "lenet_peak" / "events.out.tfevents.1").write_bytes(b"old demo run")
    outside = tmp_path / "kept_elsewhere"
    outside.mkdir()
    (outside / "data").write_text("not the demo's\n")
    os.symlink(outside, logs / "convnet_adam")  # a link under a demo run's name: removed, never followed
    (logs / MARKER).write_text("earlier demo\n")
    result = run_demo(repo, logs)
    assert result.returncode == 7, result.stderr  # the guard let it through to the (stand-in) install
    assert (repo / "setup_ran").exists()
    assert sorted(os.listdir(logs)) == [MARKER]
    assert (outside / "data").read_text() == "not the demo's\n"


def test_an_earlier_demos_folder_holding_something_else_is_refused(repo, tmp_path):
    logs = tmp_path / "demo_logs"
    (logs / "lenet_peak").mkdir(parents=True)
    (logs / MARKER).write_text("earlier demo\n")
    (logs / "my_run").mkdir()
    (logs / "my_run" / "events.out.tfevents.2").write_bytes(b"user's")
    before = snapshot(logs)
    result = run_demo(repo, logs)
    assert result.returncode == 2
    assert snapshot(logs) == before
    assert "'my_run'" in result.stderr and not (repo / "setup_ran").exists()


@pytest.mark.parametrize("kind", ["new", "empty"])
def test_a_new_or_empty_folder_is_marked_as_the_demos(repo, tmp_path, kind):
    logs = tmp_path / "fresh" / "demo_logs"
    if kind == "empty":
        logs.mkdir(parents=True)
    result = run_demo(repo, logs)
    assert result.returncode == 7, result.stderr
    assert sorted(os.listdir(logs)) == [MARKER]


def test_a_file_where_the_folder_should_be_is_refused(repo, tmp_path):
    target = tmp_path / "demo_logs"
    target.write_text("a file\n")
    result = run_demo(repo, target)
    assert result.returncode == 2 and target.read_text() == "a file\n"
    assert "not a folder" in result.stderr


def test_make_logdir_refuses_a_foreign_folder_too(tmp_path):
    """demo/make_logdir.py run on its own (as README's screenshots line runs it) makes the same check first."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "events.out.tfevents.3").write_bytes(b"user's")
    result = subprocess.run([sys.executable, os.path.join(ROOT, "demo", "make_logdir.py"), "--logdir", str(logs)],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 2, result.stderr
    assert os.listdir(logs) == ["events.out.tfevents.3"] and "Nothing was changed" in result.stderr
