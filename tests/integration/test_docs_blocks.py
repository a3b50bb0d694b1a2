"""The docs a new user copies from are kept true (issue 51): every Python block of the README and of the
framework pages runs, on tiny models, in a fresh process in an empty folder, and writes the log dir it says
it writes; every ``tb-modelmem`` flag the docs name exists. The comment above a block names the setup it
assumes (``tests/support/doc_setups.py``: the ``model``, ``x``, ``loader`` it uses) or why it is skipped
(a GPU, a download)."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest

from tb_modelmem.cli import build_parser
from tests.support.doc_setups import SETUPS
from tests.support.paths import REPO

PAGES = ("README.md", "docs/KERAS_TF.md", "docs/PYTORCH.md", "docs/JAX.md")
DOCS = PAGES + ("docs/CLI.md", "docs/WHAT_IF.md", "docs/DEVELOPING.md")
_BLOCK = re.compile(r"(?:<!-- docs-test: (?P<marker>[^>]*?) -->\n)?(?P<indent>[ ]*)```python\n"
                    r"(?P<code>.*?)^(?P=indent)```", re.S | re.M)


def blocks():
    found = []
    for page in PAGES:
        with open(os.path.join(REPO, page)) as f:
            text = f.read()
        for i, match in enumerate(_BLOCK.finditer(text)):
            code = "\n".join(line[len(match["indent"]):] for line in match["code"].splitlines())
            found.append(pytest.param(page, match["marker"], code, id=f"{page}#{i + 1}"))
    return found


def test_every_page_has_blocks_and_each_block_says_how_it_runs():
    found = blocks()
    assert {p.values[0] for p in found} == set(PAGES)
    unmarked = [p.id for p in found if not p.values[1]]
    assert not unmarked, f"blocks with no <!-- docs-test: setup NAME | skip WHY --> comment: {unmarked}"


@pytest.mark.parametrize("page,marker,code", blocks())
def test_the_block_runs_and_writes_its_log_dir(page, marker, code, tmp_path):
    kind, _, rest = marker.partition(" ")
    if kind == "skip":
        pytest.skip(rest)
    assert kind == "setup" and rest in SETUPS, marker
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="",
               TENSORBOARD_LOGGING_DIR=str(tmp_path / "logs" / "trainer"))
    done = subprocess.run([sys.executable, "-c", SETUPS[rest] + "\n" + code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    written = glob.glob(str(tmp_path / "**" / "events.out.tfevents.*"), recursive=True) + glob.glob(
        str(tmp_path / "**" / "*.xplane.pb"), recursive=True) + glob.glob(str(tmp_path / "**" / "*.pt.trace.json"),
                                                                          recursive=True)
    assert written, f"{page}: the block wrote no log dir"


def test_every_flag_the_docs_name_exists():
    parser = build_parser()
    commands = {name: sub for action in parser._actions if hasattr(action, "choices") and action.choices
                for name, sub in action.choices.items()}
    named = []
    for page in DOCS:
        with open(os.path.join(REPO, page)) as f:
            for line in f:
                for call in re.finditer(r"tb-modelmem (inspect|loadbench|estimate)\b([^`#|\n]*)", line):
                    named += [(page, call[1], flag) for flag in re.findall(r"(--[a-z][a-z_-]*)", call[2])]
    assert {command for _, command, _ in named} == {"inspect", "loadbench", "estimate"}
    missing = [(page, command, flag) for page, command, flag in named
               if flag not in {o for a in commands[command]._actions for o in a.option_strings}]
    assert not missing, missing
