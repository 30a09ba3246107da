"""Apache Kafka for the tests: a single-node KRaft broker (combined broker and controller).

The broker's jars are those of ``jvm/pom.xml`` (a pinned Apache Kafka 4.x), resolved from Maven
Central into ``~/.m2`` by Maven; their classpath is cached in ``jvm/target/classpath.txt`` and
resolved again whenever the pom is newer. A broker runs as a child JVM on free loopback ports,
formatted in a directory of its own, and is stopped by its PID (it also dies with the process that
started it, so a killed test run leaves no broker behind).

Settings that make one node enough and tests quick: replication factors and min ISR 1 (so
transactions work on one node), one partition for each internal topic, no initial rebalance delay,
no topic auto-creation (a missing topic is an error the tests can see, as on managed clusters),
and dead transactions aborted within a second or two of their timeout.

Run as a script to start a broker by hand (for a demo, a bench, or ``KSTREAMS_BOOTSTRAP``):

    python tests/support/kafka_broker.py            # prints the bootstrap address, Ctrl-C stops it
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "REPO",
    "BrokerUnavailable",
    "KafkaBroker",
    "PortInUse",
    "free_port",
    "kafka_classpath",
    "kafka_version",
    "temporary_broker",
]

REPO = Path(__file__).resolve().parents[2]
POM = REPO / "jvm" / "pom.xml"
CLASSPATH_FILE = REPO / "jvm" / "target" / "classpath.txt"
START_TIMEOUT_S = 90.0
# A broker for tests: a small heap is plenty, and two network and I/O threads suit two cores.
JVM_OPTIONS = ["-Xms256m", "-Xmx768m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class BrokerUnavailable(RuntimeError):
    """The broker cannot be started here; the message's first line says what is missing."""


