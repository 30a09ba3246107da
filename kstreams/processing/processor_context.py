"""The task's ProcessorContext: what processors and stores see of the task that runs them.

``ProcessorContextImpl`` implements both ``ProcessorContext`` (for processors) and
``StateStoreContext`` (for stores). There is one per task. The task sets what it runs: ``node``,
the node being run, so that ``forward`` reaches that node's children and ``get_state_store``
checks that node's stores; and ``record_context``, the position and timestamp of the record being
processed. ``PunctuationSchedule`` is one scheduled punctuation. Like the task, a context is used
by one thread at a time and has no lock.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from kstreams._native.per_record import ContextRouting
from kstreams._native.store_core import ChangelogSender
from kstreams.errors import ProcessorStateException, StreamsException, TopologyException
from kstreams.processing.record_context import RecordContext
from kstreams.processor import (
    Cancellable,
    ProcessorContext,
    PunctuationType,
    Punctuator,
    Record,
    RecordMetadata,
    TaskId,
    To,
)
from kstreams.topology.graph import ProcessorNode

if TYPE_CHECKING:
    from kstreams._native.per_record import NodeBase
    from kstreams._native.record_batch import RecordBatch
    from kstreams._native.record_cache import RecordCache
    from kstreams.metrics import MetricsRegistry
    from kstreams.processing.task import StreamTask
    from kstreams.state.store import RestoreCallback, StateStore

__all__ = ["ProcessorContextImpl", "PunctuationSchedule"]

logger = logging.getLogger(__name__)


class PunctuationSchedule(Cancellable):
    """A scheduled punctuation: the node it runs as, its interval and its next due time;
    ``order`` is its place among the task's schedules, in the order they were made."""

    __slots__ = ("callback", "cancelled", "interval_ms", "next_due", "node", "order", "type")

    def __init__(
        self,
        node: NodeBase,
        interval_ms: int,
        type: PunctuationType,
        callback: Punctuator,
        first_due: int,
        order: int = 0,
    ) -> None:
        self.order = order
        self.node = node
        self.interval_ms = interval_ms
        self.type = type
        self.callback = callback
        self.next_due = first_due
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def advance(self, now: int) -> None:
        """Move past ``now``: skip missed intervals, keep the alignment (Kafka's ``next``)."""
        due = self.next_due + self.interval_ms
        if now >= due:
            due = self.next_due + ((now - self.next_due) // self.interval_ms + 1) * self.interval_ms
        self.next_due = due


class ProcessorContextImpl(ContextRouting, ProcessorContext[Any, Any]):
    """The task's context: what its processors see (``ProcessorContext``) and what its stores see
    (``StateStoreContext``). One per task; it tracks the node being run so that ``forward`` and
    ``get_state_store`` act for that node.

    For processors that forward outside ``process`` and punctuations (a caching store's flush
    listener), ``forward_from(node_name, record)`` forwards as the named node; capture the name
    from ``current_node_name`` in ``init``.
    """

    def __init__(self, task: StreamTask) -> None:
        self._task = task
        # The node being run (None between runs), set by the task and by forward.
        self.node: NodeBase | None = None
        # The record being processed or forwarded, or the running punctuation; each context has its
        # own idle one because forward() updates the timestamp of the current one in place.
        self.record_context = RecordContext()
        # (exception, node name) of the innermost node a failure came from
        self._failed: tuple[BaseException, str] | None = None
        # node name -> the one input topic feeding it (None: several), for forward_from
        self._input_topics: dict[str, str | None] | None = None

    # ---- identity and configuration

    @property
    def application_id(self) -> str:
        return self._task.application_id

    @property
    def task_id(self) -> TaskId:
        return self._task.task_id

    @property
    def app_configs(self) -> Mapping[str, Any]:
        return self._task.config

    @property
    def metrics(self) -> MetricsRegistry | None:
        return self._task.metrics

    @property
    def client_id(self) -> str | None:
        return self._task.client_id

    @property
    def current_node_name(self) -> str | None:
        node = self.node
        return node.name if node is not None else None

    def failed_node_name(self, exc: BaseException) -> str | None:
        """The innermost node ``exc`` came from (the node being run if forward did not see it)."""
        failed = self._failed
        if failed is not None and failed[0] is exc:
            return failed[1]
        return self.current_node_name

    def clear_failure(self) -> None:
        """Forget the node of an earlier failure (before the task runs something new)."""
        self._failed = None

    # ---- routing

    # ``forward`` is ContextRouting's (C): it calls ``_route`` for a named child or a ``To``.
    def _route(self, record: Record[Any, Any], child_name: str | To) -> tuple[Record[Any, Any], Any]:
        """The record to forward and the children it goes to, for ``forward(record, child_name)``."""
        # forward() is called by the node being run: ``node`` is set (as in Kafka, forwarding
        # outside a processor fails, here on the missing node).
        node = cast("NodeBase", self.node)
        if not isinstance(child_name, str):
            if not isinstance(child_name, To):
                raise TypeError(
                    f"forward() takes a child processor's name or a To, got {child_name!r}; "
                    "write forward(record, 'child') or forward(record, To.child('child'))."
                )
            record, name = child_name.apply(record)
            if name is None:
                return record, node.children
            child_name = name
        child = node.children_by_name.get(child_name)
        if child is None:
            raise StreamsException(
                f"Unknown downstream node: {child_name} either does not exist or is not connected to "
                f"processor {node.name}; its children are {[c.name for c in node.children]}.",
                task_id=self._task.task_id,
            )
        return record, (child,)

    def forward_from(
        self, node_name: str, record: Record[Any, Any], child_name: str | To | None = None
    ) -> None:
        """Forward ``record`` to the children of ``node_name`` (as if that node forwarded it).

        Outside record processing (a cache flushing at commit), the record goes with the position
        of the input the node reads: Kafka forwards a flushed entry with the record context of the
        record that last wrote it, which downstream sees (a suppress buffer counts its topic in
        its byte bound). The cache keeps no topic per entry, so this is the topic of the one
        source that feeds the node (none when several topics do), and the offset is unknown (-1)."""
        previous = self.node
        self.node = self._task.graph.nodes[node_name]
        saved = self.record_context
        if saved.topic is None:
            topic = self._input_topic_of(node_name)
            if topic is not None:
                self.record_context = RecordContext(topic, self._task.task_id.partition, -1, saved.timestamp)
        try:
            self.forward(record, child_name)
        finally:
            self.node = previous
            self.record_context = saved

    def _input_topic_of(self, node_name: str) -> str | None:
        """The one input topic of the task whose records reach ``node_name`` (None if several)."""
        topics = self._input_topics
        if topics is None:
            topics = self._input_topics = {}
        if node_name not in topics:
            found: set[str] = set()
            for topic, source in self._task.graph.sources_by_topic.items():
                stack, seen = list(source.children), set()
                while stack:
                    node = stack.pop()
                    if node.name == node_name:
                        found.add(topic)
                        break
                    if node.name not in seen:
                        seen.add(node.name)
                        stack.extend(node.children)
            topics[node_name] = found.pop() if len(found) == 1 else None
        return topics[node_name]

    # ---- stores

    def get_state_store(self, name: str) -> Any:
        node = self.node
        # As in Kafka, a global store is open to every processor without being connected.
        global_store = self._task.global_stores.get(name)
        if global_store is not None and isinstance(node, ProcessorNode) and name not in node.stores:
            return global_store
        if not isinstance(node, ProcessorNode) or name not in node.stores:
            node_name = node.name if node is not None else None
            raise TopologyException(
                f"Processor {node_name} has no access to StateStore {name} as the store is not connected "
                "to the processor. Connect it with add_state_store(builder, processor_name) or "
                "connect_processor_and_state_stores(processor_name, store_name) (in the DSL, pass the "
                "store name to process())."
            )
        return self._task.graph.stores[name]

    # ---- time and punctuation

    def schedule(
        self, interval: timedelta | int, punctuation_type: PunctuationType, callback: Punctuator
    ) -> Cancellable:
        if isinstance(interval, timedelta):
            interval_ms = int(interval.total_seconds() * 1000)
        else:
            interval_ms = int(interval)
        if interval_ms < 1:
            raise ValueError(f"The minimum supported scheduling interval is 1 millisecond, got {interval!r}.")
        if self.node is None:
            raise StreamsException(
                "schedule() is only possible while a processor runs (in init, process or a punctuation).",
                task_id=self._task.task_id,
            )
        return self._task.schedule_punctuation(
            self.node, interval_ms, PunctuationType(punctuation_type), callback
        )

    def current_stream_time_ms(self) -> int:
        return self._task.stream_time

    def current_system_time_ms(self) -> int:
        return self._task.wall_clock_ms()

    def commit(self) -> None:
        self._task.commit_requested = True

    def record_metadata(self) -> RecordMetadata | None:
        return self.record_context.metadata()

    # ---- StateStoreContext

    def state_dir(self) -> str:
        return self._task.task_state_dir()

    def register(self, store: StateStore, restore_callback: RestoreCallback) -> None:
        self._task.register_store(store, restore_callback)

    def log_change(
        self,
        store_name: str,
        key: bytes,
        value: bytes | None,
        timestamp: int,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> None:
        task = self._task
        topic = self._changelog(store_name)
        task.collector.send(topic, task.task_id.partition, key, value, timestamp, headers)

    def change_logger(self, store_name: str) -> ChangelogSender:
        """``log_change`` for one store as a callable of (key, value, timestamp) that goes
        straight to the collector (and ``log(key, value)``, with the current record's timestamp):
        a store's changelog topic and partition, and its task's collector, never change while the
        task lives."""
        task = self._task
        return ChangelogSender(task.collector, self._changelog(store_name), task.task_id.partition, self)

    def log_changes(self, store_name: str, changes: RecordBatch) -> None:
        task = self._task
        task.collector.send_batch(self._changelog(store_name), task.task_id.partition, changes)

    def _changelog(self, store_name: str) -> str:
        task = self._task
        topic = task.subtopology.changelog_topics.get(store_name)
        if topic is None:
            raise ProcessorStateException(
                f"Store {store_name} of task {task.task_id} has logging disabled, so it has no changelog "
                "to write to: its change-logging layer should not be present.",
                task_id=task.task_id,
            )
        return topic  # type: ignore[no-any-return]

    def record_cache(self) -> RecordCache | None:
        return self._task.record_cache

    def track_header_notes(self, notes: dict[bytes, Any]) -> None:
        """A caching layer's headers of dirty entries (``header_notes``): while any are held the
        task runs compiled only the segments that keep them current (``carries_headers``)."""
        self._task.header_notes.append(notes)

    @property
    def cache_holder(self) -> StreamTask:
        """The task: its ``record_cache`` attribute is the cache of the thread running it now
        (what ``record_cache()`` returns), for store accessors that read it per record in C."""
        return self._task

    def current_timestamp(self) -> int:
        return self.record_context.timestamp
