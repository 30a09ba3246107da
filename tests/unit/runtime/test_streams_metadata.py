"""Kafka's StreamsMetadataState rules over a fixed member view: hosts, stores, key partitions with
the default and custom partitioners, global stores, an uninitialized view; plus the metadata
record format, application.server validation and the per-thread task listing."""

from __future__ import annotations

from typing import Any

import pytest

from kstreams._native.record_batch import default_partition
from kstreams.client import HostInfo, KeyQueryMetadata
from kstreams.cluster.port import TopicPartition
from kstreams.config import StreamsConfig
from kstreams.errors import ConfigException
from kstreams.runtime.queries.metadata_channel import MemberMetadata
from kstreams.runtime.queries.streams_metadata import StreamsMetadataState
from kstreams.runtime.threads.thread_tasks import divide_tasks
from kstreams.serdes import Serdes
from kstreams.topology.dsl import Consumed, Materialized, StreamsBuilder

A, B = HostInfo("a", 1), HostInfo("b", 2)


def plan() -> Any:
    builder = StreamsBuilder()
    builder.stream("in", Consumed.with_(Serdes.string(), Serdes.string())).group_by_key().count(
        Materialized.as_("counts")
    )
    builder.global_table("globals", materialized=Materialized.as_("global-store"))
    return builder.build().build("app", StreamsConfig({"application.id": "app"}))


def tps(*partitions: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition("in", p) for p in partitions)


def state(members: list[MemberMetadata] | None, this: HostInfo | None = A) -> StreamsMetadataState:
    return StreamsMetadataState(plan(), this, lambda: members, lambda topics: {"in": 4})


MEMBERS = [
    MemberMetadata("m1", "p1", A, 3, tps(0, 1), tps(2, 3)),
    MemberMetadata("m2", "p2", B, 3, tps(2, 3), tps(0, 1)),
    MemberMetadata("m3", "p3", None, 3, frozenset(), frozenset()),  # no application.server
]


def test_all_clients_with_an_application_server_are_listed_with_their_stores() -> None:
    listed = state(MEMBERS).all_metadata()
    assert listed is not None and [m.host_info for m in listed] == [A, B]
    assert listed[0].topic_partitions == tps(0, 1) and listed[0].standby_topic_partitions == tps(2, 3)
    assert listed[0].state_store_names == {"counts", "global-store"}
    assert listed[0].standby_state_store_names == {"counts"}


def test_key_metadata_follows_the_default_partitioner() -> None:
    for key in ("x", "y", "zz", "user-7"):
        partition = default_partition(key.encode(), 4)
        owner, standby = (A, B) if partition in (0, 1) else (B, A)
        found = state(MEMBERS).key_metadata("counts", key, Serdes.string())
        assert found == KeyQueryMetadata(owner, frozenset([standby]), partition)


def test_key_metadata_asks_a_custom_partitioner_and_refuses_multicast() -> None:
    calls = []

    def partitioner(topic: str, key: Any, value: Any, n: int) -> int:
        calls.append((topic, key, value, n))
        return 3

    assert state(MEMBERS).key_metadata("counts", "k", partitioner=partitioner) == KeyQueryMetadata(
        B, frozenset([A]), 3
    )
    assert calls == [("in", "k", None, 4)]
    with pytest.raises(ValueError, match="exactly one partition"):
        state(MEMBERS).key_metadata("counts", "k", partitioner=lambda t, k, v, n: {0, 1})


def test_uninitialized_view_global_and_unknown_stores() -> None:
    assert state(None).key_metadata("counts", "k", Serdes.string()) is KeyQueryMetadata.NOT_AVAILABLE
    assert state(None).metadata_for_store("counts") == []
    assert state(MEMBERS).key_metadata("global-store", "k") == KeyQueryMetadata(A, frozenset(), -1)
    assert [m.host_info for m in state(MEMBERS).metadata_for_store("global-store")] == [A, B]
    assert state(MEMBERS).key_metadata("nothing", "k", Serdes.string()) is None
    # Without application.server (Kafka: no host known) a key still has its partition.
    alone = state([], this=None).key_metadata("counts", "k", Serdes.string())
    assert alone == KeyQueryMetadata(HostInfo.UNAVAILABLE, frozenset(), default_partition(b"k", 4))


def test_member_metadata_round_trips_and_other_records_are_ignored() -> None:
    for member in MEMBERS:
        assert MemberMetadata.decode(member.encode()) == member
    assert MemberMetadata.decode(b'{"format": 1, "kind": "assignment-error", "code": 4}') is None
    assert MemberMetadata.decode(b"not json") is None


def test_application_server_must_be_host_and_port() -> None:
    config = StreamsConfig({"application.id": "x", "application.server": "h:8080"})
    assert config["application.server"] == "h:8080"
    assert HostInfo.parse("[::1]:9") == HostInfo("::1", 9) and HostInfo.parse("") is None
    with pytest.raises(ConfigException, match="host:port"):
        StreamsConfig({"application.id": "x", "application.server": "no-port"})


def test_every_task_is_listed_under_exactly_one_thread() -> None:
    cache_1, cache_2 = object(), object()
    divided = divide_tasks(
        [("t1", cache_1), ("t2", cache_2)],
        [("0_0", cache_2), ("0_1", None), ("0_2", None), ("0_3", object())],
        ["1_0", "1_1", "1_2"],
    )
    assert divided["t2"][0][0] == "0_0"  # the thread that processed it last
    assert sorted(divided["t1"][0] + divided["t2"][0]) == ["0_0", "0_1", "0_2", "0_3"]
    assert len(divided["t1"][0]) == len(divided["t2"][0]) == 2  # unprocessed ones balance out
    assert divided["t1"][1] == ["1_0", "1_2"] and divided["t2"][1] == ["1_1"]
    assert divide_tasks([], [("0_0", None)], ["1_0"]) == {}
