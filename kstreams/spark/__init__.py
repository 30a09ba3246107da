"""Run kstreams topologies on Spark, and read topics into Spark through a data source.

``run_topology`` runs a topology over DataFrames of records (backfills, reprocessing) with the
same StreamTask the streaming runtime uses, so the same topology over the same input gives the
same final aggregates. ``register_data_source`` registers the ``kstreams`` Spark data source,
which reads a topic's records in batch and streaming queries and writes DataFrames to a topic
(``df.write``/``df.writeStream``; see ``data_sink``). ``kstreams.spark.functions`` holds the
compiled kernels as Spark column functions (``from kstreams.spark import functions as F``)::

    from kstreams.spark import local_session, register_data_source, run_topology

    spark = local_session()
    register_data_source(spark)
    words = spark.read.format("kstreams").option("bootstrap.servers", bs).option("topic", "words").load()
    outputs = run_topology(spark, topology, {"words": words})
    outputs["counts"].write.parquet("counts.parquet")

pyspark is an optional extra: ``import kstreams`` never imports it, and importing this package
without it raises an ImportError that says how to install it.
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401
    import pyspark
except ImportError as exc:  # pragma: no cover - exercised only where the extra is missing
    raise ImportError(
        f"kstreams.spark needs pyspark (>=4.0), pyarrow and pandas, which are not installed ({exc}): "
        "install them with pip install 'kstreams[spark]'."
    ) from exc

if int(pyspark.__version__.split(".")[0]) < 4:  # pragma: no cover - depends on the installed Spark
    raise ImportError(
        f"kstreams.spark needs pyspark>=4.0 (for Python data sources), found {pyspark.__version__}: "
        "upgrade with pip install 'kstreams[spark]'."
    )

from kstreams.spark.data_source import KStreamsDataSource, register_data_source
from kstreams.spark.runner import run_topology
from kstreams.spark.session import local_session
from kstreams.spark.sql_lowering import explain_topology
from kstreams.spark.streaming import run_topology_stream

__all__ = [
    "KStreamsDataSource",
    "explain_topology",
    "local_session",
    "register_data_source",
    "run_topology",
    "run_topology_stream",
]
