"""What a task's local state holds: its changelog offsets, and the checkpoint file that records them.

A ``TaskCheckpoint`` belongs to one task (active or standby) of one client, which holds the task
directory's lock (``StateDirectory``) for as long as the task lives. Offsets here are *next*
offsets: the changelog offset after the last record the local stores reflect, so restoration of a
persistent store resumes exactly there. In-memory stores lose everything on close, so only
changelogs of persistent stores are checkpointed and only those resume from a checkpoint; every
other store restores from the changelog's beginning.

The rules (Kafka's ``ProcessorStateManager``):

- ``open()`` runs before the task opens its stores. A task directory without a checkpoint file (or
  with a corrupt one) holds state nobody can vouch for, so it is wiped and restored from scratch.
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
from kstreams.state.checkpoint import OffsetCheckpoint
from kstreams.state.directory import StateDirectory

__all__ = ["TaskCheckpoint"]

logger = logging.getLogger(__name__)


class TaskCheckpoint:
    """Changelog offsets of one task's local state and the file they persist in."""

    def __init__(self, task_id: Any, directory: StateDirectory, exactly_once: bool) -> None:
        self.task_id = task_id
        self._directory = directory
        self._exactly_once = exactly_once
        self._file = OffsetCheckpoint(directory.checkpoint_path(task_id))
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
            self._loaded = self._file.read()
            found = bool(self._loaded) or os.path.exists(self._file.path)
        except ProcessorStateException as exc:
            logger.warning(
                "Task %s: %s Its local state is wiped and restored from the changelog.", self.task_id, exc
            )
            self._loaded = {}
            found = False
        if not found:
            if str(self.task_id) in self._directory.task_dirs():
                self._directory.wipe_task(self.task_id)
                self.wiped = True
                logger.info(
                    "Task %s has local state but no checkpoint: wiped it; the stores restore "
                    "from their changelogs' beginning",
                    self.task_id,
                )
        elif self._exactly_once and not keep_file:
            # While the task processes under exactly_once_v2, its stores may hold writes of the open
            # transaction: a crash must leave no checkpoint behind.
            self._file.delete()
        else:
            self._written = dict(self._loaded)

    def bind(self, changelogs: Mapping[TopicPartition, Any]) -> None:
        """Learn the task's changelog partitions and which of them back persistent stores."""
        self._changelogs = set(changelogs)
        self._persistent = {tp for tp, store in changelogs.items() if getattr(store, "persistent", False)}
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
