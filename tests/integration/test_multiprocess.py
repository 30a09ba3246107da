"""OS processes of one application on Apache Kafka, with exactly_once_v2: a worker killed with
SIGKILL mid-stream has its tasks taken over with exact counts (by its restart, or by another worker
once the broker expires the dead one's session, 6 s, and aborts its open transaction, 10 s), and
SHUTDOWN_APPLICATION raised in one process stops both. With the state-aware assignor: a scale-out
from three to four workers warms up before it hands tasks over, a member that joins and dies
during a probing rebalance stops nothing, and rolling restarts of static members move no task.

Each worker is ``streams_worker.py`` beside this file: a count-per-key KafkaStreams application
that reports its state changes on stdout and logs to a file. Every worker is killed at the end.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from kstreams.serdes import Serdes
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

logger = logging.getLogger(__name__)

WORKER = Path(__file__).with_name("streams_worker.py")
LONG = Serdes.long()
PARTITIONS = 4
KEYS = 20
SHUTDOWN_DETECTED = "Detected that shutdown was requested. All clients in this app will now begin to shutdown"


class Worker:
    """One ``streams_worker.py`` process; its stdout events are collected by a reader thread."""

    def __init__(self, name: str, args: list[str], workdir: Path, state: str) -> None:
        self.name = name
        self.log_path = workdir / f"{name}.log"
        self._log = open(self.log_path, "wb")  # closed in stop()
        self.events: list[str] = []
        self._changed = threading.Condition()
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), "--name", name, "--state-dir", str(workdir / state), *args],
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self.events.append(line.strip())
                self._changed.notify_all()
        with self._changed:
            self.events.append("EOF")
            self._changed.notify_all()

    def wait_event(self, event: str, timeout: float) -> str:
        """Wait until the worker printed ``event`` (alone or followed by its details) and return
        that line; fail with its log tail if it exits first."""

        def printed() -> str | None:
            return next((e for e in self.events if e == event or e.startswith(event + " ")), None)

        with self._changed:
            if self._changed.wait_for(lambda: printed() is not None or "EOF" in self.events, timeout):
                line = printed()
                if line is not None:
                    return line
        raise AssertionError(
            f"Worker {self.name} did not print {event!r} within {timeout}s; events {self.events}\n"
            f"{self.log_tail()}"
        )

    def log_text(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    @property
    def process_id(self) -> str:
        """The kstreams process id it printed when it started (its transactional.id's suffix)."""
        return self.wait_event("STARTED", 30).split()[2]

    def kill(self) -> None:
        """SIGKILL: no commit, no close, no leave-group; an open transaction stays open."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._reader.join(10)
        self._log.close()


@pytest.fixture
def workers(tmp_path: Path, kafka_broker: str, app_id: str) -> Iterator[Callable[..., Worker]]:
    """Starts workers of the application ``app_id``; every one is killed at the end."""
    started: list[Worker] = []

    def start(name: str, *extra: str, state: str | None = None) -> Worker:
        """Start worker ``name``; ``state`` names its state directory (default: its own)."""
        args = [
            "--bootstrap",
            kafka_broker,
            "--application-id",
            app_id,
            "--source",
            f"{app_id}-in",
            "--sink",
            f"{app_id}-out",
            *extra,
        ]
        worker = Worker(name, args, tmp_path, state or name)
        started.append(worker)
        return worker

    try:
        yield start
    finally:
        for worker in started:
            worker.stop()


@pytest.fixture
def admin(kafka_broker: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_broker})


def latest(cluster, topic: str) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """The newest count per key that read_committed readers see."""
    return {r.key.decode(): LONG.deserialize(topic, r.value) for r in cluster.read(topic, "read_committed")}


def produce(cluster, topic: str, count: int, start: int, kill: Worker | None = None) -> Counter[str]:  # type: ignore[no-untyped-def]
    """Produce ``count`` records over KEYS keys; with ``kill``, SIGKILL that worker half way, so
    it dies while records are arriving (its last transaction most likely open)."""
    expected: Counter[str] = Counter()
    now = int(time.time() * 1000)
    for i in range(start, start + count):
        if kill is not None and i == start + count // 2:
            kill.kill()
        key = f"key-{i % KEYS}"
        cluster.produce(topic, key.encode(), f"value-{i}".encode(), timestamp=now + i - start)
        expected[key] += 1
    return expected


def owners(admin: AdminClient, app_id: str) -> set[str]:
    """The workers whose main consumer owns input partitions in the group's current generation
    (a worker's consumer has client.id ``<app_id>-<worker>-consumer``)."""
    try:
        group = admin.describe_consumer_groups([app_id])[app_id].result(10)
    except KafkaException:
        return set()
    return {
        m.client_id[len(app_id) + 1 :].removesuffix("-consumer")
        for m in group.members
        if m.assignment is not None and m.assignment.topic_partitions
    }


class WorkerExited(AssertionError):
    """A worker that should be running has exited: waiting on is pointless."""


def running(condition: Callable[[], bool], workers: tuple[Worker, ...]) -> Callable[[], bool]:
    """``condition``, failing at once with the worker's log if one of ``workers`` has exited."""

    def check() -> bool:
        for worker in workers:
            if worker.process.poll() is not None:
                raise WorkerExited(
                    f"Worker {worker.name} exited ({worker.process.returncode}); events {worker.events}\n"
                    f"{worker.log_tail()}"
                )
        return condition()

    return check


def wait_owners(
    admin: AdminClient, app_id: str, expected: set[str], timeout: float, *workers: Worker
) -> None:
    """Wait until exactly ``expected`` own the input partitions, while ``workers`` keep running."""
    condition = running(lambda: owners(admin, app_id) == expected, workers)
    try:
        wait_until(condition, timeout, f"partitions owned by {expected}")
    except WorkerExited:
        raise
    except AssertionError as exc:
        now = owners(admin, app_id)
        logs = "\n".join(f"--- {w.name} {w.events}\n{w.log_tail()}" for w in workers)
        raise AssertionError(f"{exc}; owners now {now}\n{logs}") from None


def wait_exact(  # type: ignore[no-untyped-def]
    cluster, sink: str, expected: Counter[str], timeout: float, what: str, *workers: Worker
) -> None:
    """Wait until the newest committed count of every key is the true count, while ``workers``
    keep running."""
    seen: dict[str, int] = {}

    def exact() -> bool:
        nonlocal seen
        seen = latest(cluster, sink)
        return seen == dict(expected)

    try:
        wait_until(running(exact, workers), timeout, what)
    except WorkerExited:
        raise
    except AssertionError:
        wrong = {k: (seen.get(k), n) for k, n in expected.items() if seen.get(k) != n}
        raise AssertionError(f"{what}: counts differ (key: (seen, expected)): {wrong}") from None


def assert_each_count_committed_once(cluster, sink: str, expected: Counter[str]) -> None:  # type: ignore[no-untyped-def]
    """Exactly once, seen by a read_committed reader: each key's committed counts are 1, 2, ..., n
    in order, so no record was counted twice or lost, and nothing a killed worker wrote after its
    last commit is visible."""
    counts: dict[str, list[int]] = {}
    for record in cluster.read(sink, "read_committed"):
        counts.setdefault(record.key.decode(), []).append(LONG.deserialize(sink, record.value))
    wrong = {k: v for k, v in counts.items() if v != list(range(1, expected[k] + 1))}
    assert set(counts) == set(expected) and not wrong, f"committed counts per key: {wrong}"


def create_topics(cluster, app_id: str) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    source, sink = f"{app_id}-in", f"{app_id}-out"
    cluster.create_topic(source, partitions=PARTITIONS)
    cluster.create_topic(sink, partitions=PARTITIONS)
    return source, sink


def test_killed_static_member_is_replaced_by_its_restart_with_exact_counts(  # type: ignore[no-untyped-def]
    kafka_cluster, admin, app_id, workers
) -> None:
    """Each worker is a static group member (group.instance.id): a restarted process takes the
    killed one's place in the group at once, without waiting for its session to time out. It
    restarts on the killed one's state directory, so it keeps its process id and with it its
    transactional.id: initializing transactions fences the killed process and aborts the
    transaction it left open, without waiting for its timeout."""
    source, sink = create_topics(kafka_cluster, app_id)
    first = workers("w1", "--instance-id", "i1")
    second = workers("w2", "--instance-id", "i2")
    wait_owners(admin, app_id, {"w1", "w2"}, 60, first, second)
    expected = produce(kafka_cluster, source, 400, start=0)
    wait_exact(kafka_cluster, sink, expected, 60, "exact counts from two workers", first, second)

    # Kill the first mid-stream, go on producing, restart it.
    expected += produce(kafka_cluster, source, 400, start=400, kill=first)
    restarted = workers("w1b", "--instance-id", "i1", state="w1")
    # It takes the killed member's place without a rebalance, so the coordinator keeps the killed
    # process's client.id for it: the restarted worker's own state says it runs.
    restarted.wait_event("STATE RUNNING", 60)
    wait_exact(kafka_cluster, sink, expected, 90, "exact counts after the first restart", restarted, second)

    # And again with the other worker.
    expected += produce(kafka_cluster, source, 400, start=800, kill=second)
    replacement = workers("w2b", "--instance-id", "i2", state="w2")
    replacement.wait_event("STATE RUNNING", 60)
    wait_exact(
        kafka_cluster, sink, expected, 90, "exact counts after the second restart", restarted, replacement
    )
    assert_each_count_committed_once(kafka_cluster, sink, expected)
    for worker in (restarted, replacement):
        assert worker.process.poll() is None, worker.log_tail()


def test_killed_worker_tasks_are_taken_over_by_the_survivor_with_exact_counts(  # type: ignore[no-untyped-def]
    kafka_cluster, admin, app_id, workers
) -> None:
    source, sink = create_topics(kafka_cluster, app_id)
    first = workers("w1")
    second = workers("w2")
    wait_owners(admin, app_id, {"w1", "w2"}, 60, first, second)
    expected = produce(kafka_cluster, source, 400, start=0)
    wait_exact(kafka_cluster, sink, expected, 60, "exact counts from two workers", first, second)

    # Kill the first mid-stream: records arrive before, while and after it dies.
    expected += produce(kafka_cluster, source, 400, start=400, kill=first)
    # The survivor takes every partition once the broker expires the dead worker's session, and
    # restores the counts once the broker aborts the dead worker's open transaction.
    wait_owners(admin, app_id, {"w2"}, 60, second)
    wait_exact(kafka_cluster, sink, expected, 90, "exact counts after the takeover", second)

    # A new worker joins; then the survivor is killed, and the new one takes over.
    third = workers("w3")
    wait_owners(admin, app_id, {"w2", "w3"}, 60, second, third)
    expected += produce(kafka_cluster, source, 400, start=800, kill=second)
    wait_owners(admin, app_id, {"w3"}, 60, third)
    wait_exact(kafka_cluster, sink, expected, 90, "exact counts after the second takeover", third)
    assert_each_count_committed_once(kafka_cluster, sink, expected)
    assert third.process.poll() is None, third.log_tail()


def test_shutdown_application_stops_both_processes(kafka_cluster, admin, app_id, workers) -> None:  # type: ignore[no-untyped-def]
    source, sink = create_topics(kafka_cluster, app_id)
    options = ("--poison", "poison", "--handler", "SHUTDOWN_APPLICATION")
    first = workers("w1", *options)
    second = workers("w2", *options)
    wait_owners(admin, app_id, {"w1", "w2"}, 60, first, second)
    expected = produce(kafka_cluster, source, 100, start=0)
    wait_exact(kafka_cluster, sink, expected, 60, "both workers processing", first, second)

    # One poison record: whichever worker owns its partition raises and asks for the shutdown.
    kafka_cluster.produce(source, b"key-0", b"poison", timestamp=int(time.time() * 1000))
    for worker in (first, second):
        worker.wait_event("FINAL ERROR", 60)
        assert worker.process.wait(30) == 0, worker.log_tail()
    for worker in (first, second):
        log = worker.log_text()
        assert log.count(SHUTDOWN_DETECTED) == 1, worker.log_tail()
        assert "STATE ERROR PENDING_ERROR" in worker.events
    raised = [w for w in (first, second) if "PoisonRecordError" in w.log_text()]
    assert len(raised) == 1


# -- scale-out and rolling restarts with the state-aware assignor (KIP-429, KIP-441) ------------------

STATE_OPTIONS = ("--store", "rocks_db", "--report-ms", "200", "--threads", "1")
BIG_KEYS = 2000  # a store large enough that a client without it is far from caught up


def latest_tasks(worker: Worker) -> tuple[set[str], set[str]]:
    """The worker's active and standby tasks, from its latest TASKS line."""
    lines = [e for e in list(worker.events) if e.startswith("TASKS")]
    if not lines:
        return set(), set()
    active, _, standby = lines[-1].removeprefix("TASKS").partition("|")
    return set(active.split()), set(standby.split())


def progress(worker: Worker) -> list[tuple[float, dict[str, int]]]:
    """(monotonic time, records processed per task) from the worker's PROGRESS lines."""
    timeline = []
    for event in list(worker.events):
        if event.startswith("PROGRESS"):
            _, at, *counts = event.split()
            timeline.append((float(at), {t: int(n) for t, n in (c.split("=") for c in counts)}))
    return timeline


def longest_stall(worker: Worker, task: str, start: float, end: float) -> float:
    """The longest time within [start, end] in which ``task`` processed nothing on ``worker``."""
    moments = [at for at, counts in progress(worker) if start <= at <= end and task in counts]
    changes = [start]
    previous = None
    for at, counts in progress(worker):
        if at < start - 1 or at > end:
            continue
        if previous is not None and counts.get(task, 0) > previous:
            changes.append(at)
        previous = counts.get(task, 0)
    changes.append(end)
    assert moments, f"{worker.name} reported no progress of {task}"
    return max(b - a for a, b in itertools.pairwise(changes))


class SteadyProducer:
    """Produces records over BIG_KEYS keys at a steady rate from a thread, until stopped."""

    def __init__(self, cluster, topic: str, rate: int) -> None:  # type: ignore[no-untyped-def]
        self.cluster, self.topic, self.rate = cluster, topic, rate
        self.expected: Counter[str] = Counter()
        self.produced = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)

    def produce(self, count: int) -> None:
        now = int(time.time() * 1000)
        for _ in range(count):
            key = f"key-{self.produced % BIG_KEYS}"
            self.cluster.produce(self.topic, key.encode(), b"v", timestamp=now)
            self.expected[key] += 1
            self.produced += 1

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        batch = max(1, self.rate // 20)
        while not self._stop.wait(0.05):
            self.produce(batch)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


# Workers that warm tasks up before they take them: probing every 2 s, caught up within 50 records.
WARM_UP_OPTIONS = (*STATE_OPTIONS, "--probing-ms", "2000", "--acceptable-lag", "50")


def three_stateful_workers(kafka_cluster, app_id: str, workers) -> tuple[tuple[Worker, ...], SteadyProducer]:  # type: ignore[no-untyped-def]
    """Three workers (WARM_UP_OPTIONS) running every task of a 6-partition stateful count, with
    exact counts over a store of BIG_KEYS keys, and a producer ready to produce steadily."""
    source, sink = f"{app_id}-in", f"{app_id}-out"
    kafka_cluster.create_topic(source, partitions=6)
    kafka_cluster.create_topic(sink, partitions=6)
    group = tuple(workers(name, *WARM_UP_OPTIONS) for name in ("w1", "w2", "w3"))
    producer = SteadyProducer(kafka_cluster, source, rate=300)
    producer.produce(6000)
    every = {f"0_{p}" for p in range(6)}
    wait_until(
        running(lambda: set().union(*(latest_tasks(w)[0] for w in group)) == every, group),
        90,
        "the three workers running every task",
    )
    wait_exact(kafka_cluster, sink, producer.expected, 90, "exact counts from three workers", *group)
    return group, producer


def test_scale_out_takes_tasks_after_warm_ups_while_the_others_keep_processing(  # type: ignore[no-untyped-def]
    kafka_cluster, admin, app_id, workers
) -> None:
    """Three workers of a stateful count; a fourth joins. It first warms up the tasks it is to
    take (their changelogs are far beyond acceptable.recovery.lag), and gets them only after a
    probing rebalance found them caught up; the tasks that stay never stop processing; counts stay
    exact under exactly_once_v2."""
    sink = f"{app_id}-out"
    group, producer = three_stateful_workers(kafka_cluster, app_id, workers)
    producer.start()
    try:
        before = {w.name: latest_tasks(w)[0] for w in group}
        joined_at = time.monotonic()
        fourth = workers("w4", *WARM_UP_OPTIONS)
        wait_until(running(lambda: bool(latest_tasks(fourth)[0]), (*group, fourth)), 120, "tasks on w4")
        taken_at = time.monotonic()
        log = fourth.log_text()
        assert "Warming up" in log and "caught up and are active here now" in log, fourth.log_tail()
        assert log.index("Warming up") < log.index("caught up and are active here now")
        # Progress reported a second past the hand-over shows whether the staying tasks went on.
        wait_until(
            running(lambda: all(progress(w)[-1][0] > taken_at + 1.0 for w in group), (*group, fourth)),
            30,
            "progress reports after the hand-over",
        )
    finally:
        producer.stop()
    # The warm-ups may catch up in different probing rounds: w4 can take a second task after the
    # first hand-over. What stays is what never moved to it.
    moved = latest_tasks(fourth)[0]
    for worker in group:
        stayed = before[worker.name] - moved
        assert stayed <= latest_tasks(worker)[0], f"{worker.name} lost tasks that did not move"
        for task in stayed:
            stall = longest_stall(worker, task, joined_at, taken_at + 1.0)
            assert stall < 2.5, f"task {task} on {worker.name} stopped for {stall:.1f}s during the scale-out"
    wait_exact(
        kafka_cluster, sink, producer.expected, 120, "exact counts after the scale-out", *group, fourth
    )
    assert_each_count_committed_once(kafka_cluster, sink, producer.expected)


@pytest.mark.parametrize("members", [3, 4])
def test_rolling_restart_of_static_members_moves_no_task_and_restores_only_the_tail(  # type: ignore[no-untyped-def]
    kafka_cluster, admin, app_id, workers, members
) -> None:
    """Static members (group.instance.id) restarted one at a time, each cleanly: every worker
    keeps its own tasks throughout, and a restarted one restores only what its changelogs gained
    since its checkpoint (exact counts afterwards show the state was kept, not rebuilt empty)."""
    source, sink = create_topics(kafka_cluster, app_id)
    current = {
        name: workers(name, *STATE_OPTIONS, "--instance-id", name, state=name)
        for name in (f"w{n}" for n in range(1, members + 1))
    }
    producer = SteadyProducer(kafka_cluster, source, rate=200)
    producer.produce(4000)
    every = {f"0_{p}" for p in range(PARTITIONS)}
    wait_until(
        running(
            lambda: set().union(*(latest_tasks(w)[0] for w in current.values())) == every,
            tuple(current.values()),
        ),
        90,
        "every task running",
    )
    wait_exact(kafka_cluster, sink, producer.expected, 90, "exact counts", *current.values())
    owned = {name: latest_tasks(w)[0] for name, w in current.items()}
    for round_, name in enumerate(sorted(current)):
        old = current[name]
        old.process.send_signal(signal.SIGTERM)
        old.wait_event("FINAL", 60)
        producer.produce(300)
        new = workers(f"{name}-{round_}", *STATE_OPTIONS, "--instance-id", name, state=name)
        current[name] = new
        wait_until(
            running(lambda new=new, name=name: latest_tasks(new)[0] == owned[name], tuple(current.values())),
            90,
            f"{name} back",
        )
        # Nobody processed its tasks while it was away (a static member's restart is no
        # rebalance), so its checkpoints are current: whatever it restores starts past 0.
        restores = [e.split() for e in new.events if e.startswith("RESTORE")]
        for _, partition, start, end in restores:
            assert int(end) == 0 or int(start) > 0, f"{name} restored {partition} from scratch"
        for other, worker in current.items():
            assert latest_tasks(worker)[0] == owned[other], f"{other}'s tasks moved while {name} restarted"
    wait_exact(
        kafka_cluster, sink, producer.expected, 120, "exact counts after the restarts", *current.values()
    )
    assert_each_count_committed_once(kafka_cluster, sink, producer.expected)


def test_a_member_killed_while_it_warms_up_stops_no_task_and_counts_stay_exact(  # type: ignore[no-untyped-def]
    kafka_cluster, admin, app_id, workers
) -> None:
    """Three workers of a stateful count; a fourth joins, is given warm-up tasks by a probing
    rebalance, and is killed (SIGKILL) before it takes any. The broker expires its session; the
    three keep every task they had, none of them stops processing for long, and the counts stay
    exact under exactly_once_v2."""
    sink = f"{app_id}-out"
    group, producer = three_stateful_workers(kafka_cluster, app_id, workers)
    producer.start()
    try:
        before = {w.name: latest_tasks(w)[0] for w in group}
        joined_at = time.monotonic()
        fourth = workers("w4", *WARM_UP_OPTIONS)
        wait_until(running(lambda: "Warming up" in fourth.log_text(), (*group, fourth)), 120, "w4 warming up")
        assert not latest_tasks(fourth)[0], f"w4 took active tasks before it caught up: {fourth.log_tail()}"
        fourth.kill()
        killed_at = time.monotonic()
        # The session (6 s) expires and the group rebalances without w4; progress reported well
        # after that shows whether the three went on through it.
        wait_until(running(lambda: owners(admin, app_id) == {"w1", "w2", "w3"}, group), 60, "w4 expired")
        settled_at = time.monotonic()
        wait_until(
            running(lambda: all(progress(w)[-1][0] > settled_at + 1.0 for w in group), group),
            30,
            "progress reports after w4 left",
        )
    finally:
        producer.stop()
    for worker in group:
        assert latest_tasks(worker)[0] == before[worker.name], f"{worker.name}'s tasks moved"
        for task in before[worker.name]:
            stall = longest_stall(worker, task, joined_at, settled_at + 1.0)
            assert stall < 2.5, (
                f"task {task} on {worker.name} stopped for {stall:.1f}s while w4 joined "
                f"({killed_at - joined_at:.1f}s after the join it was killed)"
            )
    wait_exact(kafka_cluster, sink, producer.expected, 120, "exact counts after w4 died", *group)
    assert_each_count_committed_once(kafka_cluster, sink, producer.expected)
