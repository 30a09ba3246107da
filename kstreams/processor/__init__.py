"""The Processor API (Kafka's ``org.apache.kafka.streams.processor``): public.

- ``api``: ``Processor``, ``ProcessorContext``, ``Record``, ``RecordMetadata``, ``TaskId``, ``To``,
  ``PunctuationType``, ``Punctuator``, ``Cancellable``.
- ``fixed_key``: the key-preserving processors (``FixedKeyProcessor``, ``FixedKeyRecord``,
  ``FixedKeyProcessorContext``) and the adapters that run one as a node.
- ``delegating_context``: ``DelegatingContext``, the context views handed to user code that
  forwards differently (fixed-key processors, value transformers) pass everything else through it.

The package is the API's vocabulary: it imports only the compiled records (``kstreams._native``),
so every layer above (state, topology, the engine, the runtime) may use its types.
"""

from __future__ import annotations

from kstreams.processor.api import (
    Cancellable,
    Headers,
    Processor,
    ProcessorContext,
    PunctuationType,
    Punctuator,
    Record,
    RecordMetadata,
    TaskId,
    To,
)
from kstreams.processor.fixed_key import FixedKeyProcessor, FixedKeyProcessorContext, FixedKeyRecord

__all__ = [
    "Cancellable",
    "FixedKeyProcessor",
    "FixedKeyProcessorContext",
    "FixedKeyRecord",
    "Headers",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "Punctuator",
    "Record",
    "RecordMetadata",
    "TaskId",
    "To",
]
