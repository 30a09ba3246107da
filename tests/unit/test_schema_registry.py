"""Schema Registry serdes (Avro, JSON Schema, Protobuf) against confluent-kafka's mock registry:
Confluent's wire format, defaults from the application config, and a topology using them."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from kstreams import KafkaStreams, Serdes
from kstreams.errors import ConfigException, SerializationException
from kstreams.serdes.schema_registry import AvroSerde, JsonSchemaSerde, ProtobufSerde, registry_client
from kstreams.testing import TopologyTestDriver
from kstreams.topology import Consumed, Produced, StreamsBuilder

CLICK = json.dumps(
    {
        "type": "record",
        "name": "Click",
        "fields": [{"name": "user", "type": "string"}, {"name": "page", "type": "string"}],
    }
)
USER_SCHEMA = json.dumps({"type": "object", "properties": {"user": {"type": "string"}}, "required": ["user"]})


def _scope() -> str:
    return f"mock://{uuid.uuid4().hex}"


def test_avro_round_trips_in_confluents_wire_format_and_registers_the_subject() -> None:
    registry = _scope()
    serde = AvroSerde(CLICK, registry)
    data = serde.serialize("clicks", {"user": "alice", "page": "/a"})
    assert data is not None and data[0] == 0  # magic byte, then the 4-byte schema id
    schema_id = int.from_bytes(data[1:5], "big")
    assert registry_client(registry).get_latest_version("clicks-value").schema_id == schema_id
    # A reader without the schema takes the writer's from the registry.
    assert AvroSerde(registry=registry).deserialize("clicks", data) == {"user": "alice", "page": "/a"}
    assert serde.serialize("clicks", None) is None and serde.deserialize("clicks", None) is None


def test_a_key_serde_registers_the_key_subject() -> None:
    registry = _scope()
    Serdes.avro(json.dumps({"type": "string"}), registry, is_key=True).serialize("clicks", "alice")
    assert registry_client(registry).get_subjects() == ["clicks-key"]


def test_data_that_does_not_match_the_schema_is_a_serialization_error_naming_the_topic() -> None:
    serde = JsonSchemaSerde(USER_SCHEMA, _scope())
    assert serde.deserialize("users", serde.serialize("users", {"user": "bob"})) == {"user": "bob"}
    with pytest.raises(SerializationException, match=r"topic users.*required property"):
        serde.serialize("users", {"name": "bob"})
    with pytest.raises(SerializationException, match="wire format"):
        serde.deserialize("users", b"not registry bytes")


def test_protobuf_round_trips_a_generated_message() -> None:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(
        name="click_test.proto", package="kstreams.test", syntax="proto3"
    )
    message = proto.message_type.add(name="Click")
    message.field.add(
        name="user",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    click_type = message_factory.GetMessageClass(pool.FindMessageTypeByName("kstreams.test.Click"))
    serde = ProtobufSerde(click_type, _scope())
    data = serde.serialize("clicks", click_type(user="carol"))
    assert data is not None and data[0] == 0
    assert serde.deserialize("clicks", data).user == "carol"


def test_a_serde_without_a_registry_says_how_to_give_one() -> None:
    with pytest.raises(ConfigException, match=r"schema\.registry\.url"):
        AvroSerde(CLICK).serialize("clicks", {"user": "a", "page": "b"})
    with pytest.raises(ConfigException, match=r"use\.latest\.version"):
        AvroSerde(registry=_scope()).serialize("clicks", {"user": "a", "page": "b"})


def test_avro_as_default_value_serde_takes_the_registry_from_the_application_config() -> None:
    registry = _scope()
    builder = StreamsBuilder()
    builder.stream("clicks").map_values(lambda click: {**click, "page": click["page"].upper()}).to("out")
    config = {
        "application.id": "sr",
        "default.key.serde": "string",
        "default.value.serde": AvroSerde(CLICK),
        "schema.registry.url": registry,
    }
    writer = AvroSerde(CLICK, registry)
    with TopologyTestDriver(builder.build(), config) as driver:
        clicks = driver.create_input_topic("clicks", Serdes.string(), writer)
        out = driver.create_output_topic("out", Serdes.string(), AvroSerde(registry=registry))
        clicks.pipe_input("alice", {"user": "alice", "page": "/home"})
        assert out.read_key_values_to_list() == [("alice", {"user": "alice", "page": "/HOME"})]


def test_a_topology_reads_and_writes_avro_on_a_cluster(cluster: Any, app_id: str) -> None:
    registry = _scope()
    source, sink = f"{app_id}-clicks", f"{app_id}-pages"
    cluster.create_topic(source, 2)
    cluster.create_topic(sink, 2)
    page_schema = json.dumps({"type": "string"})
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed.with_(Serdes.string(), Serdes.avro(CLICK, registry)))
        .map_values(lambda click: click["page"])
        .to(sink, Produced.with_(Serdes.string(), Serdes.avro(page_schema, registry)))
    )
    streams = KafkaStreams(
        builder.build(), {"application.id": app_id, "commit.interval.ms": 50}, cluster=cluster
    )
    writer = AvroSerde(CLICK, registry)
    for user, page in [("alice", "/a"), ("bob", "/b"), ("alice", "/c")]:
        cluster.produce(source, user.encode(), writer.serialize(source, {"user": user, "page": page}))
    streams.start()
    try:
        deadline = time.monotonic() + 60
        while len(cluster.read(sink)) < 3:
            assert time.monotonic() < deadline, "the avro records did not arrive"
            time.sleep(0.05)
        reader = AvroSerde(registry=registry)
        pages = sorted(reader.deserialize(sink, r.value) for r in cluster.read(sink))
        assert pages == ["/a", "/b", "/c"]
    finally:
        streams.close(timeout=10.0)
