"""Kafka Streams as the benches' peer: the pipelines of jvm/src/main/java/io/kstreams/bench as a child JVM.

``BenchMain.java`` is compiled with ``javac`` against ``kafka_classpath()`` (the Kafka Streams pinned in
jvm/pom.xml) into jvm/target/bench-classes whenever it is newer than the last compile, as the oracle is.
A ``KafkaStreamsPeer`` runs one pipeline: it writes the streams properties to a file, starts the JVM,
and follows its stdout (``ready``, ``started``, ``processed <n>`` lines; BenchMain.java documents
them). Its CPU is the whole JVM's (every thread: stream threads, clients, GC, JIT), read from
/proc/<pid>/stat (utime + stime), so it can be taken at any moment of the run.

    with KafkaStreamsPeer("p1", "in", "out", {"bootstrap.servers": ..., "application.id": ...}) as peer:
        peer.start()
        peer.wait_processed(1_000_000, timeout=120)
        print(peer.cpu_seconds())
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from tests.support.kafka_broker import REPO, kafka_classpath

__all__ = ["JVM_OPTIONS", "KafkaStreamsPeer", "compile_bench"]

SOURCES = REPO / "jvm" / "src" / "main" / "java" / "io" / "kstreams" / "bench"
CLASSES = REPO / "jvm" / "target" / "bench-classes"
STAMP = CLASSES / ".bench-compiled"
MAIN_CLASS = "io.kstreams.bench.BenchMain"
# A server JVM as a Kafka Streams application runs: the default G1 collector and tiered JIT, a fixed
# 1 GB heap (the stores live off-heap in RocksDB).
JVM_OPTIONS = ["-Xms1g", "-Xmx1g", "-Dlog4j2.level=WARN"]


def compile_bench() -> str:
    """Compile BenchMain.java when it is newer than the last compile; the classpath to run it."""
    classpath = kafka_classpath()
    sources = sorted(SOURCES.glob("*.java"))
    newest = max(p.stat().st_mtime for p in sources)
    if not STAMP.is_file() or STAMP.stat().st_mtime < newest:
        if shutil.which("javac") is None:
            raise RuntimeError("the Kafka Streams pipelines are compiled with javac (a JDK 17+), not on PATH")
        CLASSES.mkdir(parents=True, exist_ok=True)
        command = ["javac", "-nowarn", "-encoding", "UTF-8", "--release", "17", "-cp", classpath,
                   "-d", str(CLASSES), *map(str, sources)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"javac could not compile the bench pipelines:\n{done.stderr}")
        STAMP.touch()
    return f"{CLASSES}:{classpath}"


class KafkaStreamsPeer:
    """One pipeline on Kafka Streams in a child JVM; its stderr goes to a temporary log file.

    ``command`` runs another program that speaks BenchMain's protocol instead (bench/e2e_latency.py
    runs kstreams and the confluent-kafka loop so, each in a process of its own)."""

    def __init__(
        self, pipeline: str, inp: str, out: str, props: dict[str, Any], command: list[str] | None = None
    ) -> None:
        command = command or ["java", *JVM_OPTIONS, "-cp", compile_bench(), MAIN_CLASS]
        self._dir = tempfile.TemporaryDirectory(prefix="kstreams-bench-jvm-")
        work = Path(self._dir.name)
        properties = work / "streams.properties"
        props = {"state.dir": str(work / "state"), **props}
        properties.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log_path = work / "jvm.log"
        self._log: IO[bytes] = open(self.log_path, "wb")  # closed by close()
        self.process = subprocess.Popen(
            [*command, pipeline, inp, out, str(properties)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
        )
        self.processed = 0
        self.first_processed_at: float | None = None
        self.first_processed = 0  # the first non-zero count reported, at first_processed_at
        self.first_processed_cpu = 0.0  # and the JVM's CPU seconds then
        self.restored = 0  # records restored into its stores, as of restored_at (perf_counter)
        self.restored_at: float | None = None
        self._lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="jvm-stdout", daemon=True)
        self._reader.start()
        self._expect("ready", 120)

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        for line in stdout:
            line = line.strip()
            if line.startswith("processed "):
                n = int(line.split()[1])
                if n and self.first_processed_at is None:
                    self.first_processed_at, self.first_processed = time.perf_counter(), n
                    self.first_processed_cpu = self.cpu_seconds()
                self.processed = n
            elif line.startswith("restored "):
                self.restored, self.restored_at = int(line.split()[1]), time.perf_counter()
            self._lines.put(line)
        self._lines.put("")

    def _expect(self, word: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(
                    f"Kafka Streams did not say {word!r} in {timeout:g}s: {self.log_tail()}"
                ) from None
            if line == word:
                return
            if line == "" or line.startswith("error"):
                raise RuntimeError(f"Kafka Streams failed ({line or 'exited'}): {self.log_tail()}")

    def start(self) -> None:
        """Start the client (KafkaStreams.start())."""
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write("go\n")
        stdin.flush()
        self._expect("started", 60)

    def wait_processed(self, records: int, timeout: float) -> bool:
        """Wait until the stream threads processed ``records`` records; False on timeout or error."""
        deadline = time.monotonic() + timeout
        while self.processed < records:
            if time.monotonic() > deadline or self.process.poll() is not None:
                return False
            time.sleep(0.002)
        return True

    def wait_restored(self, records: int, timeout: float) -> bool:
        """Wait until ``records`` records were restored into the stores; False on timeout or exit."""
        deadline = time.monotonic() + timeout
        while self.restored < records:
            if time.monotonic() > deadline or self.process.poll() is not None:
                return False
            time.sleep(0.002)
        return True

    def cpu_seconds(self) -> float:
        """CPU the JVM has used so far: every thread, GC and JIT included (utime + stime)."""
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        with open(f"/proc/{self.process.pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    def log_tail(self, lines: int = 5) -> str:
        self._log.flush()
        text = self.log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:]) or f"(empty log {self.log_path})"

    def close(self) -> None:
        """Close the client (stdin closes) and wait for the JVM; kill it after 90 s."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(5)
        self._log.close()
        self._dir.cleanup()

    def __enter__(self) -> KafkaStreamsPeer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
