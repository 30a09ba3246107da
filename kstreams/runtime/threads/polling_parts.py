"""What the polling thread is built from, and what it reports.

``PollingParts`` holds the collaborators of ``PollingThread`` (built once by ``StreamsRuntime``,
the composition root), so the thread can be built alone, as its unit test does. The producer is
held by ``ProducerRenewal``: a fatal producer error replaces it, and whoever closes or flushes it
later must find the current one. ``Failure`` is what the other threads queue for the polling
thread, ``RuntimeHooks`` what the polling thread tells the client.

Threads: ``ProducerRenewal.renew`` runs on the polling thread only; ``current`` is read by any
thread (one attribute read), the others after the polling thread stopped.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kstreams.cluster.port import Cluster, Consumer, Producer

if TYPE_CHECKING:
    from kstreams._native.per_record import OutputPartitionCounts
    from kstreams._native.record_collector import RecordCollector
    from kstreams._native.scheduler import TaskScheduler
    from kstreams.config import StreamsConfig
    from kstreams.metrics import MetricsRegistry
    from kstreams.runtime.assignment.streams_assignor import StreamsAssignor
    from kstreams.runtime.internal_topics.manager import SetupResult
    from kstreams.runtime.internal_topics.repartition_purge import RepartitionPurger
    from kstreams.runtime.restoration.state_updater import StateUpdater
    from kstreams.runtime.retry import Retry
    from kstreams.runtime.tasks.commit import Committer
    from kstreams.runtime.tasks.task_manager import TaskEntry, TaskManager
    from kstreams.runtime.threads.stream_thread import StreamThread

__all__ = ["Failure", "FailureSource", "PollingParts", "ProducerRenewal", "RuntimeHooks"]


class FailureSource(enum.Enum):
    """Which kind of thread an exception came from."""

    STREAM = "stream"
    RESTORE = "restore"
    POLLING = "polling"


@dataclass(frozen=True)
class Failure:
    """An exception raised on another thread, queued for the polling thread to handle.
    ``replace_thread`` is False for a stream thread that a removal had picked before it failed:
    REPLACE_THREAD then revives its task but starts no thread in its place."""

    source: FailureSource
    exception: BaseException
    thread: StreamThread | None = None
    entry: TaskEntry | None = None
    replace_thread: bool = True


class RuntimeHooks(Protocol):
    """What the polling thread reports to the client (implemented by KafkaStreams)."""

    def on_rebalance_started(self) -> None: ...

    def on_rebalance_finished(self) -> None: ...

    def on_failure(self, failure: Failure) -> None: ...

    def on_application_error(self, code: int) -> None: ...

    def on_assignment(self) -> SetupResult:
        """Internal topic checks for this assignment (may raise to the handler)."""
        ...


class ProducerRenewal:
    """The client's producer, and how to make a new one after a fatal error."""

    def __init__(self, make: Callable[[], Producer]) -> None:
        self._make = make
        self.current: Producer = make()

    def renew(self) -> Producer:
        """Replace the producer (the caller closed the old one) and return the new one. Under
        exactly_once_v2 the new producer, with the same transactional.id, fences the old."""
        self.current = self._make()
        return self.current

    @classmethod
    def of(cls, cluster: Cluster, config: dict[str, Any]) -> ProducerRenewal:
        """Producers made by ``cluster`` with ``config``."""
        return cls(lambda: cluster.producer(config))


@dataclass(frozen=True)
class PollingParts:
    """The collaborators of one ``PollingThread`` (see the module docstring)."""

    config: StreamsConfig
    consumer: Consumer
    producer: ProducerRenewal
    collector: RecordCollector
    scheduler: TaskScheduler
    task_manager: TaskManager
    state_updater: StateUpdater
    committer: Committer
    purger: RepartitionPurger
    assignor: StreamsAssignor
    retry: Retry
    metrics: MetricsRegistry
    # The output topics' partition counts (the production exception handler's skips need them).
    partition_count: OutputPartitionCounts
    source_topics: list[str]
