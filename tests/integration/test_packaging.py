"""The wheel builds from a clean checkout and works where Cython is not installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_wheel_installs_and_imports_without_cython(tmp_path: Path) -> None:
    source = tmp_path / "src"
    # A clean copy of the tracked files, so in-place build products never leak into the wheel.
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in files.stdout.splitlines():
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(dist)],
        check=True,
        timeout=900,
    )
    [wheel] = dist.glob("kstreams-*.whl")

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # Runtime dependencies come from the wheel's metadata; Cython is not among them.
    subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=900)
    probe = (
        "import importlib.util, sys\n"
        "assert importlib.util.find_spec('Cython') is None, 'Cython must not be needed'\n"
        "from kstreams._native import record_batch, record_buffer, record_cache\n"
        "from kstreams._native import record_collector, scheduler\n"
        "import kstreams\n"
        "from kstreams import StreamsBuilder, Serdes\n"
        "assert record_batch.murmur2(b'abc') == 479470107\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [str(python), "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
