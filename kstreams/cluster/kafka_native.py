"""Whether kstreams' own librdkafka clients can be used: the compiled ``KafkaFetcher`` (for
consumers that assign their partitions themselves, built by ``kafka_fetching.native_fetcher``) and
``KafkaSender`` (for producers, built by ``kafka_producer.native_sender``), over the librdkafka
that confluent-kafka loaded; else confluent-kafka's ``Consumer`` and ``Producer``. This module
decides only whether, and with which settings (``native_settings``); each client is built beside
the code that uses it.

Both move records between librdkafka and RecordBatches without a Python object or call per record
(see ``kstreams._native.kafka_clients``). They are used when:

- the process maps confluent-kafka's librdkafka (found in ``/proc/self/maps``, so Linux only),
- the settings are plain values (a callable such as an ``oauth_cb`` needs confluent-kafka's
  clients, which call back into Python), and
- ``KSTREAMS_KAFKA_CLIENTS`` is not ``confluent`` (the switch back to confluent-kafka's clients,
  e.g. to compare them).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import confluent_kafka

__all__ = ["NATIVE_ENV", "native_settings", "native_unavailable_reason"]

logger = logging.getLogger(__name__)

NATIVE_ENV = "KSTREAMS_KAFKA_CLIENTS"

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


def native_unavailable_reason() -> str | None:
    """Why the compiled fetcher cannot be used in this process (None: it can)."""
    global _load_error, _loaded
    if os.environ.get(NATIVE_ENV, "").lower() == "confluent":
        return f"{NATIVE_ENV}=confluent"
    if _loaded or _load_error is not None:
        return _load_error
    try:
        from kstreams._native import kafka_clients
    except ImportError as exc:
        _load_error = f"the compiled fetcher is not built ({exc})"
        return _load_error
    # confluent_kafka (imported above) loaded its librdkafka: the fetcher uses the same file.
    path = _librdkafka_path() if confluent_kafka.libversion() else None
    if path is None:
        _load_error = "confluent-kafka's librdkafka was not found in /proc/self/maps"
        return _load_error
    try:
        kafka_clients.load(path)
    except OSError as exc:
        _load_error = str(exc)
        return _load_error
    _loaded = True
    return None


def native_settings(settings: Mapping[str, object], ignored: tuple[str, ...]) -> dict[str, object] | None:
    """The settings without ``ignored`` keys, when kstreams' own client can take them (None
    otherwise, with the reason logged once)."""
    reason = native_unavailable_reason()
    plain: dict[str, object] = {}
    for key, value in settings.items():
        if key in ignored:
            continue
        if not isinstance(value, str | int | float | bool):
            reason = reason or f"setting {key} is not a plain value"
            break
        plain[key] = value
    if reason is not None:
        if reason not in _reported:
            _reported.add(reason)
            logger.info("Using confluent-kafka's clients: %s", reason)
        return None
    return plain


_reported: set[str] = set()
