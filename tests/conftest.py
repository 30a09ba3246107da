"""Shared fixtures. ``cluster`` runs a test body once per cluster adapter.

The embedded parameter always runs; the kafka parameter (marked ``integration``) runs against a
Kafka-protocol broker that the integration support starts on a free loopback port, or against
``KSTREAMS_BOOTSTRAP`` when that is set.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture
def embedded_cluster() -> Iterator[object]:
    from kstreams.cluster import EmbeddedCluster

    cluster = EmbeddedCluster()
    yield cluster
    cluster.close()


@pytest.fixture
def app_id() -> str:
    """A fresh application id, so tests sharing one broker never share topics or groups."""
    return f"app-{uuid.uuid4().hex[:8]}"
