"""GlobalStateTask: the task of a global subtopology (a global table's or ``add_global_store``'s
source and update processor), run by the runtime's global stream thread and by the test driver.

It is a ``StreamTask`` whose stores live in ``<state.dir>/<application.id>/global`` (Kafka's
directory for global stores) instead of a task directory: a global store is one per client, not
one per partition.
"""

from __future__ import annotations

import os

from kstreams.processing.task import StreamTask

__all__ = ["GLOBAL_STATE_DIR", "GlobalStateTask"]

GLOBAL_STATE_DIR = "global"  # under <state.dir>/<application.id>, as Kafka's


class GlobalStateTask(StreamTask):
    """A global subtopology's task: its stores live in ``<state.dir>/<application.id>/global``."""

    def task_state_dir(self) -> str:
        path = os.path.join(self._state_root, GLOBAL_STATE_DIR)
        os.makedirs(path, exist_ok=True)
        return path
