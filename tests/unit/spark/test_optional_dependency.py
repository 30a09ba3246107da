"""pyspark is an optional extra: kstreams never imports it, and kstreams.spark says how to get it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)


def test_importing_kstreams_and_building_a_topology_never_imports_pyspark() -> None:
    result = _python(
        "import sys, kstreams\n"
        "from kstreams import StreamsBuilder, Serdes\n"
        "from kstreams.testing import TopologyTestDriver\n"
        "StreamsBuilder().stream('in').to('out')\n"
        "assert 'pyspark' not in sys.modules, 'pyspark was imported'\n"
    )
    assert result.returncode == 0, result.stderr


def test_kstreams_spark_without_pyspark_raises_an_import_error_saying_how_to_install_it() -> None:
    result = _python(
        "import sys\n"
        "sys.modules['pyspark'] = None  # as if pyspark were not installed\n"
        "try:\n"
        "    import kstreams.spark\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
    )
    assert result.returncode == 0, result.stderr
    assert "pip install 'kstreams[spark]'" in result.stdout