class PortInUse(BrokerUnavailable):
    """Another process took one of the broker's ports between choosing and binding it."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def kafka_version() -> str:
    """The Apache Kafka version pinned in jvm/pom.xml."""
    text = POM.read_text()
    start = text.index("<kafka.version>") + len("<kafka.version>")
    return text[start : text.index("</kafka.version>", start)]


def kafka_classpath() -> str:
    """The classpath of the pinned broker and Kafka Streams, resolved by Maven when needed."""
    if shutil.which("java") is None:
        raise BrokerUnavailable(
            "Apache Kafka needs Java 17+, and `java` is not on PATH: apt-get install openjdk-17-jdk-headless"
        )
    fresh = CLASSPATH_FILE.is_file() and CLASSPATH_FILE.stat().st_mtime >= POM.stat().st_mtime
    if not fresh:
        if shutil.which("mvn") is None:
            raise BrokerUnavailable(
                "Apache Kafka's jars are resolved by Maven, and `mvn` is not on PATH: apt-get install maven"
            )
        command = [
            "mvn", "-q", "-B", "-f", str(POM), "dependency:build-classpath",
            f"-Dmdep.outputFile={CLASSPATH_FILE}",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        if done.returncode != 0 or not CLASSPATH_FILE.is_file():
            output = (done.stdout + done.stderr).strip().splitlines()
            last = output[-1] if output else f"exit code {done.returncode}"
            raise BrokerUnavailable(f"Maven could not resolve Apache Kafka {kafka_version()}: {last}")
    return CLASSPATH_FILE.read_text().strip()


def _die_with_parent() -> None:
    # A broker outlives nothing: if the test run is killed, the kernel kills the broker too.
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class KafkaBroker:
    """One Apache Kafka KRaft node on loopback, its data and log in ``workdir``.

    ``stop()``, ``kill()`` and ``restart()`` keep the data directory and the ports, so a test can
    take the broker away and bring it back as an operator would."""

    def __init__(self, workdir: Path, config: dict[str, str] | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.port = free_port()
        self.controller_port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_path = workdir / "kafka-broker.log"
        self._data_dir = workdir / "kafka-data"
        self._properties = workdir / "server.properties"
        self._classpath = kafka_classpath()
        self._config = {**self._default_config(), **(config or {})}
        self._process: subprocess.Popen[bytes] | None = None
        self._format()

    def _default_config(self) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self._data_dir),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            # Abort a dead producer's transaction soon after its transaction.timeout.ms.
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
            # After a SIGKILL the restarted node waits for its old incarnation's session to end
            # before it registers again: 2 s instead of 9.
            "broker.session.timeout.ms": "2000",
            "broker.heartbeat.interval.ms": "500",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        }

    def _java(self, main: str, *args: str) -> list[str]:
        log4j = self.workdir / "log4j2.properties"
        log4j.write_text(_LOG4J2)
        return [
            "java", *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}",
            "-cp", self._classpath, main, *args,
        ]  # fmt: skip

    def _format(self) -> None:
        self._properties.write_text("".join(f"{k}={v}\n" for k, v in self._config.items()))
        # An id starting with "-" would be read as an option of kafka-storage ("--cluster-id:
        # expected one argument", one start in 64): Kafka's Uuid.randomUuid skips such ids too.
        cluster_id = "-"
        while cluster_id.startswith("-"):
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        command = self._java(
            "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self._properties)
        )
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise BrokerUnavailable(f"Formatting the Kafka log directory failed: {done.stdout}{done.stderr}")

    # Lifecycle

    def start(self) -> None:
        """Start the JVM (on the same ports and data as before, after a stop or kill)."""
        if self.running:
            return
        log = open(self.log_path, "ab")
        try:
            self._process = subprocess.Popen(
                self._java("kafka.Kafka", str(self._properties)),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()  # the child holds its own descriptor

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Return once the broker answers a metadata request with itself as a broker; raise
        BrokerUnavailable with the log's tail if it exits or does not answer in time."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                code = None if self._process is None else self._process.returncode
                if "Address already in use" in self.log_tail():
                    raise PortInUse(
                        f"Apache Kafka could not listen on 127.0.0.1:{self.port} or :{self.controller_port}: "
                        "a port is in use"
                    )
                raise BrokerUnavailable(
                    f"Apache Kafka exited with code {code} while starting:\n{self.log_tail()}"
                )
            try:
                if admin.list_topics(timeout=1.0).brokers:
                    return
            except Exception as exc:  # retried until the deadline, then reported
                last_error = exc
        raise BrokerUnavailable(
            f"Apache Kafka did not answer at {self.bootstrap} within {timeout:g}s "
            f"(last error: {last_error}):\n{self.log_tail()}"
        )

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def stop(self, timeout: float = 60.0) -> None:
        """A controlled shutdown (SIGTERM), waited for; SIGKILL if it takes longer than ``timeout``."""
        if not self.running:
            return
        assert self._process is not None
        self._process.terminate()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: the broker ends at once, as in a crash; its log recovers at the next start."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(30)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


@contextlib.contextmanager
def temporary_broker(prefix: str = "kstreams-kafka-") -> Iterator[str]:
    """A single-node broker in a temporary directory, ready, for the block: its bootstrap address
    (the benches' ``--kafka``); stopped and deleted afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as workdir:
        broker = KafkaBroker(Path(workdir))
        broker.start()
        try:
            broker.wait_ready()
            yield broker.bootstrap
        finally:
            broker.stop()


def main() -> int:
    import tempfile

    workdir = Path(tempfile.mkdtemp(prefix="kstreams-kafka-"))
    try:
        broker = KafkaBroker(workdir)
        broker.start()
        broker.wait_ready()
    except BrokerUnavailable as exc:
        print(f"Cannot start Apache Kafka: {exc}", file=sys.stderr)
        return 1
    print(f"Apache Kafka {kafka_version()} at {broker.bootstrap} (log: {broker.log_path}); Ctrl-C stops it")
    sys.stdout.flush()
    signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        signal.sigwait(signals)
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
