"""Emit-on-window-close across a restart, run by KafkaStreams on both cluster adapters under
at_least_once and exactly_once_v2: a new client whose state comes from the changelogs alone
forwards every window's final result that the first client did not, and none that it did."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.serdes import Serdes
from kstreams.topology import EmitStrategy, Materialized, Produced, StreamsBuilder, TimeWindows

S = Serdes.string()
L = Serdes.long()
WINDOW = 10_000


def _final_counts(source: str, sink: str) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream(source)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW))
        .emit_strategy(EmitStrategy.on_window_close())
        # Closed windows stay in the store after they are emitted: a restart must not repeat them.
        .count(Materialized.as_("counts").with_retention(6 * WINDOW))
        .to_stream()
        .map(lambda window, count: (f"{window.key}@{window.start}", count))
        .to(sink, Produced.with_(S, L))
    )
    return builder.build()


def _outputs(cluster: Any, sink: str) -> list[tuple[str, int, int]]:
    return [
        (r.key.decode(), L.deserialize(sink, r.value), r.timestamp)
        for r in cluster.read(sink, "read_committed")
    ]


def _base() -> int:
    # Near now (within the topics' retention), aligned to a window.
    return (int(time.time() * 1000) // WINDOW) * WINDOW - 6 * WINDOW


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_emit_on_window_close_forwards_each_final_result_once_across_a_restart(
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
    base = _base()
    w0, w1, w2, w3 = base, base + WINDOW, base + 2 * WINDOW, base + 3 * WINDOW
    first = KafkaStreams(
        _final_counts(source, sink),
        client_config(tmp_path / "a", processing_guarantee=guarantee),
        cluster=cluster,
    )
    clients.append(first)
    first.start()
    for key, timestamp in [("a", w0 + 1), ("a", w0 + 2), ("b", w0 + 3), ("c", w1 + 1), ("d", w1 + 2)]:
        cluster.produce(source, key.encode(), b"v", timestamp=timestamp)
    expected_first = [(f"a@{w0}", 2, w0 + 2), (f"b@{w0}", 1, w0 + 3)]
    wait_until(lambda: _outputs(cluster, sink) == expected_first, timeout, "the first window's final counts")
    # The emit position went to its changelog with the results (only when windows were emitted).
    positions = [
        L.deserialize("", r.value)
        for r in cluster.read(f"{app_id}-counts-emit-position-changelog", "read_committed")
    ]
    assert positions == [w1 + 1]
    assert first.close(timeout=30)

    # A new client with empty local state: windows and emit position come from the changelogs.
    second = KafkaStreams(
        _final_counts(source, sink),
        client_config(tmp_path / "b", processing_guarantee=guarantee),
        cluster=cluster,
    )
    clients.append(second)
    second.start()
    cluster.produce(source, b"a", b"v", timestamp=w0 + 5)  # late: its window went out before the restart
    cluster.produce(source, b"c", b"v", timestamp=w1 + 3)
    cluster.produce(source, b"e", b"v", timestamp=w2 + 1)  # closes the second window
    expected = [*expected_first, (f"c@{w1}", 2, w1 + 3), (f"d@{w1}", 1, w1 + 2)]
    wait_until(lambda: len(_outputs(cluster, sink)) >= 4, timeout, "the second window's final counts")
    assert _outputs(cluster, sink) == expected
    cluster.produce(source, b"f", b"v", timestamp=w3 + 1)  # closes the third window
    expected.append((f"e@{w2}", 1, w2 + 1))
    wait_until(lambda: len(_outputs(cluster, sink)) >= 5, timeout, "the third window's final count")
    assert second.close(timeout=30)
    assert _outputs(cluster, sink) == expected  # nothing more at close: f's window is still open
