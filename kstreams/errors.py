"""The exception hierarchy of kstreams, and the handlers that decide about failed records.

Every error names what happened, which topic, task or config it concerns, and what to do about it.

Three handlers decide, per record, whether processing goes on (Kafka's names): the deserialization
handler (an input record that cannot be read), the processing handler (KIP-1033: a processor raised
on a record) and the production handler (a serializer raised at a sink, or the broker rejected a
record). Each returns CONTINUE or FAIL, or a ``Response`` that also carries dead-letter records
(KIP-1034). The built-in handlers write such a record to ``errors.deadletterqueue.topic.name``
when it is set: the failed input record's raw key and value (or the rejected output record's),
with headers naming the error (``__streams.errors.exception``, ``.message``, ``.stacktrace``,
``.topic``, ``.partition``, ``.offset``).
"""

from __future__ import annotations

import abc
import enum
import logging
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ConfigException",
    "DeadLetterRecord",
    "DefaultProductionExceptionHandler",
    "DeserializationExceptionHandler",
    "DeserializationHandlerResponse",
    "ErrorHandlerContext",
    "IllegalStateException",
    "InternalTopicsAlreadySetupException",
    "InvalidStateStoreException",
    "LockException",
    "LogAndContinueExceptionHandler",
    "LogAndContinueProcessingExceptionHandler",
    "LogAndFailExceptionHandler",
    "LogAndFailProcessingExceptionHandler",
    "MisconfiguredInternalTopicException",
    "MissingInternalTopicsException",
    "MissingSourceTopicException",
    "ProcessingExceptionHandler",
    "ProcessingHandlerResponse",
    "ProcessorStateException",
    "ProductionExceptionHandler",
    "ProductionExceptionHandlerResponse",
    "Response",
    "SerializationException",
    "SerializationExceptionOrigin",
    "ShutdownRequestedException",
    "StreamsException",
    "TaskAssignmentException",
    "TaskCorruptedException",
    "TaskMigratedException",
    "TopologyException",
    "UnknownStateStoreException",
    "dead_letter_record",
]

logger = logging.getLogger(__name__)


class StreamsException(Exception):
    """Base of every kstreams error. ``task_id`` names the task it arose in, when there is one;
    ``failed_at`` the input record the task was processing, as (topic, partition, offset), when it
    failed on one (a batch of compiled processors: its first offset)."""

    def __init__(self, message: str, *, task_id: Any = None) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.failed_at: tuple[str, int, int] | None = None


class ConfigException(StreamsException, ValueError):
    """A configuration value is missing, of the wrong type, or out of range."""


class IllegalStateException(StreamsException, RuntimeError):
    """A method was called in a client state that does not allow it."""


class TopologyException(StreamsException):
    """The topology is invalid: the message names the node and how to fix it."""

    def __init__(self, message: str) -> None:
        super().__init__(f"Invalid topology: {message}")


class SerializationException(StreamsException):
    """A key or value could not be serialized or deserialized."""


class ProcessorStateException(StreamsException):
    """A state store failed (I/O, corruption, a restore that cannot complete)."""


class LockException(ProcessorStateException):
    """A task's state directory is locked by another client."""


class InvalidStateStoreException(StreamsException):
    """A store cannot be queried now (the client is not running, or the store is migrating)."""


class UnknownStateStoreException(InvalidStateStoreException):
    """No store of that name exists in the topology."""


class TaskAssignmentException(StreamsException):
    """Tasks could not be assigned (for example, partition counts could not be computed)."""


class TaskMigratedException(StreamsException):
    """A task moved to another client: it is closed without committing and its work redone there."""


class TaskCorruptedException(StreamsException):
    """A task's local state is inconsistent with its changelog: wipe it and restore."""


class ShutdownRequestedException(StreamsException):
    """Thrown in reaction to an event that requires the whole application to shut down."""


class MissingSourceTopicException(StreamsException):
    """A source topic of the topology does not exist on the cluster."""


