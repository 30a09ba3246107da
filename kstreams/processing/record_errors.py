"""A task's handling of failed records: the processing and production exception handlers, the
dead-letter queue, and the dropped-records metric.

Processing (KIP-1033): when a processing handler or a dead-letter topic is configured, each
processor node's ``process`` is wrapped; an exception the processor raises (not the runtime's own
``StreamsException``) goes to the handler with the node, the task and the input record's position
and raw bytes. CONTINUE drops the record from that node on (its siblings still get it, as in
Kafka, where the handler runs in the node); FAIL fails the task, and the outer nodes' wrappers let
that failure pass untouched. Without either setting nothing is wrapped: the hot path is as before.

Production: a sink whose serializer fails asks the production handler
(``handle_serialization_exception``); CONTINUE drops the record. A record the cluster rejects for
good (too large for the topic) asks it too (``handle``, through ``skip_rejected`` on the polling
thread, which sends): CONTINUE goes on without it under at_least_once; under exactly_once_v2 the
transaction holding it cannot commit, so the failure stands whatever the handler says.

Dead letters (KIP-1034): a handler may answer with a ``Response`` carrying dead-letter records;
they are sent through the task's record collector before the decision takes effect, so they
commit with the task's other output (in the same transaction under exactly_once_v2).

Records dropped by any handler, the deserialization handler's included, count in the task's
``dropped-records`` metric (stream-task-metrics).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kstreams._native.record_batch import default_partition
from kstreams.cluster.port import RecordRejectedError
from kstreams.errors import (
    DeadLetterRecord,
    ErrorHandlerContext,
    ProcessingExceptionHandler,
    ProductionExceptionHandler,
    Response,
    SerializationExceptionOrigin,
    ShutdownRequestedException,
    StreamsException,
)

if TYPE_CHECKING:
    from kstreams._native.record_collector import RecordCollector
    from kstreams.metrics import Sensor
    from kstreams.processing.task import StreamTask
    from kstreams.processor import Record, TaskId
    from kstreams.topology.graph import ProcessorNode

__all__ = [
    "FailedProcessingException",
    "RecordErrors",
    "handler_decision",
    "send_dead_letters",
    "skip_rejected",
]

logger = logging.getLogger(__name__)


class FailedProcessingException(StreamsException):
    """A processing handler failed the task on a record: outer nodes do not handle it again."""


def handler_decision(response: Any) -> Response:
    """A handler's answer as a Response (an enum member or a Response)."""
    if isinstance(response, Response):
        return response
    value = getattr(response, "value", None)
    if value not in ("CONTINUE", "FAIL"):
        raise StreamsException(
            f"An exception handler returned {response!r}: return CONTINUE or FAIL (the handler's response "
            "enum) or a kstreams.errors.Response."
        )
    return Response(response)


_round_robin = itertools.count()


def send_dead_letters(
    letters: Sequence[DeadLetterRecord],
    collector: RecordCollector,
    partition_count: Callable[[str], int],
    timestamp: int,
    task_id: TaskId | None = None,
) -> None:
    """Send dead-letter records through a record collector: keyed ones to the key's partition,
    others round robin; ``timestamp`` for those without their own."""
    for letter in letters:
        try:
            partitions = partition_count(letter.topic)
        except Exception as exc:
            raise StreamsException(
                f"Cannot write a dead-letter record to topic {letter.topic}: {exc}. Create the topic "
                "named by errors.deadletterqueue.topic.name.",
                task_id=task_id,
            ) from exc
        if letter.key is not None:
            partition = default_partition(letter.key, partitions)
        else:
            partition = next(_round_robin) % partitions
        at = letter.timestamp if letter.timestamp is not None else timestamp
        collector.send(letter.topic, partition, letter.key, letter.value, at, letter.headers)


def skip_rejected(
    handler: ProductionExceptionHandler,
    error: RecordRejectedError,
    collector: RecordCollector,
    partition_count: Callable[[str], int],
    dropped: Sensor | None = None,
) -> bool:
    """Ask the production handler about each record the cluster rejected; True when it continued
    on every one (the records stay unwritten, their dead letters are queued, and they count as
    dropped), False when it failed on any."""
    for rejected in error.records:
        context = ErrorHandlerContext(
            None, -1, -1, rejected.headers, None, None, rejected.timestamp, None, None
        )
        try:
            decision = handler_decision(handler.handle(context, rejected, RecordRejectedError([rejected])))
        except StreamsException:
            raise
        except Exception as handler_exc:
            raise StreamsException(
                f"Fatal user code error in the production exception handler: {handler_exc!r}"
            ) from handler_exc
        send_dead_letters(decision.dead_letter_queue_records, collector, partition_count, rejected.timestamp)
        if not decision.continues:
            return False
        logger.warning(
            "Dropping a record the cluster rejected for %s-%d (%s): the production exception handler "
            "continued.",
            rejected.topic,
            rejected.partition,
            rejected.reason,
        )
        if dropped is not None:
            dropped.record()
    return True


