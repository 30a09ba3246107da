"""The KafkaStreams client's states and which transitions between them are allowed.

Kafka Streams refuses some transitions silently (they lose a race with a concurrent change, such as
a close while an error shutdown is under way) and raises for the rest; ``check_transition`` says
which is which.
"""

from __future__ import annotations

import enum

from kstreams.errors import IllegalStateException

__all__ = ["State", "check_transition"]


class State(enum.Enum):
    """The client's states; ``is_running_or_rebalancing`` is True in RUNNING and REBALANCING."""

    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    PENDING_ERROR = "PENDING_ERROR"
    ERROR = "ERROR"

    def is_running_or_rebalancing(self) -> bool:
        return self in (State.RUNNING, State.REBALANCING)


_VALID = {
    State.CREATED: {State.REBALANCING, State.PENDING_SHUTDOWN},
    State.REBALANCING: {State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR},
    State.RUNNING: {State.REBALANCING, State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR},
    State.PENDING_SHUTDOWN: {State.NOT_RUNNING},
    State.NOT_RUNNING: set(),
    State.PENDING_ERROR: {State.ERROR},
    State.ERROR: set(),
}
_SILENTLY_REFUSED = {
    State.PENDING_SHUTDOWN: set(State) - {State.NOT_RUNNING},
    State.NOT_RUNNING: {State.PENDING_SHUTDOWN, State.NOT_RUNNING},
    State.REBALANCING: {State.REBALANCING},
    State.ERROR: {State.PENDING_ERROR, State.ERROR, State.PENDING_SHUTDOWN},
    State.PENDING_ERROR: set(State) - {State.ERROR},
}


def check_transition(client_id: str, old: State, new: State) -> bool:
    """True if ``old -> new`` is allowed, False if it is refused silently; raises
    IllegalStateException for any other transition."""
    if new in _SILENTLY_REFUSED.get(old, set()):
        return False
    if new not in _VALID[old]:
        raise IllegalStateException(
            f"Stream-client {client_id}: unexpected state transition from {old.name} to {new.name}."
        )
    return True
