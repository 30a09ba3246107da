"""The consumer client of the embedded broker: manual assignment or group membership, fetch, and
the cooperative rebalance callbacks.

``poll`` first runs the group's callbacks, in this order: ``on_partitions_lost`` (this member was
expelled for not polling within ``session.timeout.ms``; it then rejoins with a new member id),
``on_assignment_error`` (the group carries an application error code), ``on_partitions_revoked``
(partitions that a rebalance gave to another member; they are handed over when the callback
returns, so commit inside it), ``on_partitions_assigned`` (partitions nobody else owns any more,
called once per generation even when empty). Then it fetches from the unpaused assigned partitions,
starting at a partition that rotates from poll to poll so that ``max_records`` is shared fairly.
With nothing to return it waits, up to its timeout, for records or a group change; a poll that ran
callbacks returns at once.

Positions start at the group's committed offset, else at ``auto.offset.reset`` (earliest, latest,
or none: raise ``ClusterError``); an out-of-range position (records deleted, for example) is reset
the same way. A read_committed consumer reads up to the last stable offset and never sees aborted
records; its position moves past transaction markers and aborted batches.

Threads: a consumer is used by one thread at a time (the port's rule), but its state is read by the
group on other members' threads, so all of it is touched under the broker lock; callbacks run with
no lock held.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.embedded_broker import EmbeddedBroker
from kstreams.cluster.embedded_group import ConsumerGroup, Membership
from kstreams.cluster.embedded_log import PartitionLog
from kstreams.cluster.port import (
    ERROR_NONE,
    ClusterError,
    CommitFailedError,
    GroupAssignor,
    GroupListener,
    OffsetAndMetadata,
    TopicPartition,
)

__all__ = ["EmbeddedConsumer"]

logger = logging.getLogger(__name__)

_RESET_ALIASES = {
    "earliest": "earliest",
    "smallest": "earliest",
    "beginning": "earliest",
    "latest": "latest",
    "largest": "latest",
    "end": "latest",
    "none": "none",
    "error": "none",
}
_ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
# Kafka's default session.timeout.ms since 3.0.
_DEFAULT_SESSION_TIMEOUT_MS = 45000


class EmbeddedConsumer:
    """A ``Consumer`` of an ``EmbeddedCluster``."""

    def __init__(
        self, broker: EmbeddedBroker, group_id: str | None, config: Mapping[str, object] | None = None
    ) -> None:
        config = dict(config or {})
        self._broker = broker
        self._group_id = group_id
        isolation = str(config.get("isolation.level", "read_uncommitted"))
        if isolation not in _ISOLATION_LEVELS:
            raise ValueError(f"isolation.level must be one of {_ISOLATION_LEVELS}, got {isolation!r}")
        self._read_committed = isolation == "read_committed"
        reset = str(config.get("auto.offset.reset", "latest"))
        if reset not in _RESET_ALIASES:
            raise ValueError(f"auto.offset.reset must be earliest, latest or none, got {reset!r}")
        self._reset = _RESET_ALIASES[reset]
        session_ms = int(str(config.get("session.timeout.ms", _DEFAULT_SESSION_TIMEOUT_MS)))
        if session_ms <= 0:
            raise ValueError(f"session.timeout.ms must be positive, got {session_ms}")
        self._session_timeout = session_ms / 1000.0
        with broker.lock:
            number = broker.next_client_number()
        self.client_id = str(config.get("client.id") or f"consumer-{group_id or 'nogroup'}-{number}")

        self._listener: GroupListener | None = None
        self._assignor: GroupAssignor | None = None
        self._userdata = b""
        self._member: Membership | None = None
        self._manual: list[TopicPartition] = []
        # Partitions lost to an expulsion, reported in the next poll.
        self._lost: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._paused: set[TopicPartition] = set()
        self._rotation = 0
        self._in_poll = False
        self._closed = False
        self._woken = False  # wakeup() was called: the current or next poll returns at once

    # Group membership

    def subscribe(
        self, topics: Sequence[str], listener: GroupListener, assignor: GroupAssignor | None = None
    ) -> None:
        broker = self._broker
        # The assignor's subscription reads the runtime: asked before the broker lock is taken.
        self._assignor = assignor
        self._refresh_userdata()
        with broker.lock:
            self._check_usable()
            group = self._require_group("subscribe")
            if self._manual:
                raise ClusterError(
                    f"Consumer {self.client_id} has a manual assignment: it cannot also subscribe"
                )
            self._listener = listener
            counts = broker.partition_counts()
            group.expire(time.monotonic(), counts)
            member = self._member
            if member is not None and not member.expelled:
                group.resubscribe(member, topics, counts)
            else:
                if member is not None:
                    self._note_lost(member)
                self._join(group, topics)
            broker.notify()

    def request_rejoin(self) -> None:
        with self._broker.lock:
            self._check_usable()
            if self._member is not None and not self._member.expelled:
                self._group().rebalance(
                    self._broker.partition_counts(), f"{self._member.member_id} asked to rejoin"
                )
                self._broker.notify()

    def signal_application_error(self, code: int) -> None:
        with self._broker.lock:
            self._check_usable()
            group = self._require_group("signal_application_error")
            logger.info(
                "Group %s: %s signals application error code %d", group.group_id, self.client_id, code
            )
            group.error_code = code
            self._broker.notify()

    @property
    def member_id(self) -> str:
        with self._broker.lock:
            return self._member.member_id if self._member is not None else ""

    @property
    def group_generation(self) -> int:
        with self._broker.lock:
            return self._member.generation if self._member is not None else -1

    @property
    def rebalancing(self) -> bool:
        # The embedded group hands partitions over member by member: commits are never refused
        # for a rebalance in progress.
        return False

    @property
    def fences_stale_transactional_commits(self) -> bool:
        # send_offsets_to_transaction carries only the group id here (the port's signature).
        return False

    def group_assignment(self) -> dict[str, list[TopicPartition]]:
        """Every member's target assignment of the group's current generation."""
        with self._broker.lock:
            self._check_usable()
            if self._member is None or self._member.expelled:
                return {}
            return {mid: sorted(m.target) for mid, m in self._group().members.items()}

    # Assignment and positions

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        with self._broker.lock:
            self._check_usable()
            if self._member is not None:
                raise ClusterError(f"Consumer {self.client_id} subscribed to a group: it cannot also assign")
            self._manual = sorted(set(partitions))
            keep = set(self._manual)
            self._forget([tp for tp in self._positions if tp not in keep])
            self._paused &= keep

    def assignment(self) -> list[TopicPartition]:
        with self._broker.lock:
            return self._assigned()

    def seek(self, partition: TopicPartition, offset: int) -> None:
        with self._broker.lock:
            self._check_assigned(partition)
            self._positions[partition] = offset

    def seek_to_beginning(self, partitions: Sequence[TopicPartition]) -> None:
        with self._broker.lock:
            for tp in partitions:
                self._check_assigned(tp)
                log = self._broker.log(tp)
                if log is not None:
                    self._positions[tp] = log.start_offset

    def position(self, partition: TopicPartition) -> int:
        with self._broker.lock:
            self._check_assigned(partition)
            log = self._broker.require_log(partition)
            return self._position(partition, log)

    def pause(self, partitions: Sequence[TopicPartition]) -> None:
        with self._broker.lock:
            assigned = set(self._assigned())
            self._paused.update(tp for tp in partitions if tp in assigned)

    def resume(self, partitions: Sequence[TopicPartition]) -> None:
        with self._broker.lock:
            self._paused.difference_update(partitions)

    def paused(self) -> list[TopicPartition]:
        with self._broker.lock:
            return sorted(self._paused)

    # Offsets

    def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        self._broker.faults.check("commit")
        with self._broker.lock:
            self._check_usable()
            group = self._require_group("commit")
            member = self._member
            if member is not None and member.expelled:
                raise CommitFailedError(
                    f"Commit of group {group.group_id!r} refused: member {member.member_id} was expelled "
                    f"(no poll within session.timeout.ms={round(self._session_timeout * 1000)}); its "
                    "partitions are lost and it rejoins in its next poll"
                )
            self._broker.commit_offsets(group.group_id, offsets, metadata)

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        self._broker.faults.check("committed")
        with self._broker.lock:
            self._check_usable()
            if self._group_id is None:
                return {}
            offsets = self._broker.group(self._group_id).offsets
            return {tp: offsets[tp] for tp in partitions if tp in offsets}

    def committed_with_metadata(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        self._broker.faults.check("committed")
        with self._broker.lock:
            self._check_usable()
            if self._group_id is None:
                return {}
            group = self._broker.group(self._group_id)
            return {
                tp: OffsetAndMetadata(group.offsets[tp], group.metadata.get(tp, ""))
                for tp in partitions
                if tp in group.offsets
            }

    def end_offsets(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        self._broker.faults.check("end_offsets")
        with self._broker.lock:
            self._check_usable()
            if self._read_committed:
                self._broker.expire_transactions(time.monotonic())
            return {
                tp: self._broker.require_log(tp).high_watermark(self._read_committed) for tp in partitions
            }

    # Poll

    def poll(self, timeout: float, max_records: int = 10000) -> list[tuple[TopicPartition, RecordBatch]]:
        broker = self._broker
        broker.faults.check("poll")
        deadline = time.monotonic() + max(timeout, 0.0)
        with broker.lock:
            self._check_usable()
            self._enter_poll()
        try:
            while True:
                synced = self._run_group_callbacks()
                with broker.lock:
                    while True:
                        self._check_usable()
                        if self._read_committed:
                            broker.expire_transactions(time.monotonic())
                        records = self._fetch(max_records)
                        if records or synced:
                            return records
                        if self._group_work_pending():
                            break  # run the callbacks, which need the lock released
                        now = time.monotonic()
                        remaining = deadline - now
                        if remaining <= 0 or self._woken:
                            self._woken = False
                            return []
                        broker.changed.wait(self._wait_time(now, remaining))
        finally:
            with broker.lock:
                self._in_poll = False
                if self._member is not None:
                    self._member.in_poll = False
                    self._member.last_seen = time.monotonic()

    def wakeup(self) -> None:
        with self._broker.lock:
            self._woken = True
            self._broker.changed.notify_all()

    def close(self) -> None:
        """Leave the group (an orderly leave: what this member owned is free at once). No
        callbacks run: the port runs them only inside ``poll``."""
        with self._broker.lock:
            if self._closed:
                return
            self._closed = True
            member = self._member
            if member is not None and not member.expelled:
                self._group().leave(member, self._broker.partition_counts())
            self._member = None
            self._broker.notify()

    # Internals; every one expects the broker lock held unless it says otherwise.

    def _enter_poll(self) -> None:
        self._in_poll = True
        member = self._member
        if member is None:
            return
        # The group learns of an expired session when anyone looks, this member included.
        if self._group().expire(time.monotonic(), self._broker.partition_counts()):
            self._broker.notify()
        if not member.expelled:
            member.in_poll = True

    def _wait_time(self, now: float, remaining: float) -> float:
        """How long a blocked poll may sleep: until its deadline, until another member's session
        would expire, or until an open transaction would time out, whichever is first (someone has
        to notice an expired member or transaction)."""
        if self._read_committed:
            # A transaction timing out moves the last stable offset: someone has to notice.
            txn_deadline = self._broker.next_transaction_deadline()
            if txn_deadline is not None:
                remaining = min(remaining, max(txn_deadline - now, 0.001))
        if self._member is None:
            return remaining
        group = self._group()
        if group.expire(now, self._broker.partition_counts()):
            self._broker.notify()
            return 0.0
        expiry = group.next_expiry()
        join_deadline = group.join_deadline()
        if join_deadline is not None:
            # Someone has to assign once the members' time to report ran out.
            expiry = join_deadline if expiry is None else min(expiry, join_deadline)
        if expiry is None:
            return remaining
        return min(remaining, max(expiry - now, 0.001))

    def _run_group_callbacks(self) -> bool:
        """Run pending rebalance callbacks (no lock held on entry); True if any ran."""
        ran = False
        while True:
            with self._broker.lock:
                action = self._next_action()
            if action is None:
                return ran
            ran = True
            kind, partitions, code, userdata = action
            listener = self._listener
            assert listener is not None
            if kind == "report":
                self._refresh_userdata()
                with self._broker.lock:
                    member = self._member
                    if member is not None and not member.expelled and self._group().needs_report(member):
                        self._group().report(member, self._userdata, time.monotonic())
                        self._broker.notify()
            elif kind == "lost":
                logger.warning("%s lost partitions %s", self.client_id, _names(partitions))
                listener.on_partitions_lost(list(partitions))
            elif kind == "error":
                listener.on_assignment_error(code)
            elif kind == "revoke":
                try:
                    listener.on_partitions_revoked(list(partitions))
                finally:
                    with self._broker.lock:
                        if self._member is not None and not self._member.expelled:
                            self._group().release(self._member, partitions)
                        self._forget(partitions)
                        self._broker.notify()
            else:
                if self._assignor is not None and userdata is not None:
                    self._assignor.on_assignment(userdata)
                listener.on_partitions_assigned(list(partitions))

    def _refresh_userdata(self) -> None:
        """Ask the assignor for fresh subscription user data (no lock held: the assignor reads
        the runtime), as a Kafka member does when it (re)joins."""
        if self._assignor is not None:
            self._userdata = self._assignor.subscription()

    def _next_action(self) -> tuple[str, list[TopicPartition], int, bytes | None] | None:
        """The next callback to run: (kind, partitions, error code), with its state change made
        (except for a revocation, applied once its callback returned)."""
        member = self._member
        if member is not None and member.expelled:
            # Whatever it owned went to others already: report it lost, then rejoin.
            self._note_lost(member)
            self._join(self._group(), member.topics)
            member = self._member
        if self._lost:
            lost, self._lost = self._lost, []
            return "lost", lost, ERROR_NONE, None
        if member is None:
            return None
        group = self._group()
        if group.error_code != ERROR_NONE and member.error_delivered != group.error_code:
            member.error_delivered = group.error_code
            return "error", [], group.error_code, None
        if group.joining and group.maybe_assign(time.monotonic()):
            self._broker.notify()
        if group.needs_report(member):
            return "report", [], ERROR_NONE, None
        if group.joining:
            return None  # the others' subscriptions are awaited; nothing moves meanwhile
        revoke = group.to_revoke(member)
        if revoke:
            return "revoke", revoke, ERROR_NONE, None
        gained = group.grantable(member)
        if gained or member.generation != group.generation:
            # The assignor hears of each generation once, with its first callback.
            userdata = member.assigned_userdata if member.generation != group.generation else None
            group.grant(member, gained)
            member.generation = group.generation
            self._forget(gained)
            if gained:
                logger.info(
                    "%s is assigned %s (generation %d)", member.member_id, _names(gained), group.generation
                )
            return "assign", gained, ERROR_NONE, userdata
        return None

    def _group_work_pending(self) -> bool:
        member = self._member
        if self._lost or (member is not None and member.expelled):
            return True
        if member is None:
            return False
        group = self._group()
        if group.joining:
            if group.maybe_assign(time.monotonic()):
                self._broker.notify()
                return True
            return group.needs_report(member)
        return (
            (group.error_code != ERROR_NONE and member.error_delivered != group.error_code)
            or member.generation != group.generation
            or bool(member.owned - member.target)
            or bool(group.grantable(member))
        )

    def _fetch(self, max_records: int) -> list[tuple[TopicPartition, RecordBatch]]:
        fetchable = [tp for tp in self._assigned() if tp not in self._paused]
        if not fetchable or max_records <= 0:
            return []
        start = self._rotation % len(fetchable)
        self._rotation += 1
        out: list[tuple[TopicPartition, RecordBatch]] = []
        budget = max_records
        for tp in fetchable[start:] + fetchable[:start]:
            if budget <= 0:
                break
            log = self._broker.log(tp)
            if log is None:
                continue  # its topic was deleted; the rebalance that follows takes it away
            batch, self._positions[tp] = log.read(self._position(tp, log), budget, self._read_committed)
            if batch is not None:
                out.append((tp, batch))
                budget -= len(batch)
        return out

    def _position(self, tp: TopicPartition, log: PartitionLog) -> int:
        position = self._positions.get(tp)
        if position is None and self._group_id is not None:
            position = self._broker.group(self._group_id).offsets.get(tp)
        if position is None or not log.start_offset <= position <= log.end_offset:
            position = self._reset_position(tp, log, position)
        self._positions[tp] = position
        return position

    def _reset_position(self, tp: TopicPartition, log: PartitionLog, position: int | None) -> int:
        if self._reset == "none":
            what = "no committed offset" if position is None else f"position {position} is out of range"
            raise ClusterError(
                f"Consumer {self.client_id}: {tp} has {what} (log {log.start_offset}..{log.end_offset}) "
                "and auto.offset.reset is none"
            )
        if self._reset == "earliest":
            return log.start_offset
        return log.high_watermark(self._read_committed)

    def _assigned(self) -> list[TopicPartition]:
        if self._member is not None:
            return sorted(self._member.owned)
        return list(self._manual)

    def _check_assigned(self, tp: TopicPartition) -> None:
        self._check_usable()
        if self._member is not None:
            if tp in self._member.owned:
                return
        elif tp in self._manual:
            return
        raise ClusterError(f"Consumer {self.client_id} is not assigned {tp}")

    def _note_lost(self, expelled: Membership) -> None:
        """Remember what an expelled membership owned, for on_partitions_lost in the next poll."""
        self._lost.extend(sorted(expelled.owned))
        self._forget(list(expelled.owned))
        expelled.owned.clear()

    def _forget(self, partitions: Sequence[TopicPartition]) -> None:
        for tp in partitions:
            self._positions.pop(tp, None)
            self._paused.discard(tp)

    def _join(self, group: ConsumerGroup, topics: Sequence[str] | frozenset[str]) -> None:
        self._member = group.join(
            self.client_id,
            topics,
            self._session_timeout,
            time.monotonic(),
            self._broker.partition_counts(),
            self._assignor,
            self._userdata,
        )
        self._member.in_poll = self._in_poll

    def _group(self) -> ConsumerGroup:
        assert self._group_id is not None
        return self._broker.group(self._group_id)

    def _require_group(self, operation: str) -> ConsumerGroup:
        if self._group_id is None:
            raise ClusterError(f"{operation} needs a consumer created with a group id")
        return self._broker.group(self._group_id)

    def _check_usable(self) -> None:
        self._broker.check_open()
        if self._closed:
            raise ClusterError(f"Consumer {self.client_id} is closed")


def _names(partitions: Sequence[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in partitions) or "nothing"