class MissingInternalTopicsException(StreamsException):
    """Internal topics the application needs are missing; ``topics`` lists them."""

    def __init__(self, message: str, topics: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.topics: list[str] = list(topics)


class MisconfiguredInternalTopicException(StreamsException):
    """An internal topic exists but is configured in a way that can lose data or break processing."""


class InternalTopicsAlreadySetupException(StreamsException):
    """init() found every internal topic already set up: the application was initialized before."""


class DeserializationHandlerResponse(enum.Enum):
    CONTINUE = "CONTINUE"
    FAIL = "FAIL"


class ProcessingHandlerResponse(enum.Enum):
    CONTINUE = "CONTINUE"
    FAIL = "FAIL"


class ProductionExceptionHandlerResponse(enum.Enum):
    CONTINUE = "CONTINUE"
    FAIL = "FAIL"


class SerializationExceptionOrigin(enum.Enum):
    """Which part of an output record its serializer failed on."""

    KEY = "KEY"
    VALUE = "VALUE"


DLQ_TOPIC_CONFIG = "errors.deadletterqueue.topic.name"
_HEADER = "__streams.errors."


@dataclass(frozen=True)
class DeadLetterRecord:
    """A record for a dead-letter topic: raw bytes and headers, produced as they are."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int | None = None


@dataclass(frozen=True)
class Response:
    """A handler's decision with the dead-letter records to write first (KIP-1034).
    ``Response.resume(...)`` goes on with the next record; ``Response.fail(...)`` fails the task."""

    result: Any
    dead_letter_queue_records: tuple[DeadLetterRecord, ...] = ()

    @staticmethod
    def resume(dead_letter_queue_records: Sequence[DeadLetterRecord] = ()) -> Response:
        return Response("CONTINUE", tuple(dead_letter_queue_records))

    @staticmethod
    def fail(dead_letter_queue_records: Sequence[DeadLetterRecord] = ()) -> Response:
        return Response("FAIL", tuple(dead_letter_queue_records))

    @property
    def continues(self) -> bool:
        return getattr(self.result, "value", self.result) == "CONTINUE"


@dataclass(frozen=True)
class ErrorHandlerContext:
    """Where a failed record was when it failed (Kafka's ErrorHandlerContext): the input record's
    position and raw bytes, the processor node and the task."""

    topic: str | None
    partition: int
    offset: int
    headers: Any
    processor_node_id: str | None
    task_id: Any
    timestamp: int
    source_raw_key: bytes | None
    source_raw_value: bytes | None

    def record_metadata(self) -> Any:
        """The input record's position (the same view a processor context gives)."""
        from kstreams.processor import RecordMetadata

        return None if self.topic is None else RecordMetadata(self.topic, self.partition, self.offset)


def dead_letter_record(
    dlq_topic: str,
    exception: BaseException,
    key: bytes | None,
    value: bytes | None,
    topic: str | None,
    partition: int,
    offset: int,
    timestamp: int | None = None,
) -> DeadLetterRecord:
    """Kafka's dead-letter record: the failed record's bytes, with headers naming the exception,
    its message and stack trace, and the input record's topic, partition and offset."""
    stack = "".join(traceback.format_exception(type(exception), exception, exception.__traceback__))
    headers: list[tuple[str, bytes | None]] = [
        (_HEADER + "exception", f"{type(exception).__module__}.{type(exception).__qualname__}".encode()),
        (_HEADER + "message", str(exception).encode()),
        (_HEADER + "stacktrace", stack.encode()),
        (_HEADER + "topic", topic.encode() if topic is not None else None),
        (_HEADER + "partition", str(partition).encode()),
        (_HEADER + "offset", str(offset).encode()),
    ]
    return DeadLetterRecord(dlq_topic, key, value, headers, timestamp)


class _DeadLetterAware:
    """The built-in handlers' reading of ``errors.deadletterqueue.topic.name``."""

    dead_letter_queue_topic: str | None = None

    def configure(self, configs: dict[str, Any]) -> None:
        topic = configs.get(DLQ_TOPIC_CONFIG)
        self.dead_letter_queue_topic = str(topic) if topic else None

    def _respond(self, result: Any, context: Any, exception: BaseException, key: Any, value: Any) -> Any:
        topic = self.dead_letter_queue_topic
        if topic is None:
            return result
        metadata = context.record_metadata() if context is not None else None
        record = dead_letter_record(
            topic,
            exception,
            key,
            value,
            metadata.topic if metadata is not None else None,
            metadata.partition if metadata is not None else -1,
            metadata.offset if metadata is not None else -1,
        )
        return Response(result, (record,))


class DeserializationExceptionHandler(abc.ABC):
    """Decides what happens to an input record whose key or value cannot be deserialized."""

    def configure(self, configs: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Receives the application's configs once, before the first record."""

    @abc.abstractmethod
    def handle(
        self, context: Any, record: Any, exception: Exception
    ) -> DeserializationHandlerResponse | Response:
        """``record`` holds the raw key and value bytes; ``context`` gives ``record_metadata()``."""


class LogAndFailExceptionHandler(_DeadLetterAware, DeserializationExceptionHandler):
    """The default: log the record's position and fail the task (nothing is skipped silently)."""

    def handle(
        self, context: Any, record: Any, exception: Exception
    ) -> DeserializationHandlerResponse | Response:
        logger.error(
            "Deserialization of the record at %s failed; failing the task. Set "
            "deserialization.exception.handler to LogAndContinueExceptionHandler to skip "
            "such records instead.",
            _position(context),
            exc_info=exception,
        )
        return self._respond(
            DeserializationHandlerResponse.FAIL, context, exception, record.key, record.value
        )


class LogAndContinueExceptionHandler(_DeadLetterAware, DeserializationExceptionHandler):
    """Log the record's position and skip it; processing goes on."""

    def handle(
        self, context: Any, record: Any, exception: Exception
    ) -> DeserializationHandlerResponse | Response:
        logger.warning("Skipping the record at %s: deserialization failed: %s", _position(context), exception)
        return self._respond(
            DeserializationHandlerResponse.CONTINUE, context, exception, record.key, record.value
        )


class ProcessingExceptionHandler(abc.ABC):
    """Decides what happens when a processor raises on a record (KIP-1033): CONTINUE drops the
    record from that processor on (its siblings still get it), FAIL fails the task."""

    def configure(self, configs: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Receives the application's configs once, before the first record."""

    @abc.abstractmethod
    def handle(
        self, context: ErrorHandlerContext, record: Any, exception: Exception
    ) -> ProcessingHandlerResponse | Response: ...


class LogAndFailProcessingExceptionHandler(_DeadLetterAware, ProcessingExceptionHandler):
    """The default: log the failure and fail the task."""

    def handle(
        self, context: ErrorHandlerContext, record: Any, exception: Exception
    ) -> ProcessingHandlerResponse | Response:
        logger.error(
            "Processor %s failed on the record at %s (task %s); failing the task. Set "
            "processing.exception.handler to LogAndContinueProcessingExceptionHandler to skip such "
            "records instead.",
            context.processor_node_id,
            _position(context),
            context.task_id,
            exc_info=exception,
        )
        return self._respond(
            ProcessingHandlerResponse.FAIL,
            context,
            exception,
            context.source_raw_key,
            context.source_raw_value,
        )


class LogAndContinueProcessingExceptionHandler(_DeadLetterAware, ProcessingExceptionHandler):
    """Log the failure and drop the record from the failing processor on."""

    def handle(
        self, context: ErrorHandlerContext, record: Any, exception: Exception
    ) -> ProcessingHandlerResponse | Response:
        logger.warning(
            "Skipping the record at %s in processor %s (task %s): %r",
            _position(context),
            context.processor_node_id,
            context.task_id,
            exception,
        )
        return self._respond(
            ProcessingHandlerResponse.CONTINUE,
            context,
            exception,
            context.source_raw_key,
            context.source_raw_value,
        )


class ProductionExceptionHandler:
    """Decides what happens to an output record that cannot be written: ``handle`` for one the
    cluster rejected for good, ``handle_serialization_exception`` for one a sink's serializer
    failed on. Both fail unless overridden."""

    def configure(self, configs: dict[str, Any]) -> None:
        """Receives the application's configs once, before the first record."""

    def handle(
        self, context: ErrorHandlerContext, record: Any, exception: Exception
    ) -> ProductionExceptionHandlerResponse | Response:
        """``record`` is the rejected record (``topic``, ``partition``, ``key``, ``value``,
        ``timestamp``, ``headers`` as bytes, and the broker's ``reason``)."""
        return ProductionExceptionHandlerResponse.FAIL

    def handle_serialization_exception(
        self,
        context: ErrorHandlerContext,
        record: Any,
        exception: Exception,
        origin: SerializationExceptionOrigin,
    ) -> ProductionExceptionHandlerResponse | Response:
        return ProductionExceptionHandlerResponse.FAIL


class DefaultProductionExceptionHandler(_DeadLetterAware, ProductionExceptionHandler):
    """Kafka's default: fail on every production error (with a dead-letter record when the
    dead-letter topic is set)."""

    def handle(
        self, context: ErrorHandlerContext, record: Any, exception: Exception
    ) -> ProductionExceptionHandlerResponse | Response:
        return self._respond(
            ProductionExceptionHandlerResponse.FAIL, context, exception, record.key, record.value
        )

    def handle_serialization_exception(
        self,
        context: ErrorHandlerContext,
        record: Any,
        exception: Exception,
        origin: SerializationExceptionOrigin,
    ) -> ProductionExceptionHandlerResponse | Response:
        return self._respond(
            ProductionExceptionHandlerResponse.FAIL,
            context,
            exception,
            context.source_raw_key,
            context.source_raw_value,
        )


def _position(context: Any) -> str:
    metadata = context.record_metadata() if context is not None else None
    if metadata is None:
        return "an unknown position"
    return f"topic {metadata.topic} partition {metadata.partition} offset {metadata.offset}"
