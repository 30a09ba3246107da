"""Local Spark sessions for development, tests, examples and benchmarks.

``local_session`` starts (or returns the running) SparkSession on this machine with settings that
suit kstreams: Python workers run this interpreter and can import kstreams, Arrow transfers are
on, the UI is off and shuffles use few partitions (a laptop has few cores).
"""

from __future__ import annotations

import logging
import os
import site
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

__all__ = ["local_session"]

logger = logging.getLogger(__name__)

# The directory that holds the kstreams package: Python workers need it on their path when
# kstreams runs from a source checkout rather than an installed wheel.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def local_session(
    app_name: str = "kstreams",
    cores: int = 2,
    shuffle_partitions: int = 4,
    conf: Mapping[str, Any] | None = None,
) -> SparkSession:
    """A ``local[cores]`` SparkSession whose Python workers run this interpreter (it sets
    PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON to ``sys.executable``) and import this kstreams.

    ``conf`` adds or overrides Spark settings. If a session is already running in this process,
    Spark returns it (with ``conf`` applied to its runtime SQL settings only).
    """
    # The JVM starts Python workers from these variables: set them before it starts. Workers must
    # run this interpreter, or they would not have the same kstreams, numpy and pyarrow.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    python_path = os.environ.get("PYTHONPATH", "")
    if _PACKAGE_ROOT not in _site_paths() and _PACKAGE_ROOT not in python_path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, python_path) if p)
    settings: dict[str, Any] = {
        "spark.master": f"local[{cores}]",
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(cores),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
    }
    if os.environ.get("PYTHONPATH"):
        settings["spark.executorEnv.PYTHONPATH"] = os.environ["PYTHONPATH"]
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    logger.info("Spark session %s on %s (Spark %s)", app_name, settings["spark.master"], session.version)
    return session


def _site_paths() -> set[str]:
    """Directories every interpreter of this installation searches (an installed kstreams)."""
    paths = set(site.getsitepackages())
    user_site = site.getusersitepackages()
    if isinstance(user_site, str):
        paths.add(user_site)
    return {str(Path(p).resolve()) for p in paths}
