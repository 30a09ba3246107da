"""Reading ranges of topic partitions with confluent-kafka, for the Spark data source.

``TopicReaderOptions`` parses the data source's options; ``list_partitions`` and
``offset_range`` find what to read (partitions from a full metadata listing, offsets from the
partitions' watermarks); ``read_range`` reads records [start, end) of one partition as Arrow
batches with the columns of ``RECORD_SCHEMA``.

A topic is never looked up by name in metadata: some brokers create a topic that a client asks
for by name, so asking would create the topic being checked for.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from kstreams.errors import ConfigException, StreamsException

__all__ = [
    "EARLIEST",
    "LATEST",
    "RECORD_SCHEMA",
    "TopicOffsets",
    "TopicReaderOptions",
    "offset_range",
    "read_range",
    "resolve_offsets",
]

logger = logging.getLogger(__name__)

RECORD_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("timestamp", pa.int64()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("topic", pa.string()),
    ]
)
# Spark's Kafka source spells "earliest" -2 and "latest" -1 in per-partition JSON offsets.
EARLIEST = -2
LATEST = -1
_BATCH_RECORDS = 10_000


@dataclass(frozen=True)
class TopicReaderOptions:
    """The data source's options, validated.

    ``starting`` and ``ending`` are "earliest", "latest", or per-partition offsets
    {topic: {partition: offset}} (-2 earliest, -1 latest), as in Spark's Kafka source. Options
    prefixed ``kafka.`` pass through to the consumer.
    """

    bootstrap_servers: str
    topics: tuple[str, ...]
    starting: str | dict[str, dict[int, int]] = "earliest"
    ending: str | dict[str, dict[int, int]] = "latest"
    isolation_level: str = "read_uncommitted"
    timeout_s: float = 30.0
    consumer_config: dict[str, str] = field(default_factory=dict)
    max_offsets_per_trigger: int | None = None

    @staticmethod
    def from_options(options: Mapping[str, str], streaming: bool) -> TopicReaderOptions:
        # Spark passes options with case-insensitive keys; normalise to lower case.
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        bootstrap = opts.get("bootstrap.servers") or opts.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise ConfigException(
                "The kstreams data source needs the option bootstrap.servers: "
                '.option("bootstrap.servers", "host:9092").'
            )
        topics = tuple(t.strip() for t in opts.get("topic", "").split(",") if t.strip())
        if not topics:
            raise ConfigException(
                "The kstreams data source needs the option topic (one topic, or several joined by commas): "
                '.option("topic", "my-topic").'
            )
        isolation = opts.get("isolation.level", "read_uncommitted")
        if isolation not in ("read_uncommitted", "read_committed"):
            raise ConfigException(
                f"Option isolation.level is {isolation!r}: use read_uncommitted or read_committed."
            )
        starting = _parse_offsets(opts.get("startingoffsets", "earliest"), "startingOffsets", topics)
        ending = _parse_offsets(opts.get("endingoffsets", "latest"), "endingOffsets", topics)
        if streaming and "endingoffsets" in opts:
            raise ConfigException(
                "Option endingOffsets is for batch reads: a streaming read runs until it is stopped "
                "(use trigger(availableNow=True) to read what is there now and stop)."
            )
        if starting == "latest" and not streaming:
            logger.info("startingOffsets=latest in a batch read of %s: the read is empty", topics)
        if ending == "earliest":
            raise ConfigException(
                'Option endingOffsets cannot be "earliest": use "latest" or per-partition offsets.'
            )
        try:
            timeout_s = float(opts.get("timeout.ms", "30000")) / 1000.0
        except ValueError:
            raise ConfigException(
                f"Option timeout.ms must be milliseconds, got {opts['timeout.ms']!r}."
            ) from None
        consumer = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
        max_per_trigger = None
        if "maxoffsetspertrigger" in opts:
            try:
                max_per_trigger = int(opts["maxoffsetspertrigger"])
            except ValueError:
                max_per_trigger = 0
            if max_per_trigger < 1:
                raise ConfigException(
                    f"Option maxOffsetsPerTrigger must be a positive number of records, got "
                    f"{opts['maxoffsetspertrigger']!r}."
                )
        return TopicReaderOptions(
            bootstrap, topics, starting, ending, isolation, timeout_s, consumer, max_per_trigger
        )

    def consumer_settings(self) -> dict[str, Any]:
        """confluent-kafka settings for a reading consumer (no group membership, no commits)."""
        settings: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": f"kstreams-spark-reader-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "isolation.level": self.isolation_level,
            "auto.offset.reset": "earliest",
        }
        settings.update(self.consumer_config)
        return settings


def _parse_offsets(text: str, option: str, topics: tuple[str, ...]) -> str | dict[str, dict[int, int]]:
    if text in ("earliest", "latest"):
        return text
    try:
        raw = json.loads(text)
        offsets = {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}
    except (ValueError, AttributeError, TypeError):
        raise ConfigException(
            f'Option {option} is {text!r}: use "earliest", "latest" or JSON offsets per partition such as '
            '{"topic": {"0": 23, "1": -2}} (-2 earliest, -1 latest).'
        ) from None
    unknown = sorted(set(offsets) - set(topics))
    if unknown:
        raise ConfigException(
            f"Option {option} names topics {unknown} that the read does not include {list(topics)}."
        )
    return offsets


def _consumer(options: TopicReaderOptions) -> Any:
    from confluent_kafka import Consumer

    return Consumer(options.consumer_settings())


class TopicOffsets:
    """Partitions and watermarks of the read's topics, through one consumer kept open until
    ``close`` (a streaming query asks for them every micro-batch)."""

    def __init__(self, options: TopicReaderOptions) -> None:
        self.options = options
        self._consumer: Any = None

    def _client(self) -> Any:
        if self._consumer is None:
            self._consumer = _consumer(self.options)
        return self._consumer

    def partitions(self) -> list[tuple[str, int]]:
        """Every (topic, partition) of the read, from a full metadata listing."""
        options = self.options
        metadata = self._client().list_topics(timeout=options.timeout_s)
        found: list[tuple[str, int]] = []
        for topic in options.topics:
            described = metadata.topics.get(topic)
            if described is None or described.error is not None:
                raise StreamsException(
                    f"Topic {topic} does not exist on {options.bootstrap_servers}"
                    + (f" ({described.error})" if described is not None else "")
                    + ": create it, or fix the topic option."
                )
            found.extend((topic, p) for p in sorted(described.partitions))
        return found

    def watermarks(
        self, partitions: list[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """(low, high) offsets of each partition (default: all of the read's); with
        read_committed, high is the last stable offset."""
        from confluent_kafka import TopicPartition

        consumer = self._client()
        marks = {}
        for topic, partition in self.partitions() if partitions is None else partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=self.options.timeout_s, cached=False
            )
            marks[(topic, partition)] = (int(low), int(high))
        return marks

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def resolve_offsets(
    spec: str | dict[str, dict[int, int]],
    marks: Mapping[tuple[str, int], tuple[int, int]],
) -> dict[tuple[str, int], int]:
    """Concrete offsets per partition for an offsets option, clamped into [low, high]."""
    resolved = {}
    for (topic, partition), (low, high) in marks.items():
        if spec == "earliest":
            wanted = EARLIEST
        elif spec == "latest":
            wanted = LATEST
        else:
            assert isinstance(spec, dict)
            wanted = spec.get(topic, {}).get(partition, EARLIEST)
        if wanted == EARLIEST:
            offset = low
        elif wanted == LATEST:
            offset = high
        else:
            offset = min(max(wanted, low), high)
        resolved[(topic, partition)] = offset
    return resolved


def offset_range(options: TopicReaderOptions) -> dict[tuple[str, int], tuple[int, int]]:
    """For a batch read: (start, end) per partition from the starting and ending options."""
    offsets = TopicOffsets(options)
    try:
        marks = offsets.watermarks()
    finally:
        offsets.close()
    starts = resolve_offsets(options.starting, marks)
    ends = resolve_offsets(options.ending, marks)
    return {tp: (starts[tp], max(starts[tp], ends[tp])) for tp in marks}


def read_range(
    options: TopicReaderOptions, topic: str, partition: int, start: int, end: int
) -> Iterator[pa.RecordBatch]:
    """Records of ``topic``/``partition`` at offsets [start, end), as Arrow batches.

    The read ends at ``end`` or at the end of the partition, whichever comes first (with
    read_committed, aborted records and transaction markers occupy offsets no record is read
    from). Raises ``StreamsException`` if no record arrives for ``timeout.ms`` before then.
    """
    if start >= end:
        return
    from confluent_kafka import KafkaError
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = _consumer(options)
    try:
        consumer.assign([KafkaTopicPartition(topic, partition, start)])
        keys: list[bytes | None] = []
        values: list[bytes | None] = []
        timestamps: list[int] = []
        offsets: list[int] = []
        next_offset = start
        deadline = time.monotonic() + options.timeout_s
        while next_offset < end:
            messages = consumer.consume(num_messages=_BATCH_RECORDS, timeout=0.5)
            if not messages:
                if time.monotonic() > deadline:
                    raise StreamsException(
                        f"Reading {topic}-{partition} from {options.bootstrap_servers} stalled at offset "
                        f"{next_offset} (wanted up to {end}) for {options.timeout_s}s: check that the broker "
                        "is reachable, or raise the option timeout.ms."
                    )
                continue
            reached_eof = False
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        reached_eof = True
                        continue
                    raise StreamsException(
                        f"Reading {topic}-{partition} failed at offset {next_offset}: {error}"
                    )
                offset = message.offset()
                if offset >= end:
                    reached_eof = True
                    break
                keys.append(message.key())
                values.append(message.value())
                timestamps.append(message.timestamp()[1])
                offsets.append(offset)
                next_offset = offset + 1
            deadline = time.monotonic() + options.timeout_s
            if len(keys) >= _BATCH_RECORDS:
                yield _batch(keys, values, timestamps, partition, offsets, topic)
                keys, values, timestamps, offsets = [], [], [], []
            if reached_eof:
                break
        if keys:
            yield _batch(keys, values, timestamps, partition, offsets, topic)
    finally:
        consumer.close()


def _batch(
    keys: list[bytes | None],
    values: list[bytes | None],
    timestamps: list[int],
    partition: int,
    offsets: list[int],
    topic: str,
) -> pa.RecordBatch:
    n = len(keys)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(timestamps, pa.int64()),
            pa.array([partition] * n, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array([topic] * n, pa.string()),
        ],
        schema=RECORD_SCHEMA,
    )
