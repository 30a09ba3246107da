"""The changelog chunks a streaming task keeps in Spark's state, and the order a task takes a
micro-batch's records in: plain Python, no Spark session."""

from __future__ import annotations

import pandas as pd
import pytest

from kstreams.spark.streaming_task import _runs_in_pick_order
from kstreams.spark.task_state import ChangelogFold, StoreRetention, decode_chunk, encode_chunk
from kstreams.state.window_key_schema import changelog_key, session_key

pytestmark = pytest.mark.spark


def test_chunk_round_trips_records_with_null_values() -> None:
    records = [("t-changelog", b"k1", b"v1", 5), ("t-changelog", b"k2", None, 7)]
    assert decode_chunk(encode_chunk(records)) == records


def test_fold_keeps_the_latest_record_of_a_key_and_a_null_deletes_it() -> None:
    fold = ChangelogFold()
    fold.apply([("a", b"k1", b"1", 1), ("a", b"k2", b"1", 2), ("b", b"k1", b"x", 3)])
    fold.apply([("a", b"k1", b"2", 4), ("a", b"k2", None, 5)])
    assert fold.by_topic() == {"a": [(b"k1", b"2", 4)], "b": [(b"k1", b"x", 3)]}
    assert len(fold) == 2


def test_prune_drops_windows_and_sessions_older_than_the_retention() -> None:
    fold = ChangelogFold({"w": StoreRetention("window", 100), "s": StoreRetention("session", 50)})
    fold.apply(
        [
            ("w", changelog_key(b"k", 0, 0), b"old", 1),
            ("w", changelog_key(b"k", 101, 0), b"live", 2),
            ("w", changelog_key(b"k", 200, 0), b"new", 3),
            ("s", session_key(b"k", 0, 10), b"old", 4),
            ("s", session_key(b"k", 50, 70), b"new", 5),
            ("kv", b"k", b"kept", 6),
        ]
    )
    assert fold.prune() == 2
    kept = {(topic, value) for topic, _key, value, _ts in fold.records()}
    assert kept == {("w", b"live"), ("w", b"new"), ("s", b"new"), ("kv", b"kept")}


def test_task_takes_the_input_whose_next_record_is_oldest_in_offset_order() -> None:
    rows = pd.DataFrame(
        {
            "topic": ["users", "users", "clicks", "clicks", "clicks"],
            "timestamp": [5, 30, 10, 8, 40],
            "partition": [0, 0, 0, 0, 0],
            "offset": [0, 1, 0, 1, 2],
        }
    )
    runs = [(topic, positions.tolist()) for topic, positions in _runs_in_pick_order(rows)]
    # clicks offset 1 (ts 8) is late behind offset 0 (ts 10): it still comes after it.
    assert runs == [("users", [0]), ("clicks", [2, 3]), ("users", [1]), ("clicks", [4])]
