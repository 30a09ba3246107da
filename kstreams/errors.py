"""The exception hierarchy of kstreams, and the deserialization exception handlers.

Every error names what happened, which topic, task or config it concerns, and what to do about it.
"""

from __future__ import annotations

import abc
import enum
import logging
from collections.abc import Sequence
from typing import Any

__all__ = [
    "ConfigException",
    "DeserializationExceptionHandler",
    "DeserializationHandlerResponse",
    "IllegalStateException",
    "InternalTopicsAlreadySetupException",
    "InvalidStateStoreException",
    "LockException",
    "LogAndContinueExceptionHandler",
    "LogAndFailExceptionHandler",
    "MisconfiguredInternalTopicException",
    "MissingInternalTopicsException",
    "MissingSourceTopicException",
    "ProcessorStateException",
    "SerializationException",
    "ShutdownRequestedException",
    "StreamsException",
    "TaskAssignmentException",
    "TaskCorruptedException",
    "TaskMigratedException",
    "TopologyException",
    "UnknownStateStoreException",
]

logger = logging.getLogger(__name__)


class StreamsException(Exception):
    """Base of every kstreams error. ``task_id`` names the task it arose in, when there is one."""

    def __init__(self, message: str, *, task_id: Any = None) -> None:
        super().__init__(message)
        self.task_id = task_id


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


class DeserializationExceptionHandler(abc.ABC):
    """Decides what happens to an input record whose key or value cannot be deserialized."""

    def configure(self, configs: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Receives the application's configs once, before the first record."""

    @abc.abstractmethod
    def handle(self, context: Any, record: Any, exception: Exception) -> DeserializationHandlerResponse: ...


class LogAndFailExceptionHandler(DeserializationExceptionHandler):
    """The default: log the record's position and fail the task (nothing is skipped silently)."""

    def handle(self, context: Any, record: Any, exception: Exception) -> DeserializationHandlerResponse:
        logger.error(
            "Deserialization of the record at %s failed; failing the task. Set "
            "default.deserialization.exception.handler to LogAndContinueExceptionHandler to skip "
            "such records instead.",
            _position(context),
            exc_info=exception,
        )
        return DeserializationHandlerResponse.FAIL


class LogAndContinueExceptionHandler(DeserializationExceptionHandler):
    """Log the record's position and skip it; processing goes on."""

    def handle(self, context: Any, record: Any, exception: Exception) -> DeserializationHandlerResponse:
        logger.warning("Skipping the record at %s: deserialization failed: %s", _position(context), exception)
        return DeserializationHandlerResponse.CONTINUE


def _position(context: Any) -> str:
    metadata = context.record_metadata() if context is not None else None
    if metadata is None:
        return "an unknown position"
    return f"topic {metadata.topic} partition {metadata.partition} offset {metadata.offset}"
