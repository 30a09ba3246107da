"""Serde, the interface every serde implements, and FunctionSerde, a serde made of two functions.

``None`` always passes through a serde unchanged in both directions (a null key, or a tombstone
value), as in Kafka; data a serde cannot handle raises ``SerializationException`` naming the serde
and the problem.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from kstreams.errors import SerializationException

__all__ = ["FunctionSerde", "Serde"]

logger = logging.getLogger(__name__)

_SerializeFn = Callable[[Any], bytes]
_DeserializeFn = Callable[[bytes], Any]


class Serde(abc.ABC):
    """Serializes objects to bytes and back for one kind of data.

    Guarantees: ``serialize(topic, None) is None`` and ``deserialize(topic, None) is None``; data
    the serde cannot handle raises ``SerializationException`` naming the serde and the problem.
    A serde is both its own serializer and deserializer (``serializer()``/``deserializer()``
    return it), so it can be passed wherever either is expected.
    """

    name: str = "custom"

    @abc.abstractmethod
    def serialize(self, topic: str | None, data: Any) -> bytes | None: ...

    @abc.abstractmethod
    def deserialize(self, topic: str | None, data: bytes | None) -> Any: ...

    def serializer(self) -> Serde:
        return self

    def deserializer(self) -> Serde:
        return self

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:  # noqa: B027 - optional hook
        """Receives the application's configs when the serde comes from a default serde config."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def _fail(
        self, action: str, topic: str | None, problem: str, cause: BaseException | None = None
    ) -> NoReturn:
        where = f" for topic {topic}" if topic else ""
        raise SerializationException(f"The {self.name} serde cannot {action} {problem}{where}.") from cause


class FunctionSerde(Serde):
    """A serde made of two plain functions (``Serdes.serde_from``); None passes through."""

    def __init__(
        self,
        serialize: Callable[[Any], bytes],
        deserialize: Callable[[bytes], Any],
        name: str = "custom",
    ) -> None:
        self._serialize = serialize
        self._deserialize = deserialize
        self.name = name

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        try:
            return self._serialize(data)
        except SerializationException:
            raise
        except Exception as exc:
            self._fail("serialize", topic, f"a {type(data).__name__}: {exc!r}", exc)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return self._deserialize(data)
        except SerializationException:
            raise
        except Exception as exc:
            self._fail("deserialize", topic, f"{bytes(data)[:64]!r}: {exc!r}", exc)

    def __repr__(self) -> str:
        return f"FunctionSerde(name={self.name!r})"
