"""Session emit-on-window-close across a restart, run by KafkaStreams on both cluster adapters under
at_least_once and exactly_once_v2: a new client whose state comes from the changelogs alone (a
fresh state directory) forwards every session's final result that the first client did not, and
none that it did; across both runs, each session's final result exactly once."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.serdes import Serdes
from kstreams.topology import EmitStrategy, Materialized, Produced, SessionWindows, StreamsBuilder

S = Serdes.string()
L = Serdes.long()
GAP = 10_000


def _final_session_counts(source: str, sink: str) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream(source)
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(GAP))
        .emit_strategy(EmitStrategy.on_window_close())
        .count(Materialized.as_("sessions"))
        .to_stream()
        .map(lambda session, count: (f"{session.key}@{session.start}-{session.end}", count))
        .to(sink, Produced.with_(S, L))
    )
    return builder.build()


def _outputs(cluster: Any, sink: str) -> list[tuple[str, int, int]]:
    return [
        (r.key.decode(), L.deserialize(sink, r.value), r.timestamp)
        for r in cluster.read(sink, "read_committed")
    ]


def _base() -> int:
    # Near now (within the topics' retention).
    return int(time.time() * 1000) - 6 * GAP


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_session_emit_on_window_close_forwards_each_final_result_once_across_a_restart(
    cluster: Any,
    app_id: str,
    tmp_path: Path,
    clients: list[KafkaStreams],
    client_config: Callable[..., dict[str, object]],
    wait_until: Callable[..., None],
    guarantee: str,
) -> None:
    source, sink = f"{app_id}-events", f"{app_id}-final"
    cluster.create_topic(source, 1)
    cluster.create_topic(sink, 1)
    timeout = 30.0 if isinstance(cluster, EmbeddedCluster) else 60.0
    b = _base()
    first = KafkaStreams(
        _final_session_counts(source, sink),
        client_config(tmp_path / "a", processing_guarantee=guarantee),
        cluster=cluster,
    )
    clients.append(first)
    first.start()
    for key, timestamp in [("a", b + 1), ("a", b + 2), ("b", b + 3), ("c", b + GAP + 5), ("d", b + GAP + 10)]:
        cluster.produce(source, key.encode(), b"v", timestamp=timestamp)
    # Stream time b + GAP + 5 closes the sessions that ended before b + 5 (b + GAP + 10 closes none).
    expected_first = [(f"a@{b + 1}-{b + 2}", 2, b + 2), (f"b@{b + 3}-{b + 3}", 1, b + 3)]
    wait_until(lambda: _outputs(cluster, sink) == expected_first, timeout, "the first sessions' final counts")
    positions = [
        L.deserialize("", r.value)
        for r in cluster.read(f"{app_id}-sessions-emit-position-changelog", "read_committed")
    ]
    assert positions == [b + 5]  # written only when sessions went out
    assert first.close(timeout=30)

    # A new client with empty local state: sessions and emit position come from the changelogs.
    second = KafkaStreams(
        _final_session_counts(source, sink),
        client_config(tmp_path / "b", processing_guarantee=guarantee),
        cluster=cluster,
    )
    clients.append(second)
    second.start()
    cluster.produce(source, b"a", b"v", timestamp=b + 5)  # late: a's session went out before the restart
    cluster.produce(source, b"c", b"v", timestamp=b + GAP + 7)  # extends c's session
    cluster.produce(source, b"e", b"v", timestamp=b + 3 * GAP)  # closes c's and d's sessions
    expected = [
        *expected_first,
        (f"c@{b + GAP + 5}-{b + GAP + 7}", 2, b + GAP + 7),
        (f"d@{b + GAP + 10}-{b + GAP + 10}", 1, b + GAP + 10),
    ]
    wait_until(lambda: len(_outputs(cluster, sink)) >= 4, timeout, "the second sessions' final counts")
    assert _outputs(cluster, sink) == expected
    cluster.produce(source, b"f", b"v", timestamp=b + 5 * GAP)  # closes e's session
    expected.append((f"e@{b + 3 * GAP}-{b + 3 * GAP}", 1, b + 3 * GAP))
    wait_until(lambda: len(_outputs(cluster, sink)) >= 5, timeout, "the last session's final count")
    assert second.close(timeout=30)
    assert _outputs(cluster, sink) == expected  # nothing more at close: f's session is still open
