"""RocksDB-backed stores (rocksdict, raw bytes): one database per key-value store.

``RocksDBDatabase`` is one open RocksDB database whose writes are combined in memory and written
as one WriteBatch at ``flush()`` (also before a range scan, and whenever the buffer grows past
``_MAX_PENDING`` entries, so it stays small). Point reads see buffered writes first. Range scans
read the database in chunks through short-lived iterators: a rocksdict iterator keeps its database
open, so an abandoned Python iterator must never hold one, or the store could not be reopened.

``RocksDBKeyValueStore`` lives under ``<task state dir>/rocksdb/<store name>`` and survives
restarts; the task's checkpoint file says up to which changelog offset it is current.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rocksdict import BlockBasedOptions, Cache, DBCompressionType, Options, Rdict, WriteBatch

from kstreams._native.store_core import BufferedDatabase, DatabaseStore
from kstreams.errors import ProcessorStateException
from kstreams.state.directory import STORES_DIR_NAME
from kstreams.state.rocksdb_config_setter import config_setter
from kstreams.state.store import KeyValueStore, StateStore, StateStoreContext

__all__ = ["RocksDBDatabase", "RocksDBKeyValueStore", "rocksdb_path"]

logger = logging.getLogger(__name__)

# Buffered writes beyond this many are written early (bounds memory and the cost of a flush).
_MAX_PENDING = 10_000
# Entries read per iterator before it is dropped and the scan re-seeks: a scan's first iterator
# reads few (most scans are of one key's windows or sessions, a handful of entries; reading past
# the range's end is wasted), each next one four times as many, up to the most.
_FIRST_SCAN_CHUNK = 16
_SCAN_CHUNK = 512
# Kafka Streams' BLOCK_CACHE_SIZE (RocksDBStore): one cache per store, filled as blocks are read.
_BLOCK_CACHE_BYTES = 50 * 1024 * 1024


def rocksdb_path(context: StateStoreContext, store_name: str) -> str:
    """Where a persistent store's files live: ``<task state dir>/rocksdb/<store name>``."""
    return os.path.join(context.state_dir(), STORES_DIR_NAME, store_name)


def _options() -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    # Kafka Streams' defaults: no compression (CPU matters more than disk for local state), and
    # modest memtables since many stores share a machine.
    options.set_compression_type(DBCompressionType.none())
    options.set_write_buffer_size(16 * 1024 * 1024)
    options.set_max_write_buffer_number(3)
    # Kafka Streams' table format too: a 50 MB block cache per store, 4 KB blocks and a bloom
    # filter (10 bits per key), so a point read of a key skips the files that cannot hold it
    # (bench/e2e_large_state.py, a million keys: 20.2 -> 18.4 CPU us per record).
    table = BlockBasedOptions()
    table.set_block_cache(Cache(_BLOCK_CACHE_BYTES))
    table.set_block_size(4096)
    table.set_bloom_filter(10, False)
    options.set_block_based_table_factory(table)
    # A bloom filter over the memtables as well: a read of a key not written since the last flush
    # (most reads, once the keys outnumber a memtable) answers without walking three skiplists.
    options.set_memtable_prefix_bloom_ratio(0.1)
    options.set_memtable_whole_key_filtering(True)
    # Every open rolls RocksDB's info LOG; keep only a few so restarts do not pile them up.
    options.set_keep_log_file_num(2)
    return options


