"""The metadata channel: every client of an application tells the others where it serves queries
and which partitions it holds, as Kafka Streams' assignor does in rebalance user data.

librdkafka has no custom assignor, so nothing can ride on the rebalance itself. Each client with
an ``application.server`` runs one ``MetadataChannel`` thread that

- publishes this client's ``MemberMetadata`` (member id, process id, application.server, group
  generation, the source partitions of its active tasks and of its standby tasks) to the
  application's control topic, ``<application.id>-control`` partition 0, whenever it changes: after
  every rebalance (the generation moves, tasks come and go) and whenever its standbys move;
- reads the control topic from its log start and keeps the latest record of every member;
- keeps only the members the group has now (``Admin.group_members``, asked after it read new
  records and every ``MEMBERSHIP_REFRESH_S``): a member that left or crashed drops out at the
  rebalance its departure causes, when the survivors republish.

It uses only the cluster port (an admin, a group-less consumer assigned to the partition, a
producer), so it works the same on the embedded cluster and on Kafka. The control topic also
carries the Kafka adapter's application-wide signals; each reader ignores the other's record kinds.
Like the Kafka adapter's signal reader it keeps its partition paused and reads only when the
partition's end offset moved, because some brokers answer empty fetches at once (a spinning fetch
costs more CPU than the records).

This client's own record enters its view as soon as it is published (a client always knows what it
holds); the view counts as initialized once this client has published once and learnt the group's
members. Records are JSON: ``{"format": 1, "kind": "streams-metadata", ...}``.

Threads: one daemon thread, ``<client.id>-MetadataChannel``, owns the reader, the producer and the
record bookkeeping. ``members()`` (any thread) copies the view under ``_lock``, a leaf. ``snapshot``
runs on the channel thread: it reads the task manager and the state updater through their
thread-safe accessors and the main consumer's member id and generation, which both adapters
answer from any thread.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kstreams._native.record_batch import RecordBatch
from kstreams.cluster.port import Admin, ClusterError, Consumer, Producer, TopicPartition
from kstreams.queries import HostInfo

__all__ = ["LocalAssignment", "MemberMetadata", "MetadataChannel"]

logger = logging.getLogger(__name__)

_FORMAT = 1
KIND = "streams-metadata"
# How often the channel looks for changes of its own metadata and for new records.
CHECK_INTERVAL_S = 0.2
# How often it asks the group for its members when nothing new arrived.
MEMBERSHIP_REFRESH_S = 2.0
# Longest wait for the records up to an end offset it saw, per turn.
READ_TIMEOUT_S = 2.0
PUBLISH_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class LocalAssignment:
    """What this client holds now (the part of its metadata that changes)."""

    member_id: str
    generation: int
    active: frozenset[TopicPartition]
    standby: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One client's published metadata."""

    member_id: str
    process_id: str
    host: HostInfo | None
    generation: int
    active: frozenset[TopicPartition] = field(default_factory=frozenset)
    standby: frozenset[TopicPartition] = field(default_factory=frozenset)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "format": _FORMAT,
                "kind": KIND,
                "member": self.member_id,
                "process": self.process_id,
                "server": str(self.host) if self.host is not None else "",
                "generation": self.generation,
                "active": sorted([tp.topic, tp.partition] for tp in self.active),
                "standby": sorted([tp.topic, tp.partition] for tp in self.standby),
            }
        ).encode()

    @staticmethod
    def decode(value: bytes | None) -> MemberMetadata | None:
        """The metadata in a control-topic record, or None for another kind of record."""
        if not value:
            return None
        try:
            data = json.loads(value)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get("kind") != KIND:
            return None
        try:
            return MemberMetadata(
                str(data["member"]),
                str(data["process"]),
                HostInfo.parse(str(data.get("server", ""))),
                int(data["generation"]),
                frozenset(TopicPartition(str(t), int(p)) for t, p in data.get("active", [])),
                frozenset(TopicPartition(str(t), int(p)) for t, p in data.get("standby", [])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            logger.warning("Ignoring a malformed %s record on the control topic: %s", KIND, exc)
            return None


class MetadataChannel(threading.Thread):
    """Publishes this client's metadata and keeps the view of every live member (module docstring).

    ``snapshot`` returns what this client holds now (None before it joined the group).
    """

    def __init__(
        self,
        name: str,
        group_id: str,
        topic: str,
        process_id: str,
        host: HostInfo | None,
        admin: Admin,
        reader: Consumer,
        producer: Producer,
        snapshot: Callable[[], LocalAssignment | None],
        check_interval: float = CHECK_INTERVAL_S,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self._group_id = group_id
        self._tp = TopicPartition(topic, 0)
        self._process_id = process_id
        self._host = host
        self._admin = admin
        self._reader = reader
        self._producer = producer
        self._snapshot = snapshot
        self._check_interval = check_interval
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        # Guarded by _lock: the latest record per member id, this client's own, the live members.
        self._latest: dict[str, MemberMetadata] = {}
        self._own: MemberMetadata | None = None
        self._live: frozenset[str] | None = None
        self.version = 0  # bumped (under _lock) whenever the view changes
        # Channel thread only.
        self._next = 0
        self._last_refresh = 0.0
        self._failing = False

    # -- any thread ---------------------------------------------------------------------------

    def members(self) -> list[MemberMetadata] | None:
        """The latest metadata of every live member, this client's included, by member id; None
        until this client published once and learnt the group's members."""
        with self._lock:
            if self._own is None or self._live is None:
                return None
            view = {mid: m for mid, m in self._latest.items() if mid in self._live}
            view[self._own.member_id] = self._own
            return [view[mid] for mid in sorted(view)]

    def wake(self) -> None:
        """Look for changes now rather than at the next interval."""
        self._wake.set()

    def shutdown(self, timeout: float | None = 10.0) -> None:
        """Stop the thread and close its clients (idempotent)."""
        self._stopping.set()
        self._wake.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)

    # -- the thread ---------------------------------------------------------------------------

    def run(self) -> None:
        logger.info("Metadata channel %s started on %s", self.name, self._tp)
        try:
            while not self._stopping.is_set():
                try:
                    if not self._reading():
                        self._start_reading()
                    self._turn()
                    if self._failing:
                        logger.info("Metadata channel %s works again", self.name)
                        self._failing = False
                except ClusterError as exc:
                    # Metadata is advisory: keep the last view and try again. Said once per outage.
                    if not self._failing:
                        logger.warning("Metadata channel %s: %s; retrying", self.name, exc)
                    self._failing = True
                except Exception:
                    logger.exception("Metadata channel %s failed a turn; retrying", self.name)
                self._wake.wait(self._check_interval)
                self._wake.clear()
        finally:
            for client in (self._reader, self._producer):
                try:
                    client.close()
                except Exception:
                    logger.warning(
                        "Closing the metadata channel's %s failed", type(client).__name__, exc_info=True
                    )
            logger.info("Metadata channel %s stopped", self.name)

    def _reading(self) -> bool:
        return bool(self._reader.assignment())

    def _start_reading(self) -> None:
        start = self._admin.list_offsets([self._tp])[self._tp][0]
        self._reader.assign([self._tp])
        self._reader.seek(self._tp, start)
        self._reader.pause([self._tp])
        self._next = start

    def _turn(self) -> None:
        self._maybe_publish()
        read = self._read_new()
        now = time.monotonic()
        if read or self._live is None or now - self._last_refresh >= MEMBERSHIP_REFRESH_S:
            self._refresh_members()
            self._last_refresh = now

    def _maybe_publish(self) -> None:
        local = self._snapshot()
        if local is None or not local.member_id:
            return
        mine = MemberMetadata(
            local.member_id, self._process_id, self._host, local.generation, local.active, local.standby
        )
        if mine == self._own:
            return
        batch = RecordBatch.from_records(
            [(self._process_id.encode(), mine.encode(), int(time.time() * 1000), 0, -1, None)]
        )
        self._producer.send(self._tp.topic, 0, batch)
        self._producer.flush(PUBLISH_TIMEOUT_S)
        with self._lock:
            self._own = mine
            self.version += 1
        logger.info(
            "Published metadata of member %s (generation %d): %d active, %d standby partitions",
            mine.member_id,
            mine.generation,
            len(mine.active),
            len(mine.standby),
        )

    def _read_new(self) -> bool:
        """Read the records up to the current end offset; True if any metadata arrived."""
        end = self._admin.list_offsets([self._tp])[self._tp][1]
        if end <= self._next:
            return False
        arrived: dict[str, MemberMetadata] = {}
        self._reader.resume([self._tp])
        try:
            deadline = time.monotonic() + READ_TIMEOUT_S
            while self._next < end and time.monotonic() < deadline and not self._stopping.is_set():
                for _tp, batch in self._reader.poll(0.05):
                    for _key, value, _ts, _partition, offset, _headers in batch:
                        self._next = max(self._next, offset + 1)
                        found = MemberMetadata.decode(value)
                        if found is not None:
                            arrived[found.member_id] = found
                # Past control markers and deleted records, the position is ahead of the records.
                self._next = max(self._next, self._reader.position(self._tp))
        finally:
            self._reader.pause([self._tp])
        if arrived:
            with self._lock:
                self._latest.update(arrived)
                self.version += 1
        return bool(arrived)

    def _refresh_members(self) -> None:
        live = frozenset(self._admin.group_members(self._group_id))
        with self._lock:
            if live == self._live:
                return
            self._live = live
            # Members that left never come back under the same id: forget them.
            for gone in [mid for mid in self._latest if mid not in live]:
                del self._latest[gone]
            self.version += 1


def local_assignment(
    consumer: Consumer,
    active_partitions: Callable[[], Any],
    standby_partitions: Callable[[], Any],
) -> LocalAssignment | None:
    """What this client holds, from its main consumer's membership and its tasks (None before it
    joined the group)."""
    member = consumer.member_id
    if not member:
        return None
    return LocalAssignment(
        member, consumer.group_generation, frozenset(active_partitions()), frozenset(standby_partitions())
    )
