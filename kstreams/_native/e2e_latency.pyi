"""Stub of csrc/kstreams/_native/e2e_latency.pyx: KIP-613's end-to-end latency sensor, in C."""

from typing import Any

SAMPLE_WINDOW_S: float
SAMPLES: int

class E2ELatencySensor:
    """The e2e latency of one node: avg, min and max in ms over the last ``SAMPLES`` windows."""

    def record(self, latency_ms: float) -> None:
        """One record whose timestamp is ``latency_ms`` before now."""
    def record_since(self, timestamp: int) -> None:
        """One record with this timestamp (ms), reaching the node now."""
    def record_timestamps(self, timestamps: Any) -> None:
        """Every record of a batch, by its timestamps (an int64 array): now minus each."""
    def now_ms(self) -> float:
        """Wall-clock time in ms, as the sensor reads it."""
    def avg(self) -> float: ...
    def min(self) -> float: ...
    def max(self) -> float: ...
