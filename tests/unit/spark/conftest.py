"""Spark fixtures: one local[2] session for the whole test session (starting Spark is slow)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="the Spark tests need pip install 'kstreams[spark]'")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from kstreams.spark import local_session, register_data_source

    session = local_session("kstreams-tests", cores=2, shuffle_partitions=4)
    register_data_source(session)
    yield session
    session.stop()
