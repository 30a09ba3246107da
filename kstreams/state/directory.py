"""``StateDirectory``: where a client keeps its tasks' local state, and who may open it.

Layout: ``<state.dir>/<application.id>/<task id>/`` per task (each persistent store's files in
``rocksdb/<store>/``, the ``.checkpoint`` file beside ``rocksdb/``), plus
``kafka-streams-process-metadata`` holding the client's process id so it survives restarts.

A task's directory is guarded by an exclusive, non-blocking ``flock`` on its ``.lock`` file, so two
clients (in one process or several) never open one task's state at once. The lock belongs to this
``StateDirectory`` object, not to a thread: tasks move between stream threads freely. ``_mutex``
guards the map of held locks; it is a leaf lock (nothing else is taken while holding it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from typing import Any

from kstreams.errors import LockException, ProcessorStateException

__all__ = ["CHECKPOINT_FILE_NAME", "LOCK_FILE_NAME", "STORES_DIR_NAME", "StateDirectory"]

logger = logging.getLogger(__name__)

LOCK_FILE_NAME = ".lock"
CHECKPOINT_FILE_NAME = ".checkpoint"
STORES_DIR_NAME = "rocksdb"
_PROCESS_LOCK_FILE_NAME = ".process.lock"
_PROCESS_FILE_NAME = "kafka-streams-process-metadata"
_TASK_DIR = re.compile(r"\d+_\d+")


class StateDirectory:
    """The state directories of one client's tasks, and the locks that make them exclusive."""

    def __init__(self, state_dir: str, application_id: str) -> None:
        self.application_id = application_id
        self._application_dir = os.path.join(state_dir, application_id)
        self._mutex = threading.Lock()
        self._held: dict[str, int] = {}  # task id -> file descriptor of its locked .lock file

    @property
    def application_dir(self) -> str:
        """``<state.dir>/<application.id>`` (created on first call)."""
        self._makedirs(self._application_dir)
        return self._application_dir

    def _makedirs(self, path: str) -> None:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise ProcessorStateException(
                f"Could not create the state directory {path}: {exc}. Set state.dir to a directory this "
                "process can create and write."
            ) from exc

    def task_dir(self, task_id: Any) -> str:
        """The directory of one task (created on first call)."""
        path = os.path.join(self._application_dir, str(task_id))
        self._makedirs(path)
        return path

    def checkpoint_path(self, task_id: Any) -> str:
        """The task's offset checkpoint file (see ``checkpoint.OffsetCheckpoint``)."""
        return os.path.join(self.task_dir(task_id), CHECKPOINT_FILE_NAME)

    def has_store_files(self, task_id: Any, store_name: str) -> bool:
        """Whether a persistent store of the task has files in ``<task>/rocksdb/<store>/``. An empty
        or missing directory means the store holds nothing: RocksDB would open it empty."""
        path = os.path.join(self._application_dir, str(task_id), STORES_DIR_NAME, store_name)
        try:
            with os.scandir(path) as entries:
                return any(True for _ in entries)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def lock(self, task_id: Any) -> None:
        """Take the exclusive lock of a task's directory; holding it already is fine.

        Raises LockException when another client (or another StateDirectory) holds it.
        """
        key = str(task_id)
        with self._mutex:
            if key in self._held:
                return
            directory = self.task_dir(key)
            fd = self._try_flock(os.path.join(directory, LOCK_FILE_NAME))
            if fd is None:
                raise LockException(
                    f"The state directory {directory} of task {key} is locked by another client. Each client "
                    "needs its own state.dir, or the other client must close first; the task will be "
                    "retried.",
                    task_id=task_id,
                )
            self._held[key] = fd
        logger.debug("Locked the state directory of task %s", key)

    def try_lock(self, task_id: Any) -> bool:
        """Like ``lock``, returning False instead of raising when another client holds it."""
        try:
            self.lock(task_id)
        except LockException:
            return False
        return True

    def is_locked(self, task_id: Any) -> bool:
        """Whether this object holds the task's lock."""
        with self._mutex:
            return str(task_id) in self._held

    def unlock(self, task_id: Any) -> None:
        """Release a task's lock (nothing happens when this object does not hold it)."""
        with self._mutex:
            fd = self._held.pop(str(task_id), None)
        if fd is not None:
            self._release(fd)
            logger.debug("Unlocked the state directory of task %s", task_id)

    def close(self) -> None:
        """Release every lock this object holds."""
        with self._mutex:
            held = list(self._held.values())
            self._held.clear()
        for fd in held:
            self._release(fd)

    def wipe_task(self, task_id: Any) -> None:
        """Delete a task's local state (stores and checkpoint); the caller must hold its lock.

        Used when the state cannot be trusted (see ``kstreams.runtime.tasks.checkpoints``): it is rebuilt from
        the changelog. Raises ProcessorStateException naming the directory when deleting fails.
        """
        key = str(task_id)
        path = os.path.join(self._application_dir, key)
        if not self.is_locked(key):
            raise LockException(
                f"Cannot wipe the state of task {key}: this client does not hold the lock of {path}; lock "
                "the task first.",
                task_id=task_id,
            )
        try:
            self._delete_contents(path)
        except OSError as exc:
            raise ProcessorStateException(
                f"Could not wipe the state of task {key} in {path}: {exc}. Check the permissions of "
                "state.dir, or delete the directory by hand while the application is stopped.",
                task_id=task_id,
            ) from exc
        logger.info("Wiped the local state of task %s", key)

    def task_dirs(self) -> list[str]:
        """Task ids that have a directory holding state (more than a lock file)."""
        result = []
        for entry in self._task_entries():
            path = os.path.join(self._application_dir, entry)
            with contextlib.suppress(FileNotFoundError):
                if any(name != LOCK_FILE_NAME for name in os.listdir(path)):
                    result.append(entry)
        return result

    def clean_unlocked(self, older_than_ms: int) -> list[str]:
        """Delete the directories of tasks no client holds and nobody touched for ``older_than_ms``
        (``state.cleanup.delay.ms``); return the task ids deleted."""
        cutoff = time.time() - older_than_ms / 1000.0
        removed = []
        for entry in self._task_entries():
            path = os.path.join(self._application_dir, entry)
            # Holding the mutex makes a concurrent lock() of this task wait for the cleaning
            # instead of failing on the cleaner's file lock.
            with self._mutex:
                if entry in self._held or self._last_modified(path) > cutoff:
                    continue
                fd = self._try_flock(os.path.join(path, LOCK_FILE_NAME))
                if fd is None:
                    continue  # another client holds it
                try:
                    self._delete_contents(path)
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(path, LOCK_FILE_NAME))
                        os.rmdir(path)
                finally:
                    self._release(fd)
            removed.append(entry)
            logger.info("Deleted the obsolete state directory %s of task %s", path, entry)
        return removed

    def clean(self, keep_process_id: bool) -> list[str]:
        """Delete the application's local state directory (``KafkaStreams.clean_up``); return
        what was deleted, relative to it.

        Nothing is deleted while another client holds a task directory's lock, or the process id
        lock (a client that uses this directory is alive): LockException names the directory.
        Every task lock is taken first and held until the end, so no client opens a task half-way
        through. With ``keep_process_id`` (the caller holds the process id lock) the process id
        files stay, so a restart keeps the process id; otherwise the directory itself goes too.
        Raises ProcessorStateException naming the path when deleting fails.
        """
        directory = self._application_dir
        if not os.path.isdir(directory):
            return []
        taken: list[int] = []
        removed: list[str] = []
        kept = {_PROCESS_FILE_NAME, _PROCESS_LOCK_FILE_NAME} if keep_process_id else set()
        with self._mutex:
            try:
                if not keep_process_id:
                    fd = self._try_flock(os.path.join(directory, _PROCESS_LOCK_FILE_NAME))
                    if fd is None:
                        raise LockException(
                            f"Cannot clean up the state directory {directory}: another running client of "
                            f"application {self.application_id!r} uses it. Close that client first."
                        )
                    taken.append(fd)
                for entry in self._task_entries():
                    if entry in self._held:
                        continue
                    fd = self._try_flock(os.path.join(directory, entry, LOCK_FILE_NAME))
                    if fd is None:
                        raise LockException(
                            f"Cannot clean up the state directory {directory}: task {entry} is locked by "
                            "another running client. Close that client first.",
                            task_id=entry,
                        )
                    taken.append(fd)
                removed = sorted(name for name in os.listdir(directory) if name not in kept)
                for name in removed:
                    target = os.path.join(directory, name)
                    if os.path.isdir(target) and not os.path.islink(target):
                        shutil.rmtree(target)
                    else:
                        os.unlink(target)
                if not keep_process_id:
                    os.rmdir(directory)
            except OSError as exc:
                raise ProcessorStateException(
                    f"Could not clean up the state directory {directory}: {exc}. Check the permissions of "
                    "state.dir, or delete the directory by hand while the application is stopped."
                ) from exc
            finally:
                for fd in taken:
                    self._release(fd)
        logger.info("Cleaned up the local state directory %s (%d entries)", directory, len(removed))
        return removed

    def _task_entries(self) -> list[str]:
        """Names of the task directories (``<subtopology>_<partition>``) in the application directory."""
        try:
            entries = sorted(os.listdir(self._application_dir))
        except FileNotFoundError:
            return []
        return [
            entry
            for entry in entries
            if _TASK_DIR.fullmatch(entry) and os.path.isdir(os.path.join(self._application_dir, entry))
        ]

    def process_id(self) -> uuid.UUID:
        """The client's process id, kept in the application directory so a restart keeps it."""
        path = os.path.join(self.application_dir, _PROCESS_FILE_NAME)
        try:
            with open(path, encoding="utf-8") as file:
                return uuid.UUID(json.load(file)["processId"])
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("Replacing the unreadable process id file %s: %s", path, exc)
        process_id = uuid.uuid4()
        temp = path + ".tmp"
        with open(temp, "w", encoding="utf-8") as file:
            json.dump({"processId": str(process_id), "version": 0}, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
        return process_id

    def claim_process_id(self) -> tuple[uuid.UUID, int | None]:
        """The process id kept here, as Kafka Streams keeps it (KAFKA-10716), with the file lock
        that makes it this client's (release it with ``os.close``); or a fresh id and None when
        another live client, in this process or another, holds it.

        A restarted process thereby keeps its exactly_once_v2 transactional.id, so initializing
        transactions under it fences a crashed predecessor and aborts the transaction it left open
        (with a fresh id, read_committed readers would wait for the broker to time that transaction
        out, which some brokers never do). Two live clients under one id would fence each other.

        Raises ProcessorStateException naming the directory and the OS error when the application
        directory cannot be created or written: every task's state would fail there too.
        """
        directory = self.application_dir
        try:
            if not os.access(directory, os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, "not writable by this process", directory)
            fd = self._try_flock(os.path.join(directory, _PROCESS_LOCK_FILE_NAME))
            if fd is None:
                logger.info("Another client uses the process id in %s; using a fresh one", directory)
                return uuid.uuid4(), None
            try:
                return self.process_id(), fd
            except BaseException:
                os.close(fd)
                raise
        except OSError as exc:
            raise ProcessorStateException(
                f"Could not keep the process id in the state directory {directory}: {exc}. Set state.dir "
                "to a directory this process can create and write."
            ) from exc

    @staticmethod
    def _try_flock(path: str) -> int | None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError:
            os.close(fd)
            raise
        return fd

    @staticmethod
    def _release(fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @staticmethod
    def _last_modified(path: str) -> float:
        latest = os.path.getmtime(path)
        for name in os.listdir(path):
            if name != LOCK_FILE_NAME:
                with contextlib.suppress(OSError):
                    latest = max(latest, os.path.getmtime(os.path.join(path, name)))
        return latest

    @staticmethod
    def _delete_contents(path: str) -> None:
        for name in os.listdir(path):
            if name == LOCK_FILE_NAME:
                continue
            target = os.path.join(path, name)
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            else:
                os.unlink(target)
