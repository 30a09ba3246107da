"""``StateRestoreListener``: the callbacks through which an application watches restoration.

Set one for a client with ``KafkaStreams.set_global_state_restore_listener``; the restore thread
(``state_updater``) calls it for every changelog partition of an active task that it restores.
Offsets are those of the changelog partition: restoration applies the records from the starting
offset up to (excluding) the ending offset, the partition's end when restoration began.
"""

from __future__ import annotations

import logging

from kstreams.cluster.port import TopicPartition

__all__ = ["StateRestoreListener"]

logger = logging.getLogger(__name__)


class StateRestoreListener:
    """Watches restoration of active tasks (Kafka's StateRestoreListener, snake_case). Override
    what you need; the callbacks run on the restore thread, and an exception fails the task's
    restoration."""

    def on_restore_start(
        self, topic_partition: TopicPartition, store_name: str, starting_offset: int, ending_offset: int
    ) -> None:
        """Restoration of one changelog partition begins: records from ``starting_offset`` up to
        (excluding) ``ending_offset`` are to be applied."""

    def on_batch_restored(
        self, topic_partition: TopicPartition, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        """A batch of ``num_restored`` records, the last at ``batch_end_offset``, was written to the store."""

    def on_restore_end(self, topic_partition: TopicPartition, store_name: str, total_restored: int) -> None:
        """The changelog partition is restored up to its end offset (``total_restored`` records)."""
