"""WindowedKey.window(): Kafka's Window view beside the key/start/end fields."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone

import pytest

from kstreams.state import Window, WindowedKey


def test_windowed_key_keeps_its_fields_and_offers_kafkas_window() -> None:
    windowed = WindowedKey("a", 1_000, 2_000)
    assert (windowed.key, windowed.start, windowed.end) == ("a", 1_000, 2_000)
    window = windowed.window()
    assert (window.start(), window.end()) == (1_000, 2_000)
    assert window.start_time() == datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc)
    assert window.end_time() == datetime(1970, 1, 1, 0, 0, 2, tzinfo=timezone.utc)
    assert window == Window(1_000, 2_000) and hash(window) == hash(Window(1_000, 2_000))
    assert str(windowed) == "[a@1000/2000]"


def test_window_overlap_and_validation() -> None:
    assert Window(0, 10).overlap(Window(5, 15))
    assert not Window(0, 10).overlap(Window(10, 20))
    with pytest.raises(ValueError, match="negative"):
        Window(-1, 5)
    with pytest.raises(ValueError, match="smaller than its start"):
        Window(5, 4)


def test_window_of_a_windowed_key_works_when_only_the_compiled_records_were_imported() -> None:
    """The compiled core finds Window below it, so no import of kstreams.state is needed first."""
    code = "from kstreams._native.record import WindowedKey; print(WindowedKey('k', 5, 9).window())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Window{startMs=5, endMs=9}"
