"""The offset metadata format is Kafka Streams' (TopicPartitionMetadata of Kafka 4.1), so that a
Java application and kstreams read each other's committed partition times."""

from __future__ import annotations

import base64
import struct

from kstreams.processing.offset_metadata import LATEST_MAGIC_BYTE, UNKNOWN_TIME, TopicPartitionMetadata


def test_encodes_version_two_then_the_partition_time_big_endian_in_base64() -> None:
    assert LATEST_MAGIC_BYTE == 2
    encoded = TopicPartitionMetadata(100).encode()
    # What Kafka's encode() writes for partition time 100 and no processor metadata.
    assert encoded == "AgAAAAAAAABk"
    assert base64.b64decode(encoded) == b"\x02" + struct.pack(">q", 100)


def test_processor_metadata_follows_as_count_then_length_key_and_value() -> None:
    encoded = TopicPartitionMetadata(7, {"store": 42}).encode()
    expected = b"\x02" + struct.pack(">q", 7) + struct.pack(">i", 1) + struct.pack(">i", 5) + b"store"
    assert base64.b64decode(encoded) == expected + struct.pack(">q", 42)
    assert TopicPartitionMetadata.decode(encoded) == TopicPartitionMetadata(7, {"store": 42})


def test_decodes_version_one_which_has_the_partition_time_only() -> None:
    version_one = base64.b64encode(b"\x01" + struct.pack(">q", 100)).decode()
    assert TopicPartitionMetadata.decode(version_one) == TopicPartitionMetadata(100)


def test_no_metadata_an_unknown_version_or_garbage_decode_as_an_unknown_time() -> None:
    unknown = TopicPartitionMetadata(UNKNOWN_TIME)
    assert TopicPartitionMetadata.decode("") == unknown
    assert TopicPartitionMetadata.decode(None) == unknown
    assert TopicPartitionMetadata.decode(base64.b64encode(b"\x03").decode()) == unknown
    assert TopicPartitionMetadata.decode("{}") == unknown
    truncated = base64.b64encode(b"\x02\x00\x01").decode()
    assert TopicPartitionMetadata.decode(truncated) == unknown
