"""Apache Kafka's KTableKTableForeignKeyJoinScenarioTest (kstream/internals), ported: a
foreign-key join, then an equi-join of its result with the left table, with serdes from the
config, from ``Consumed``, from the join's ``Materialized`` or from ``Produced``; and the topics
whose names the serdes of a foreign-key join are called with (its subscription and response
topics, the pseudo-topics of the foreign key, the primary key and the value hash, the changelogs
and the sink).

Kafka's ``UniqueTopicSerdeScope`` decorates serdes to record every topic they serialize non-null
data for, with ``--key`` or ``--value``; ``_Recording`` below does the same.
"""

from __future__ import annotations

from typing import Any

import pytest

from kstreams import Consumed, Materialized, Produced, Serdes, StreamsBuilder
from kstreams.serdes import Serde

pytestmark = pytest.mark.on_cluster(representative="test_fk_join_then_equi_join_with_serdes_from_the_config")

I = Serdes.integer()  # noqa: E741 - Kafka's Serdes.Integer(), beside S
S = Serdes.string()
INT_STRING_DEFAULTS = {"default_key_serde": "integer", "default_value_serde": "string"}


def _pair(left: Any, right: Any) -> str:
    return f"({left},{right})"


def _fk_then_equi_join(
    consumed: Any = None, fk_store: Any = None, equi_store: Any = None, produced: Any = None
) -> StreamsBuilder:
    builder = StreamsBuilder()
    a_table = builder.table("A", *([consumed] if consumed else []))
    b_table = builder.table("B")
    fk_result = a_table.join(
        b_table, lambda value: int(value.split("-")[0]), _pair, fk_store or Materialized.as_("asdf")
    )
    final = a_table.join(fk_result, _pair, *([equi_store] if equi_store else []))
    final.to_stream().to("output", *([produced] if produced else []))
    return builder


def _validate_topology_can_process_data(drive: Any, builder: StreamsBuilder) -> None:
    driver = drive(builder.build(), **INT_STRING_DEFAULTS)
    driver.create_input_topic("A", I, S).pipe_input(1, "999-alpha")
    driver.create_input_topic("B", I, S).pipe_input(999, "beta")
    output = driver.create_output_topic("output", I, S)
    assert output.read_key_values_to_map() == {1: "(999-alpha,(999-alpha,beta))"}


def test_fk_join_then_equi_join_with_serdes_from_the_config(drive):
    """shouldWorkWithDefaultSerdes"""
    _validate_topology_can_process_data(drive, _fk_then_equi_join())


def test_fk_join_then_equi_join_with_consumed_serdes(drive):
    """shouldWorkWithDefaultAndConsumedSerdes"""
    _validate_topology_can_process_data(drive, _fk_then_equi_join(consumed=Consumed.with_(I, S)))


def test_fk_join_then_equi_join_with_the_fk_join_s_materialized_serdes(drive):
    """shouldWorkWithDefaultAndJoinResultSerdes"""
    store = Materialized.as_("asdf").with_key_serde(I).with_value_serde(S)
    _validate_topology_can_process_data(drive, _fk_then_equi_join(fk_store=store))


def test_fk_join_then_equi_join_with_the_equi_join_s_materialized_serdes(drive):
    """shouldWorkWithDefaultAndEquiJoinResultSerdes"""
    _validate_topology_can_process_data(drive, _fk_then_equi_join(equi_store=Materialized.with_(I, S)))


def test_fk_join_then_equi_join_with_produced_serdes(drive):
    """shouldWorkWithDefaultAndProducedSerdes"""
    _validate_topology_can_process_data(drive, _fk_then_equi_join(produced=Produced.with_(I, S)))


class _Recording(Serde):
    """A serde that records each topic it serializes non-null data for, as ``<topic>--key`` or
    ``--value`` (deserializing records nothing, as in Kafka's decorator)."""

    def __init__(self, inner: Serde, is_key: bool, topics: set[str]) -> None:
        self._inner, self._suffix, self._topics = inner, "--key" if is_key else "--value", topics

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is not None:
            self._topics.add(f"{topic}{self._suffix}")
        return self._inner.serialize(topic, data)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        return self._inner.deserialize(topic, data)


def test_fk_join_serdes_are_called_with_kafka_s_topic_names(drive):
    """shouldUseExpectedTopicsWithSerde"""
    app = "ktable-ktable-joinOnForeignKey"
    topics: set[str] = set()
    builder = StreamsBuilder()
    left = builder.table(
        "left_table", Consumed.with_(_Recording(I, True, topics), _Recording(S, False, topics))
    )
    right = builder.table(
        "right_table", Consumed.with_(_Recording(I, True, topics), _Recording(S, False, topics))
    )
    left.join(
        right,
        lambda value: int(value.split("|")[1]),
        _pair,
        Materialized.with_(None, _Recording(S, False, topics)),
    ).to_stream().to("output-topic")
    driver = drive(builder.build(), application_id=app)
    driver.create_input_topic("left_table", I, S).pipe_input(2, "lhsValue1|1")
    driver.create_input_topic("right_table", I, S).pipe_input(1, "rhsValue1")
    assert topics == {
        # pseudo-topics
        f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic-fk--key",
        f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic-pk--key",
        f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic-vh--value",
        # internal topics
        f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic--key",
        f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic--key",
        f"{app}-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic--value",
        f"{app}-left_table-STATE-STORE-0000000000-changelog--key",
        f"{app}-left_table-STATE-STORE-0000000000-changelog--value",
        f"{app}-right_table-STATE-STORE-0000000003-changelog--key",
        f"{app}-right_table-STATE-STORE-0000000003-changelog--value",
        # output topics
        "output-topic--key",
        "output-topic--value",
    }
