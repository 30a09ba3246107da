"""What a task's local state holds: its changelog offsets, and the checkpoint file that records them.

A ``TaskCheckpoint`` belongs to one task (active or standby) of one client, which holds the task
directory's lock (``StateDirectory``) for as long as the task lives. Offsets here are *next*
offsets: the changelog offset after the last record the local stores reflect, so restoration of a
persistent store resumes exactly there. The file holds Kafka's numbers, the offset of that last
record (``TaskOffsetCheckpoint`` converts), so Kafka Streams and kstreams read each other's.
In-memory stores lose everything on close, so only changelogs of persistent stores are
checkpointed and only those resume from a checkpoint; every other store restores from the
changelog's beginning.

The rules (Kafka's ``ProcessorStateUpdater``):

- ``open()`` runs before the task opens its stores. A task directory without a checkpoint file holds
  state nobody can vouch for, so it is wiped and restored from scratch. So is one whose checkpoint
  cannot be read (binary, truncated, bad numbers), and one whose checkpoint gives an offset for a
  persistent store whose files are gone: RocksDB would open that store empty, and restoration would
  resume at the checkpointed offset on top of nothing.
- When restoration begins, a checkpointed offset past its changelog's end (the changelog was
  recreated, or state.dir belongs to another cluster) means the local state holds records the
  changelog lost: the restore thread closes the stores, calls ``wipe()`` and restores from scratch.
- Under exactly_once_v2 the file is deleted as soon as it is read: while the task processes, its
  persistent stores receive writes of the open transaction, which an abort would not undo. A crash
  therefore leaves no checkpoint, and the next owner rebuilds the state from the committed
  changelog. The file is written again only on a clean close, after the final commit.
- Under at_least_once the file is written after every successful commit and on a clean close.
- Standby tasks apply only what the changelog holds, so their file may be written at any time.

Threads: a task's checkpoint is used by whichever thread owns the task at the moment (the polling
thread, or the restore thread while it restores or updates the task), never by two at once.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from kstreams.cluster.port import TopicPartition
from kstreams.errors import ProcessorStateException
from kstreams.state.checkpoint import TaskOffsetCheckpoint
from kstreams.state.directory import StateDirectory
from kstreams.topology.builder import changelog_store_name

__all__ = ["TaskCheckpoint"]

logger = logging.getLogger(__name__)


class TaskCheckpoint:
    """Changelog offsets of one task's local state and the file they persist in."""

    def __init__(self, task_id: Any, directory: StateDirectory, exactly_once: bool) -> None:
        self.task_id = task_id
        self._directory = directory
        self._exactly_once = exactly_once
        self._file = TaskOffsetCheckpoint(directory.checkpoint_path(task_id))
        self._loaded: dict[TopicPartition, int] = {}
        # Changelog partitions of persistent stores: the only ones checkpointed.
        self._persistent: set[TopicPartition] = set()
        self._changelogs: set[TopicPartition] = set()
        # Next changelog offset the local stores reflect, per changelog partition.
        self.offsets: dict[TopicPartition, int] = {}
        self._written: dict[TopicPartition, int] | None = None  # what the file holds, if known
        self.wiped = False

    def open(self, keep_file: bool = False) -> None:
        """Load the checkpoint before the stores open; wipe state that no checkpoint vouches for.

        The caller holds the task directory's lock. ``keep_file`` (standby tasks) keeps the file
        even under exactly_once_v2, because a standby never holds uncommitted writes.
        """
        try:
            loaded = self._file.read()
        except ProcessorStateException as exc:
            logger.warning("Task %s: %s", self.task_id, exc)
            self.wipe()
            return
        missing = self._stores_without_files(loaded)
        if missing:
            logger.warning(
                "Task %s: its checkpoint has changelog offsets for store(s) %s, whose files are "
                "missing. The task's local state is wiped and restored from the changelogs' beginning.",
                self.task_id,
                ", ".join(missing),
            )
            self.wipe()
            return
        found = bool(loaded) or os.path.exists(self._file.path)
        if not found:
            if str(self.task_id) in self._directory.task_dirs():
                self.wipe()
                logger.info(
                    "Task %s has local state but no checkpoint: wiped it; the stores restore "
                    "from their changelogs' beginning",
                    self.task_id,
                )
            return
        self._loaded = loaded
        if self._exactly_once and not keep_file:
            # While the task processes under exactly_once_v2, its stores may hold writes of the open
            # transaction: a crash must leave no checkpoint behind.
            self._file.delete()
        else:
            self._written = dict(loaded)

    def _stores_without_files(self, loaded: Mapping[TopicPartition, int]) -> list[str]:
        """Stores the checkpoint gives a positive offset for, yet without files. Only persistent
        stores are checkpointed, and each keeps its files in ``<task>/rocksdb/<store>/``
        (``StateDirectory.has_store_files``)."""
        missing = []
        for tp, offset in sorted(loaded.items()):
            store = changelog_store_name(self._directory.application_id, tp.topic)
            # Offset 0 restores from the beginning anyway: an empty store is what it should be.
            if store is not None and offset > 0 and not self._directory.has_store_files(self.task_id, store):
                missing.append(store)
        return missing

    def wipe(self) -> None:
        """Delete the task's local state and this checkpoint: every store restores from its
        changelog's beginning. The caller holds the task directory's lock, and the task's stores
        are closed (or not opened yet)."""
        self._directory.wipe_task(self.task_id)
        self._loaded = {}
        self.offsets = {}
        self._written = None
        self.wiped = True

    def bind(self, changelogs: Mapping[TopicPartition, Any]) -> None:
        """Learn the task's changelog partitions and which of them back persistent stores."""
        self._changelogs = set(changelogs)
        self._persistent = {tp for tp, store in changelogs.items() if store.persistent}
        self.offsets = {tp: self._loaded[tp] for tp in self._persistent if tp in self._loaded}

    def restore_start(self, tp: TopicPartition) -> int:
        """Where restoration of a changelog partition starts: where the open stores end (the
        checkpointed offset of a persistent store just opened, a standby's position when it is
        recycled), else 0, the beginning."""
        return self.offsets.get(tp, 0)

    def advance(self, offsets: Mapping[TopicPartition, int]) -> None:
        """The local stores now reflect the changelogs up to these (next) offsets."""
        for tp, offset in offsets.items():
            if tp in self._changelogs and offset >= 0:
                self.offsets[tp] = offset

    @property
    def has_persistent_stores(self) -> bool:
        return bool(self._persistent)

    def write(self) -> None:
        """Persist the offsets of the persistent stores' changelogs (no file when there are none)."""
        if not self._persistent:
            return
        offsets = {tp: o for tp, o in self.offsets.items() if tp in self._persistent}
        if offsets == self._written:
            return  # unchanged since the last write: spare the fsync
        self._file.write(offsets)
        self._written = offsets

    def delete(self) -> None:
        """Remove the file: the local state is no longer vouched for."""
        self._file.delete()
        self._written = None

    @property
    def exactly_once(self) -> bool:
        return self._exactly_once
