"""Kafka Streams as the oracle: a client of the oracle program in jvm/src/main/java/io/kstreams/oracle.

The program runs cases on Kafka Streams' own TopologyTestDriver (of the Kafka pinned in
jvm/pom.xml): one JSON request per line on its stdin, one JSON answer per line on its stdout
(OracleMain.java documents both). One JVM serves a whole test session, so a case costs
milliseconds. Its sources are compiled with ``javac`` against ``kafka_classpath()`` into
jvm/target/classes whenever a source is newer than the last compile; its log (stderr) goes to a
file whose last lines a failure shows.

    with KafkaStreamsOracle(Path("/tmp/oracle.log")) as oracle:
        answer = oracle.run(request)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from tests.support.kafka_broker import REPO, BrokerUnavailable, kafka_classpath

__all__ = ["KafkaStreamsOracle", "OracleUnavailable", "compile_oracle"]

SOURCES = REPO / "jvm" / "src" / "main" / "java" / "io" / "kstreams" / "oracle"
CLASSES = REPO / "jvm" / "target" / "classes"
STAMP = CLASSES / ".oracle-compiled"
MAIN_CLASS = "io.kstreams.oracle.OracleMain"
# One case at a time, small topologies: a small heap starts fastest.
JVM_OPTIONS = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dlog4j2.level=ERROR"]


class OracleUnavailable(RuntimeError):
    """The oracle cannot run here; the message says what is missing, in one line."""


def compile_oracle() -> str:
    """Compile the oracle's sources when any is newer than the last compile; the classpath to run it."""
    try:
        classpath = kafka_classpath()
    except BrokerUnavailable as exc:
        raise OracleUnavailable(f"Kafka Streams (the oracle) is unavailable: {exc}") from None
    sources = sorted(SOURCES.glob("*.java"))
    newest = max(p.stat().st_mtime for p in sources)
    if not STAMP.is_file() or STAMP.stat().st_mtime < newest:
        if shutil.which("javac") is None:
            raise OracleUnavailable(
                "The oracle is compiled with javac (a JDK 17+), and `javac` is not on PATH: "
                "apt-get install openjdk-17-jdk-headless"
            )
        CLASSES.mkdir(parents=True, exist_ok=True)
        command = ["javac", "-nowarn", "-encoding", "UTF-8", "--release", "17", "-cp", classpath,
                   "-d", str(CLASSES), *map(str, sources)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if "error" in line]
            raise OracleUnavailable(f"javac could not compile the oracle: {(errors or [done.stderr])[0]}")
        STAMP.touch()
    return f"{CLASSES}:{classpath}"


class KafkaStreamsOracle:
    """The oracle program as a child JVM; ``run`` sends one request and returns its answer."""

    def __init__(self, log_path: Path) -> None:
        classpath = compile_oracle()
        if shutil.which("java") is None:
            raise OracleUnavailable("The oracle needs Java 17+, and `java` is not on PATH")
        self.log_path = log_path
        self._log: IO[bytes] = open(log_path, "wb")  # closed by close()
        self._process = subprocess.Popen(
            ["java", *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
        )
        self.cases_run = 0

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """Kafka Streams' answer to ``request`` (see OracleMain.java)."""
        self._write([request])
        return self._read()

    def run_many(self, requests: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The answers to ``requests`` in order. A thread feeds the JVM while the caller consumes
        answers, so the two run side by side on two cores."""
        pending = list(requests)
        writer = threading.Thread(target=self._write, args=(pending,), name="oracle-writer", daemon=True)
        writer.start()
        read = 0
        try:
            for _ in pending:
                answer = self._read()
                read += 1
                yield answer
        finally:
            # A caller that stops early still leaves the pipe empty for the next request.
            for _ in range(len(pending) - read):
                self._read()
            writer.join()

    def _write(self, requests: list[dict[str, Any]]) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            for request in requests:
                stdin.write(json.dumps(request) + "\n")
            stdin.flush()
        except BrokenPipeError:
            raise OracleUnavailable(f"The oracle JVM has exited: {self._log_tail()}") from None

    def _read(self) -> dict[str, Any]:
        stdout = self._process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise OracleUnavailable(f"The oracle JVM died (exit {self._process.poll()}): {self._log_tail()}")
        self.cases_run += 1
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _log_tail(self) -> str:
        self._log.flush()
        lines = self.log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(lines[-3:]) or f"see {self.log_path}"

    def close(self) -> None:
        """End the JVM (it exits when its stdin closes) and close the log."""
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._log.close()

    def __enter__(self) -> KafkaStreamsOracle:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
