"""ValueTransformerWithKey: the stateful value mapping of ``KTable.transform_values``.

A transformer gets ``init(context)`` once per task (and once per table lookup a join makes),
then ``transform(key, value)`` for each row update, then ``close()``. It may read and write the
stores named in ``transform_values`` through ``context.get_state_store`` and schedule punctuations,
but it must not forward: its result is the row's new value. ``transform`` is called for deletions
too (``value`` None), as in Kafka; returning None deletes the row downstream.
"""

from __future__ import annotations

import abc
import logging
from typing import Any, Generic, TypeVar

from kstreams.errors import StreamsException
from kstreams.processor import (
    ProcessorContext,
    Record,
    To,
)
from kstreams.processor.delegating_context import DelegatingContext

__all__ = ["ForwardingDisabledProcessorContext", "ValueTransformerWithKey"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")
VR = TypeVar("VR")


class ValueTransformerWithKey(abc.ABC, Generic[K, V, VR]):
    """Turns a row's key and value into its new value. Subclass it and implement ``transform``."""

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        """Called once before the first ``transform``; keep the context to reach stores."""

    @abc.abstractmethod
    def transform(self, key: K, value: V | None) -> VR | None: ...

    def close(self) -> None:
        """Called once when the task closes."""


class ForwardingDisabledProcessorContext(DelegatingContext, ProcessorContext[Any, Any]):
    """The task's context for code whose output is its return value: everything but ``forward``."""

    def __init__(self, context: ProcessorContext[Any, Any], owner: str) -> None:
        super().__init__(context)
        self._owner = owner

    def forward(self, record: Record[Any, Any], child_name: str | To | None = None) -> None:
        raise StreamsException(
            f"{self._owner} must not forward records: return the new value from transform() instead "
            "(use KStream.process or process_values to emit records)."
        )
