"""Printed: where and how ``KStream.print`` writes records, and the processor that writes them.

Each record becomes one line in Kafka's format, ``[label]: key, value`` (the label defaults to
the print processor's name; a key-value mapper replaces ``key, value``). None prints as ``null``
and a windowed key as ``[key@start/end]``, as Kafka prints them. Lines go to standard output or to
one file shared by all tasks of the topology: the file is opened (truncated) when the first task
starts printing and closed when the last one closes; a lock keeps lines from different stream
threads whole.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from kstreams.errors import TopologyException
from kstreams.processor import Processor, ProcessorContext, Record

__all__ = ["PrintSupplier", "Printed", "kafka_text"]

logger = logging.getLogger(__name__)


def kafka_text(value: Any) -> str:
    """How Kafka's ``String.valueOf`` shows a key or value: None as ``null``."""
    return "null" if value is None else str(value)


def _default_mapper(key: Any, value: Any) -> str:
    return f"{kafka_text(key)}, {kafka_text(value)}"


class Printed:
    """Where ``KStream.print`` writes: ``Printed.to_sys_out()`` or ``Printed.to_file(path)``,
    refined with ``with_label`` and ``with_key_value_mapper`` (each returns a new Printed)."""

    def __init__(
        self,
        file_path: str | None,
        label: str | None = None,
        mapper: Callable[[Any, Any], Any] = _default_mapper,
        name: str | None = None,
    ) -> None:
        self.file_path = file_path
        self.label = label
        self.mapper = mapper
        self.name = name

    @staticmethod
    def to_sys_out() -> Printed:
        return Printed(None)

    @staticmethod
    def to_file(file_path: str | os.PathLike[str]) -> Printed:
        path = os.fspath(file_path)
        if not isinstance(path, str) or not path.strip():
            raise TopologyException("Printed.to_file() needs a file path; it cannot be an empty string.")
        if os.path.isdir(path):
            raise TopologyException(f"Printed.to_file({path!r}) names a directory; give a file path.")
        return Printed(path)

    def with_label(self, label: str) -> Printed:
        if not isinstance(label, str):
            raise TypeError(f"with_label() takes a str, got {label!r}.")
        return Printed(self.file_path, label, self.mapper, self.name)

    def with_key_value_mapper(self, mapper: Callable[[Any, Any], Any]) -> Printed:
        """``mapper(key, value)`` gives the text after ``[label]: `` (Kafka's KeyValueMapper)."""
        if not callable(mapper):
            raise TypeError(f"with_key_value_mapper() takes a callable (key, value) -> text, got {mapper!r}.")
        return Printed(self.file_path, self.label, mapper, self.name)

    def with_name(self, name: str) -> Printed:
        """The name of the print processor (default ``KSTREAM-PRINTER-<n>``)."""
        return Printed(self.file_path, self.label, self.mapper, name)

    def __repr__(self) -> str:
        where = "sys_out" if self.file_path is None else f"file={self.file_path!r}"
        return f"Printed({where}, label={self.label!r})"


class PrintSupplier:
    """Makes the print processors of one ``print`` call; they share the output and its lock."""

    kind = "print"

    def __init__(self, printed: Printed, label: str) -> None:
        self.printed = printed
        self.label = label
        self._lock = threading.Lock()
        self._file: IO[str] | None = None
        self._users = 0  # processors between init and close that write to the file

    def __call__(self) -> Processor[Any, Any, Any, Any]:
        return _Print(self)

    def acquire(self) -> None:
        if self.printed.file_path is None:
            return
        with self._lock:
            if self._file is None:
                try:
                    self._file = open(self.printed.file_path, "w", encoding="utf-8")
                except OSError as exc:
                    raise TopologyException(
                        f"KStream.print cannot open {self.printed.file_path!r} for writing: {exc}."
                    ) from exc
            self._users += 1

    def release(self) -> None:
        if self.printed.file_path is None:
            return
        with self._lock:
            self._users -= 1
            if self._users <= 0 and self._file is not None:
                self._file.close()
                self._file = None
                self._users = 0

    def write(self, key: Any, value: Any) -> None:
        line = f"[{self.label}]: {kafka_text(self.printed.mapper(key, value))}\n"
        with self._lock:
            out = self._file if self._file is not None else sys.stdout
            out.write(line)
            out.flush()


class _Print(Processor[Any, Any, Any, Any]):
    def __init__(self, supplier: PrintSupplier) -> None:
        self.supplier = supplier
        self.acquired = False

    def init(self, context: ProcessorContext[Any, Any]) -> None:
        self.supplier.acquire()
        self.acquired = True

    def process(self, record: Record[Any, Any]) -> None:
        self.supplier.write(record.key, record.value)

    def close(self) -> None:
        if self.acquired:
            self.acquired = False
            self.supplier.release()
