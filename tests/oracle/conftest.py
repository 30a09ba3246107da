"""The oracle fixture: one Kafka Streams JVM (tests/support/oracle.py) for the whole session.

If Java or Maven is missing, or the oracle does not compile, every oracle test fails with the
reason in one line; none skips. The JVM's log is kept in test-logs/ when a test of the session
failed.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafka_broker import REPO
from tests.support.oracle import KafkaStreamsOracle, OracleUnavailable


@pytest.fixture(scope="session")
def oracle(request: pytest.FixtureRequest) -> Iterator[KafkaStreamsOracle]:
    log_dir = Path(tempfile.mkdtemp(prefix="kstreams-oracle-"))
    try:
        jvm = KafkaStreamsOracle(log_dir / "oracle.log")
    except OracleUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield jvm
    finally:
        jvm.close()
        if request.session.testsfailed:
            kept = REPO / "test-logs"
            kept.mkdir(exist_ok=True)
            shutil.copy(jvm.log_path, kept / "oracle.log")
        shutil.rmtree(log_dir, ignore_errors=True)
