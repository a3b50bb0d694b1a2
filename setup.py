"""tb_modelmem: where did my memory go? A TensorBoard plugin for model memory."""

import os
import re
import shutil
import subprocess

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLE = os.path.join(HERE, "tb_modelmem", "static", "index.js")


def _version() -> str:
    """``__version__`` of tb_modelmem/__init__.py, the one place the version is written (read, not
    imported: building must not need the package's dependencies)."""
    with open(os.path.join(HERE, "tb_modelmem", "__init__.py")) as f:
        found = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if found is None:
        raise SystemExit("tb_modelmem: no __version__ = \"...\" line in tb_modelmem/__init__.py")
    return found.group(1)


class BuildWithFrontend(build_py):
    """Build the frontend bundle with npm before packaging, when Node is available."""

    def run(self):
        frontend = os.path.join(HERE, "frontend")
        if os.path.exists(os.path.join(frontend, "package.json")) and shutil.which("npm"):
            if not os.path.isdir(os.path.join(frontend, "node_modules")):
                subprocess.check_call(["npm", "ci", "--no-audit", "--no-fund"], cwd=frontend)
            subprocess.check_call(["npm", "run", "build"], cwd=frontend)
        elif not os.path.exists(BUNDLE):
            raise SystemExit("tb_modelmem: Node.js/npm is needed to build the frontend (frontend/).")
        super().run()


setup(
    name="tb_modelmem",
    version=_version(),
    description="TensorBoard plugin: where did my memory go? Weights vs optimizer slots, per-op memory and time.",
    long_description=open(os.path.join(HERE, "README.md")).read() if os.path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.10",  # as TensorFlow 2.16+, torch 2.x and JAX need; 3.9 ended in 2025
    packages=find_packages(include=["tb_modelmem", "tb_modelmem.*"]),
    package_data={"tb_modelmem": ["static/*"]},
    # No TensorFlow: the plugin, the readers and the summary writers need none, and installing it beside
    # PyTorch can crash the user's process. Capture uses the framework the training process already has.
    install_requires=["tensorboard>=2.16", "werkzeug", "protobuf", "psutil", "tqdm", "h5py", "zstandard", "orjson"],
    extras_require={
        "tensorflow": ["tensorflow>=2.16"],
        # the suite runs real TensorFlow, JAX and torch (Keras 3 on each backend); scripts/setup_env.sh
        # installs torch's CPU build first
        "test": ["tensorflow>=2.16", "torch>=2.1", "pytest", "pytest-xdist", "playwright", "grpcio-tools", "xprof",
                 "fsspec", "ruff", "mypy", "jax[cpu]",
                 # PyTorch as people train with it: Hugging Face Trainer (accelerate runs it) and Lightning
                 "transformers>=4.40", "accelerate>=1.1", "lightning>=2.2", "safetensors", "peft",
                 # JAX as people train on it without Keras (tests/integration/test_flax.py)
                 "flax>=0.12", "optax>=0.2", "equinox",
                 # an S3 bucket log dir, served by a real S3-compatible server (tests/integration/test_s3_logdir.py)
                 "moto[server]", "boto3"],
    },
    entry_points={
        "tensorboard_plugins": ["modelmem = tb_modelmem.plugin:ModelMemLoader"],
        "console_scripts": ["tb-modelmem = tb_modelmem.cli:main"],
    },
    cmdclass={"build_py": BuildWithFrontend},
)
