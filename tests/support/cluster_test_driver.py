"""``ClusterTestDriver``: the interface of ``TopologyTestDriver`` over a KafkaStreams client on a
cluster, so a test body written for the driver also runs on the real runtime.

Each topic the topology reads or writes that it does not own (its user topics) is created with one
partition before the client starts. ``pipe_input`` produces the record to partition 0 and returns
once the application caught up: every partition it reads (user and repartition topics) has its
committed offset at the end. A commit comes after the task processed the records it covers,
flushed its caches and stores and flushed the producer, so by then every record downstream of the
piped one was written and processed too, as after the driver's ``pipe_input``: what processors
captured, stores and output topics are read without further waiting. As each record is committed
before the next is piped, a store cache is flushed after each record, as the driver flushes it;
but the records one piped record sends through a repartition topic may be processed before one
commit or several, where the driver commits after each (so the ``drive`` fixture turns the cache
off unless a test asks for it).

Stores are read through interactive queries (``KafkaStreams.store``), whose read-only views have
the driver stores' read methods. The mock wall clock has no counterpart here: a test that moves it
(or that reads what only the driver has, such as its errors on piping) stays on the driver; so
does one that pipes into a global table's topic, whose records no committed offset covers.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from kstreams import KafkaStreams, Topology
from kstreams.cluster.port import TopicPartition
from kstreams.testing import TestInputTopic, TestOutputTopic, _to_ms

__all__ = ["ClusterTestDriver"]

Headers = list[tuple[str, bytes | None]]
WaitUntil = Callable[[Callable[[], bool], float, str], None]

_STOPPED = (
    KafkaStreams.State.PENDING_ERROR,
    KafkaStreams.State.ERROR,
    KafkaStreams.State.PENDING_SHUTDOWN,
    KafkaStreams.State.NOT_RUNNING,
)


class ClusterTestDriver:
    """Runs ``topology`` on a KafkaStreams client of ``cluster`` with ``config`` (see the module
    docstring); ``wait_until`` is the tests' ``wait_until(condition, timeout, what)``."""

    def __init__(
        self,
        topology: Topology,
        config: Mapping[str, Any],
        cluster: Any,
        wait_until: WaitUntil,
        timeout: float = 30.0,
    ) -> None:
        self._cluster = cluster
        self._wait_until = wait_until
        self._timeout = timeout
        self._streams = KafkaStreams(topology, dict(config), cluster=cluster)
        self._failure: BaseException | None = None
        self._streams.set_uncaught_exception_handler(self._keep_failure)
        plan = self._streams.plan
        self._group = plan.application_id
        internal = set(plan.internal_topics)
        user_topics = {t for s in plan.subtopologies for t in (*s.source_topics, *s.sink_topics)}
        user_topics.update(plan.global_source_topics)
        existing = cluster.topics()
        for topic in sorted(user_topics - internal - set(existing)):
            cluster.create_topic(topic, 1)
        self._sources = plan.all_source_topics
        self._global_sources = set(plan.global_source_topics)
        self._next_offsets: dict[TopicPartition, int] = {}  # of output records not yet queued
        self._outputs: dict[str, deque[tuple[bytes | None, bytes | None, int, Headers | None]]] = {}
        self._admin = cluster.admin()
        # The default of the input topics' clock, as the driver's starts at its mock wall clock.
        self._created_ms = int(time.time() * 1000)
        self._streams.start()
        self._wait_until(
            lambda: self._running_or_raise() and self._streams.state is KafkaStreams.State.RUNNING,
            timeout,
            "the client RUNNING",
        )

    @property
    def streams(self) -> KafkaStreams:
        return self._streams

    # ----------------------------------------------------------------- topics

    def create_input_topic(
        self,
        name: str,
        key_serializer: Any,
        value_serializer: Any,
        start_timestamp: int | datetime | None = None,
        auto_advance: int | timedelta = 0,
    ) -> TestInputTopic:
        """As the driver's: without ``start_timestamp`` the topic's clock starts at the time the
        driver was made."""
        start = self._created_ms if start_timestamp is None else _to_ms(start_timestamp, "start_timestamp")
        return TestInputTopic(
            self,  # type: ignore[arg-type]  # the driver's _pipe and _output_queue, nothing else
            name,
            key_serializer,
            value_serializer,
            start,
            _to_ms(auto_advance, "auto_advance"),
        )

    def create_output_topic(
        self, name: str, key_deserializer: Any, value_deserializer: Any
    ) -> TestOutputTopic:
        return TestOutputTopic(self, name, key_deserializer, value_deserializer)  # type: ignore[arg-type]

    # ----------------------------------------------------------------- stores

    def get_all_state_stores(self) -> dict[str, Any]:
        return {name: self._streams.store(name) for name in self._streams.plan.store_builders}

    def get_state_store(self, name: str) -> Any:
        return self._streams.store(name)

    def get_key_value_store(self, name: str) -> Any:
        return self._typed_store(name, "keyvalue", timestamped=False)

    def get_timestamped_key_value_store(self, name: str) -> Any:
        return self._typed_store(name, "keyvalue", timestamped=True)

    def get_window_store(self, name: str) -> Any:
        return self._typed_store(name, "window", timestamped=False)

    def get_timestamped_window_store(self, name: str) -> Any:
        return self._typed_store(name, "window", timestamped=True)

    def get_session_store(self, name: str) -> Any:
        return self._typed_store(name, "session", timestamped=False)

    def _typed_store(self, name: str, store_type: str, timestamped: bool) -> Any:
        """The store's interactive-query view; None, as the driver answers, if the topology has no
        such store of that type."""
        builder = self._streams.plan.store_builders.get(name)
        if builder is None or builder.store_type != store_type:
            return None
        return self._streams.store(name, timestamped=timestamped)

    # ------------------------------------------------------------- lifecycle

    def close(self) -> None:
        if not self._streams.close(timeout=30):
            raise AssertionError("The KafkaStreams client did not close within 30 s")

    # ------------------------------------------------- what the test topics call

    def _pipe(
        self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers | None
    ) -> None:
        if topic in self._global_sources:
            # The global thread commits no offsets: nothing says when it applied the record.
            raise NotImplementedError(
                f"ClusterTestDriver cannot tell when a global store took a record; {topic} feeds a "
                "global table: run this test on the driver (or wait on the store itself)."
            )
        self._cluster.produce(topic, key, value, timestamp=timestamp, partition=0, headers=headers)
        self._wait_until(
            self._caught_up, self._timeout, f"the application to process the record piped to {topic}"
        )

    def _output_queue(self, topic: str) -> deque[tuple[bytes | None, bytes | None, int, Headers | None]]:
        """The records of ``topic`` not read yet, taken by offset (the runtime may purge a
        repartition topic's head meanwhile), in partition then offset order."""
        queue = self._outputs.setdefault(topic, deque())
        if topic in self._cluster.topics():
            for r in self._cluster.read(topic):
                tp = TopicPartition(topic, r.partition)
                if r.offset >= self._next_offsets.get(tp, 0):
                    queue.append((r.key, r.value, r.timestamp, r.headers))
                    self._next_offsets[tp] = r.offset + 1
        return queue

    # ----------------------------------------------------------------- waiting

    def _keep_failure(self, exc: BaseException) -> Any:
        from kstreams import StreamsUncaughtExceptionResponse

        self._failure = exc
        return StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT

    def _running_or_raise(self) -> bool:
        if self._failure is not None or self._streams.state in _STOPPED:
            raise AssertionError(
                f"The KafkaStreams client stopped ({self._streams.state.name}): {self._failure!r}"
            ) from self._failure
        return True

    def _caught_up(self) -> bool:
        """Every partition the application reads has its committed offset at its end, and the ends
        did not move while the committed offsets were read. A record written downstream of a piped
        one is flushed before the commit covering the piped one, so the second read of the ends
        sees it if the committed offsets already covered its upstream record."""
        self._running_or_raise()
        partitions = [
            TopicPartition(topic, p)
            for topic, description in self._cluster.topics().items()
            if topic in self._sources
            for p in range(description.partitions)
        ]
        ends = {tp: end for tp, (_start, end) in self._admin.list_offsets(partitions).items()}
        committed = self._admin.committed_offsets(self._group, partitions)
        if any(committed.get(tp, 0) < end for tp, end in ends.items()):
            return False
        again = {tp: end for tp, (_start, end) in self._admin.list_offsets(partitions).items()}
        return again == ends
