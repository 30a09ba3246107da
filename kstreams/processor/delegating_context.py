"""DelegatingContext: a view of the task's ProcessorContext that passes everything but ``forward`` through.

The contexts handed to user code that must not forward as a plain processor does (a
FixedKeyProcessor forwards only FixedKeyRecords, a ValueTransformerWithKey does not forward at
all) differ from the task's context in ``forward`` alone. This mixin is the rest, written once:
put it first among the bases, so its methods implement the abstract ones of the context
interface the subclass declares, and define ``forward``. Like the context it wraps, a view is used
by the one thread that holds the task.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from kstreams.processor.api import (
    Cancellable,
    ProcessorContext,
    PunctuationType,
    Punctuator,
    RecordMetadata,
    TaskId,
)

__all__ = ["DelegatingContext"]

logger = logging.getLogger(__name__)


class DelegatingContext:
    """Identity, configuration, stores, punctuation, commit and record metadata of ``_context``."""

    # No __slots__ here: the context interfaces it is mixed with keep a __dict__ anyway.

    def __init__(self, context: ProcessorContext[Any, Any]) -> None:
        self._context = context

    @property
    def application_id(self) -> str:
        return self._context.application_id

    @property
    def task_id(self) -> TaskId:
        return self._context.task_id

    @property
    def app_configs(self) -> Mapping[str, Any]:
        return self._context.app_configs

    def get_state_store(self, name: str) -> Any:
        return self._context.get_state_store(name)

    def schedule(
        self, interval: timedelta | int, punctuation_type: PunctuationType, callback: Punctuator
    ) -> Cancellable:
        return self._context.schedule(interval, punctuation_type, callback)

    def commit(self) -> None:
        self._context.commit()

    def record_metadata(self) -> RecordMetadata | None:
        return self._context.record_metadata()

    def current_stream_time_ms(self) -> int:
        return self._context.current_stream_time_ms()

    def current_system_time_ms(self) -> int:
        return self._context.current_system_time_ms()