class RocksDBDatabase(BufferedDatabase):
    """One open RocksDB database with buffered writes. Keys and values are bytes. Point reads and
    writes (``get``, ``put``) are C (``BufferedDatabase``).

    Raises ProcessorStateException (naming the store and path) when RocksDB fails.
    """

    def __init__(
        self,
        store_name: str,
        path: str,
        configs: Mapping[str, Any] | None = None,
        database_name: str | None = None,
    ) -> None:
        """Open (creating if missing) the database at ``path``. ``configs``, the application's, may
        name a ``rocksdb.config.setter``, which changes the options first; it sees the database
        as ``database_name`` (a segment's: ``<store>.<segment start>``; default ``store_name``)."""
        super().__init__(_MAX_PENDING)
        self.store_name = store_name
        self.path = path
        os.makedirs(path, exist_ok=True)
        self._database_name = database_name or store_name
        self._options = _options()
        self._setter = config_setter(configs)
        if self._setter is not None:
            assert configs is not None
            self._setter.set_config(self._database_name, self._options, configs)
        try:
            self._db = Rdict(path, options=self._options)
        except Exception as exc:
            self._close_setter()
            raise ProcessorStateException(
                f"Could not open RocksDB for store {store_name} at {path}: {exc}. Another process (or an "
                "unclosed store in this one) may hold it; close it, or remove the directory if it is corrupt."
            ) from exc

    @property
    def is_open(self) -> bool:
        return self._db is not None

    @property
    def buffered_writes(self) -> int:
        """How many writes wait for the next WriteBatch."""
        return len(self._pending)

    def _database(self) -> Rdict:
        db = self._db
        if db is None:
            raise ProcessorStateException(
                f"RocksDB store {self.store_name} at {self.path} is closed; it cannot be read or written."
            )
        return db

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        """``get`` of each key."""
        pending = self._pending
        get = self._database().get
        return [pending[key] if key in pending else get(key) for key in keys]

    def put_many(self, records: Iterable[tuple[bytes, bytes | None]] | Mapping[bytes, bytes | None]) -> None:
        """``put`` of each record, in order (a mapping: of each of its items)."""
        pending = self._pending
        pending.update(records)
        if len(pending) > self.max_pending:
            self.write_pending()

    def write_batch(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Write records as one batch at once (restoration)."""
        self._pending.update(records)
        self.write_pending()

    def write_pending(self) -> None:
        """Write every buffered write to RocksDB in one WriteBatch."""
        pending = self._pending
        if not pending:
            return
        batch = WriteBatch(raw_mode=True)
        # In key order: RocksDB's memtable skiplist starts each insert where the previous one
        # ended, so sorted keys insert next to each other instead of each searching from the top
        # (a batch holds each key once, so the order changes nothing it writes).
        for key in sorted(pending):  # the keys alone: half the time of sorting the items
            value = pending[key]
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        try:
            self._database().write(batch)
        except ProcessorStateException:
            raise
        except Exception as exc:
            raise ProcessorStateException(
                f"Writing a batch of {len(pending)} records to RocksDB store {self.store_name} at "
                f"{self.path} failed: {exc}. Check free disk space and the directory's permissions."
            ) from exc
        pending.clear()

    def scan(
        self, lo: bytes | None, hi: bytes | None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Entries with lo <= key <= hi (None: unbounded), ascending or descending; lazily read.

        Buffered writes are written first, so the scan sees every write made before it started.
        """
        if lo is not None and hi is not None and lo > hi:
            return iter(())
        self.write_pending()
        return self._scan_chunks(lo, hi, reverse)

    def _scan_chunks(
        self, lo: bytes | None, hi: bytes | None, reverse: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        position = hi if reverse else lo
        skip: bytes | None = None
        size = _FIRST_SCAN_CHUNK
        while True:
            db = self._db
            if db is None:
                return
            items = db.items(backwards=reverse, from_key=position)
            chunk: list[tuple[bytes, bytes]] = list(itertools.islice(items, size))  # type: ignore[arg-type]
            del items  # the iterator pins the database: drop it before yielding to the caller
            for key, value in chunk:
                if reverse:
                    if key == skip:
                        continue
                    if lo is not None and key < lo:
                        return
                elif hi is not None and key > hi:
                    return
                yield key, value
            if len(chunk) < size:
                return
            size = min(size * 4, _SCAN_CHUNK)
            last = chunk[-1][0]
            if reverse:
                # A backward seek lands on ``last`` itself (seek_for_prev): skip it once.
                position = skip = last
            else:
                position = last + b"\x00"  # the smallest key after ``last``

    def approximate_num_entries(self) -> int:
        self.write_pending()
        try:
            return int(self._database().property_int_value("rocksdb.estimate-num-keys") or 0)
        except ProcessorStateException:
            raise
        except Exception as exc:
            raise ProcessorStateException(
                f"Could not read the entry estimate of RocksDB store {self.store_name}: {exc}"
            ) from exc

    def close(self) -> None:
        """Write buffered writes and release the database (its files and lock)."""
        if self._db is None:
            return
        try:
            self.write_pending()
        finally:
            db, self._db = self._db, None
            db.close()
            self._close_setter()

    def destroy(self) -> None:
        """Close without writing buffered writes and delete the database's files."""
        self._pending.clear()
        db, self._db = self._db, None
        if db is not None:
            db.close()
            del db
            self._close_setter()
        shutil.rmtree(self.path, ignore_errors=True)

    def _close_setter(self) -> None:
        setter, self._setter = self._setter, None
        close = getattr(setter, "close", None)  # optional for a class that does not subclass
        if close is not None:
            close(self._database_name, self._options)


class RocksDBKeyValueStore(DatabaseStore, KeyValueStore[bytes, bytes]):
    """A persistent key-value store in one RocksDB database; ranges in key byte order. ``get`` and
    ``put`` are C (``DatabaseStore``)."""

    _db: RocksDBDatabase | None

    def __init__(self, name: str) -> None:
        self._name = name
        self._db = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def persistent(self) -> bool:
        return True

    @property
    def is_open(self) -> bool:
        return self._db is not None and self._db.is_open

    @property
    def path(self) -> str | None:
        return self._db.path if self._db is not None else None

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._db = RocksDBDatabase(self._name, rocksdb_path(context, self._name), context.app_configs)
        context.register(root, self.restore_batch)
        logger.debug("Opened RocksDB store %s at %s", self._name, self._db.path)

    def _database(self) -> RocksDBDatabase:
        db = self._db
        if db is None:
            raise ProcessorStateException(f"RocksDB store {self._name} is not open; init() it first.")
        return db

    def restore_batch(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Apply changelog records in one WriteBatch (a None value deletes the key)."""
        self._database().write_batch(records)

    def flush(self) -> None:
        if self._db is not None:
            self._db.write_pending()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    def get_many(self, keys: list[bytes]) -> list[bytes | None]:
        return self._database().get_many(keys)

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        db = self._database()
        existing = db.get(key)
        if existing is None:
            db.put(key, value)
        return existing

    def put_all(self, entries: list[tuple[bytes, bytes | None]]) -> None:
        self._database().put_many(entries)

    def delete(self, key: bytes) -> bytes | None:
        db = self._database()
        old = db.get(key)
        if old is not None:
            db.put(key, None)
        return old

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self._range(from_key, to_key, reverse=False)

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self._range(from_key, to_key, reverse=True)

    def _range(
        self, from_key: bytes | None, to_key: bytes | None, reverse: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        if from_key is not None and to_key is not None and from_key > to_key:
            logger.warning(
                "Returning an empty range from store %s: the range's first key is larger than its "
                "last key, which is never valid (check the order of the range's bounds).",
                self._name,
            )
            return iter(())
        return self._database().scan(from_key, to_key, reverse)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._database().scan(None, None)

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        for key, value in self._database().scan(prefix, None):
            if not key.startswith(prefix):
                return
            yield key, value

    def approximate_num_entries(self) -> int:
        return self._database().approximate_num_entries()
