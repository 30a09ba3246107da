"""KTable.suppress and emit-on-window-close run by KafkaStreams on both cluster adapters: final
results reach the output topic, and a restart restores the suppression buffer from its changelog
so no final result is lost or repeated."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kstreams import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.serdes import Serdes
from kstreams.topology import (
    BufferConfig,
    EmitStrategy,
    Produced,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
)

S = Serdes.string()
L = Serdes.long()
WINDOW = 10_000


def _final_counts(source: str, sink: str, emit_on_close: bool = False) -> Any:
    builder = StreamsBuilder()
    windowed = builder.stream(source).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(WINDOW))
    if emit_on_close:
        table = windowed.emit_strategy(EmitStrategy.on_window_close()).count()
    else:
        table = windowed.count().suppress(
            Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final")
        )
    table.to_stream().map(lambda window, count: (f"{window.key}@{window.start}", count)).to(
        sink, Produced.with_(S, L)
    )
    return builder.build()


def _outputs(cluster: Any, sink: str) -> list[tuple[str, int, int]]:
    return [(r.key.decode(), L.deserialize(sink, r.value), r.timestamp) for r in cluster.read(sink)]


def _base() -> int:
    # Near now (within the topics' retention), aligned to a window.
    return (int(time.time() * 1000) // WINDOW) * WINDOW - 6 * WINDOW


def test_suppression_buffer_survives_a_restart_without_losing_or_repeating_results(
    cluster: Any,
    app_id: str,
    tmp_path: Path,
    clients: list[KafkaStreams],
    client_config: Callable[..., dict[str, object]],
    wait_until: Callable[..., None],
) -> None:
    source, sink = f"{app_id}-events", f"{app_id}-final"
    cluster.create_topic(source, 1)
    cluster.create_topic(sink, 1)
    timeout = 30.0 if isinstance(cluster, EmbeddedCluster) else 60.0
    base = _base()
    w0, w1, w2 = base, base + WINDOW, base + 2 * WINDOW
    first = KafkaStreams(_final_counts(source, sink), client_config(tmp_path / "a"), cluster=cluster)
    clients.append(first)
    first.start()
    for key, timestamp in [("a", w0 + 1), ("a", w0 + 2), ("b", w0 + 3), ("c", w1 + 1), ("d", w1 + 2)]:
        cluster.produce(source, key.encode(), b"v", timestamp=timestamp)
    expected_first = [(f"a@{w0}", 2, w0 + 2), (f"b@{w0}", 1, w0 + 3)]
    wait_until(lambda: _outputs(cluster, sink) == expected_first, timeout, "the first window's final counts")
    changelog = f"{app_id}-final-store-changelog"
    # c and d are buffered (their window is open) and logged; a and b were emitted and deleted.
    # A key is Kafka's time-windowed key: the inner key, then the window start (8 bytes).
    wait_until(
        lambda: {r.key[:-8] for r in cluster.read(changelog) if r.value is not None} >= {b"c", b"d"},
        timeout,
        "the buffered entries in the changelog",
    )
    assert first.close(timeout=30)

    # A new client with empty local state: the buffer comes back from the changelog alone.
    second = KafkaStreams(_final_counts(source, sink), client_config(tmp_path / "b"), cluster=cluster)
    clients.append(second)
    second.start()
    cluster.produce(source, b"c", b"v", timestamp=w1 + 3)
    cluster.produce(source, b"e", b"v", timestamp=w2 + 1)  # closes the second window
    expected = [*expected_first, (f"c@{w1}", 2, w1 + 3), (f"d@{w1}", 1, w1 + 2)]
    wait_until(lambda: len(_outputs(cluster, sink)) >= 4, timeout, "the second window's final counts")
    assert _outputs(cluster, sink) == expected
    assert second.close(timeout=30)
    assert _outputs(cluster, sink) == expected  # nothing more at close: e's window is still open


def test_emit_on_window_close_forwards_final_counts_on_the_cluster(
    cluster: Any,
    app_id: str,
    tmp_path: Path,
    clients: list[KafkaStreams],
    client_config: Callable[..., dict[str, object]],
    wait_until: Callable[..., None],
) -> None:
    source, sink = f"{app_id}-events", f"{app_id}-final"
    cluster.create_topic(source, 1)
    cluster.create_topic(sink, 1)
    timeout = 30.0 if isinstance(cluster, EmbeddedCluster) else 60.0
    base = _base()
    streams = KafkaStreams(
        _final_counts(source, sink, emit_on_close=True), client_config(tmp_path), cluster=cluster
    )
    clients.append(streams)
    streams.start()
    for key, timestamp in [("a", base + 1), ("b", base + 2), ("a", base + 3), ("a", base + WINDOW)]:
        cluster.produce(source, key.encode(), b"v", timestamp=timestamp)
    expected = [(f"a@{base}", 2, base + 3), (f"b@{base}", 1, base + 2)]
    wait_until(lambda: len(_outputs(cluster, sink)) >= 2, timeout, "the final counts")
    assert _outputs(cluster, sink) == expected
