"""The consumer that fetches for a ``KafkaConsumer``: kstreams' compiled ``KafkaFetcher`` when it
can drive the librdkafka that confluent-kafka loaded, else a confluent-kafka ``Consumer``.

The compiled fetcher builds RecordBatches straight from librdkafka's messages (no Python object
per record); it serves consumers that assign their partitions themselves (see
``kstreams._native.kafka_fetcher``). It is used when:

- the process maps confluent-kafka's librdkafka (found in ``/proc/self/maps``, so Linux only),
- the settings are plain values (a callable such as an ``oauth_cb`` needs confluent-kafka's
  client, which calls back into Python), and
- ``KSTREAMS_KAFKA_FETCHER`` is not ``confluent`` (the switch back to confluent-kafka's consumer,
  e.g. to compare them).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import confluent_kafka

from kstreams.cluster.kafka_client_config import librdkafka_logger

__all__ = ["FETCHER_ENV", "fetcher_unavailable_reason", "native_fetcher"]

logger = logging.getLogger(__name__)

FETCHER_ENV = "KSTREAMS_KAFKA_FETCHER"

_load_error: str | None = None
_loaded = False


def _librdkafka_path() -> str | None:
    """The file of the librdkafka this process runs (confluent-kafka's), from the process's maps."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rstrip("\n").partition("/")[2]
                if path and "librdkafka" in os.path.basename(path):
                    return "/" + path
    except OSError:
        return None
    return None


def fetcher_unavailable_reason() -> str | None:
    """Why the compiled fetcher cannot be used in this process (None: it can)."""
    global _load_error, _loaded
    if os.environ.get(FETCHER_ENV, "").lower() == "confluent":
        return f"{FETCHER_ENV}=confluent"
    if _loaded or _load_error is not None:
        return _load_error
    try:
        from kstreams._native import kafka_fetcher
    except ImportError as exc:
        _load_error = f"the compiled fetcher is not built ({exc})"
        return _load_error
    # confluent_kafka (imported above) loaded its librdkafka: the fetcher uses the same file.
    path = _librdkafka_path() if confluent_kafka.libversion() else None
    if path is None:
        _load_error = "confluent-kafka's librdkafka was not found in /proc/self/maps"
        return _load_error
    try:
        kafka_fetcher.load(path)
    except OSError as exc:
        _load_error = str(exc)
        return _load_error
    _loaded = True
    return None


def native_fetcher(settings: Mapping[str, object]) -> Any | None:
    """A ``KafkaFetcher`` with these confluent-kafka settings, or None when one cannot be used
    (the caller then builds a confluent-kafka ``Consumer``). librdkafka rejecting a setting raises
    ``KafkaException``, as building a confluent-kafka client does."""
    reason = fetcher_unavailable_reason()
    plain: dict[str, object] = {}
    for key, value in settings.items():
        if key == "logger":
            continue
        if not isinstance(value, str | int | float | bool):
            reason = reason or f"setting {key} is not a plain value"
            break
        plain[key] = value
    if reason is not None:
        if not _reported.get(reason):
            _reported[reason] = True
            logger.info("Fetching with confluent-kafka's consumer: %s", reason)
        return None
    from kstreams._native.kafka_fetcher import KafkaFetcher

    return KafkaFetcher(plain, librdkafka_logger)


_reported: dict[str, bool] = {}
