"""StateDirectory: per-task directories and locks that keep two clients off one task's state."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kstreams.errors import LockException
from kstreams.processor import TaskId
from kstreams.state.directory import StateDirectory


def test_task_dir_is_under_state_dir_and_application_id(tmp_path: Path) -> None:
    directory = StateDirectory(str(tmp_path), "app")
    path = directory.task_dir(TaskId(1, 3))
    assert path == os.path.join(tmp_path, "app", "1_3")
    assert os.path.isdir(path)
    assert directory.checkpoint_path("1_3") == os.path.join(path, ".checkpoint")


def test_a_task_lock_is_exclusive_across_two_state_directories(tmp_path: Path) -> None:
    first = StateDirectory(str(tmp_path), "app")
    second = StateDirectory(str(tmp_path), "app")
    first.lock("0_1")
    first.lock("0_1")  # holding it already is fine
    with pytest.raises(LockException, match=r"0_1.*locked by another client") as info:
        second.lock("0_1")
    assert info.value.task_id == "0_1"
    assert not second.try_lock("0_1")
    second.lock("0_2")  # other tasks are unaffected
    first.unlock("0_1")
    assert second.try_lock("0_1")
    assert second.is_locked("0_1") and not first.is_locked("0_1")
    second.close()
    assert first.try_lock("0_1") and first.try_lock("0_2")
    first.close()


def test_clean_unlocked_deletes_only_old_unlocked_task_dirs(tmp_path: Path) -> None:
    directory = StateDirectory(str(tmp_path), "app")
    other = StateDirectory(str(tmp_path), "app")
    for task in ("0_0", "0_1", "0_2"):
        path = directory.task_dir(task)
        Path(path, "data").write_text("x")
        old = time.time() - 3600
        os.utime(os.path.join(path, "data"), (old, old))
        os.utime(path, (old, old))
    directory.lock("0_0")
    other.lock("0_1")
    assert directory.clean_unlocked(older_than_ms=60_000) == ["0_2"]
    assert not os.path.exists(os.path.join(tmp_path, "app", "0_2"))
    assert os.path.exists(os.path.join(tmp_path, "app", "0_1", "data"))
    Path(directory.task_dir("0_3"), "data").write_text("fresh")
    os.makedirs(os.path.join(tmp_path, "app", "global"))  # not a task directory: never touched
    assert directory.clean_unlocked(older_than_ms=60_000) == []
    assert os.path.isdir(os.path.join(tmp_path, "app", "global"))
    directory.close()
    other.close()


def test_wipe_task_needs_the_lock_and_keeps_the_directory(tmp_path: Path) -> None:
    directory = StateDirectory(str(tmp_path), "app")
    path = directory.task_dir("0_0")
    os.makedirs(os.path.join(path, "rocksdb", "store"))
    Path(path, ".checkpoint").write_text("0\n0\n")
    with pytest.raises(LockException):
        directory.wipe_task("0_0")
    directory.lock("0_0")
    assert directory.task_dirs() == ["0_0"]
    directory.wipe_task("0_0")
    assert os.listdir(path) == [".lock"]
    assert directory.task_dirs() == []
    directory.close()


def test_a_store_has_files_only_when_its_directory_holds_something(tmp_path: Path) -> None:
    directory = StateDirectory(str(tmp_path), "app")
    store_dir = Path(directory.task_dir("0_0"), "rocksdb", "counts")
    assert not directory.has_store_files("0_0", "counts")
    store_dir.mkdir(parents=True)
    assert not directory.has_store_files("0_0", "counts")  # RocksDB would open it empty
    (store_dir / "CURRENT").write_text("MANIFEST-000001\n")
    assert directory.has_store_files("0_0", "counts")
    assert not directory.has_store_files("0_1", "counts")


def test_process_id_survives_a_restart(tmp_path: Path) -> None:
    first = StateDirectory(str(tmp_path), "app").process_id()
    assert StateDirectory(str(tmp_path), "app").process_id() == first
    assert StateDirectory(str(tmp_path), "other").process_id() != first


def test_a_task_locked_here_cannot_be_locked_by_another_process(tmp_path: Path) -> None:
    directory = StateDirectory(str(tmp_path), "app")
    directory.lock("0_0")
    probe = (
        "import sys; from kstreams.state.directory import StateDirectory; "
        f"sys.exit(0 if StateDirectory({str(tmp_path)!r}, 'app').try_lock('0_0') else 3)"
    )
    assert subprocess.run([sys.executable, "-c", probe], timeout=60).returncode == 3
    directory.unlock("0_0")
    assert subprocess.run([sys.executable, "-c", probe], timeout=60).returncode == 0


def test_a_claimed_process_id_is_one_live_clients_until_released(tmp_path: Path) -> None:
    import os

    kept = StateDirectory(str(tmp_path), "app").process_id()
    first, lock = StateDirectory(str(tmp_path), "app").claim_process_id()
    assert first == kept and lock is not None
    # A second live client would fence the first under one transactional.id: it gets a fresh id.
    second, no_lock = StateDirectory(str(tmp_path), "app").claim_process_id()
    assert second != kept and no_lock is None
    os.close(lock)
    again, lock = StateDirectory(str(tmp_path), "app").claim_process_id()
    assert again == kept
    assert lock is not None
    os.close(lock)