class RecordErrors:
    """The exception handlers of one task and what their decisions do."""

    def __init__(self, task: StreamTask) -> None:
        self._task = task
        config = task.config
        self.enabled = bool(getattr(config, "handles_errors", False))
        self.processing: ProcessingExceptionHandler | None = (
            config.processing_exception_handler() if self.enabled else None
        )
        self.production: ProductionExceptionHandler | None = (
            config.production_exception_handler() if self.enabled else None
        )
        self.dropped = 0
        self._dropped_sensor: Sensor | None = None

    # -- wiring ---------------------------------------------------------------------------

    def guard(self, node: ProcessorNode) -> None:
        """Wrap ``node.process`` so that its exceptions go to the processing handler."""
        process: Callable[[Record[Any, Any]], None] = node.process
        name = node.name

        def guarded(record: Record[Any, Any]) -> None:
            try:
                process(record)
            except (StreamsException, ShutdownRequestedException):
                raise  # the runtime's own failures (and a handled FAIL) are not the handler's
            except Exception as exc:
                self._on_processing_error(name, record, exc)

        node.process = guarded

    # -- decisions ------------------------------------------------------------------------

    def _on_processing_error(self, node_name: str, record: Record[Any, Any], exc: Exception) -> None:
        handler = self.processing
        assert handler is not None  # only guarded nodes report here, and only when enabled
        context = self.error_context(node_name)
        decision = self._ask("processing", lambda: handler.handle(context, record, exc))
        self.send_dead_letters(decision)
        if decision.continues:
            self.record_dropped()
            return
        raise FailedProcessingException(
            f"Exception caught in process. taskId={self._task.task_id}, processor={node_name}, "
            f"topic={context.topic}, partition={context.partition}, offset={context.offset}: {exc!r}. "
            "The processing exception handler chose to fail; set processing.exception.handler to "
            "LogAndContinueProcessingExceptionHandler to skip such records.",
            task_id=self._task.task_id,
        ) from exc

    def on_serialization_error(
        self, sink_name: str, record: Record[Any, Any], exc: Exception, is_key: bool
    ) -> bool:
        """Whether a sink drops ``record`` (its serializer raised ``exc``) and goes on; False: fail."""
        handler = self.production
        if handler is None:
            return False
        context = self.error_context(sink_name)
        origin = SerializationExceptionOrigin.KEY if is_key else SerializationExceptionOrigin.VALUE
        decision = self._ask(
            "production",
            lambda: handler.handle_serialization_exception(context, record, exc, origin),
        )
        self.send_dead_letters(decision)
        if decision.continues:
            self.record_dropped()
        return decision.continues

    def _ask(self, which: str, call: Callable[[], Any]) -> Response:
        try:
            return handler_decision(call())
        except StreamsException:
            raise
        except Exception as handler_exc:
            raise StreamsException(
                f"Fatal user code error in the {which} exception handler of task {self._task.task_id}: "
                f"{handler_exc!r}",
                task_id=self._task.task_id,
            ) from handler_exc

    # -- what decisions do ----------------------------------------------------------------

    def send_dead_letters(self, decision: Response) -> None:
        """Send a decision's dead-letter records through the task's collector."""
        task = self._task
        send_dead_letters(
            decision.dead_letter_queue_records,
            task.collector,
            task.partition_count,
            max(task.context.record_context.timestamp, 0),
            task.task_id,
        )

    def record_dropped(self) -> None:
        self.dropped += 1
        task = self._task
        if task.metrics is None:
            return
        if self._dropped_sensor is None:
            tags = {"client-id": task.client_id or "", "task-id": str(task.task_id)}
            self._dropped_sensor = task.metrics.sensor("dropped-records", "stream-task-metrics", tags)
        self._dropped_sensor.record()

    def error_context(self, node_name: str | None) -> ErrorHandlerContext:
        """The handler's view of the record being processed: its position and raw input bytes."""
        task = self._task
        position = task.context.record_context
        raw_key = raw_value = headers = None
        batch = getattr(position, "source", None)
        if batch is not None:
            for i in range(len(batch)):
                if batch.offset(i) == position.offset:
                    raw_key, raw_value, headers = batch.key(i), batch.value(i), batch.headers(i)
                    break
        return ErrorHandlerContext(
            position.topic,
            position.partition,
            position.offset,
            headers,
            node_name,
            task.task_id,
            position.timestamp,
            raw_key,
            raw_value,
        )
