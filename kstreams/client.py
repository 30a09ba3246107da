"""KafkaStreams: the client that runs a topology — lifecycle, state machine, threads, handlers.

One client runs one polling thread (the only user of the main consumer and the producer), N stream
threads that pick tasks dynamically, and one restore thread. Stream threads can be added and
removed while the client runs (KIP-663): because tasks are not pinned to threads, this needs no
rebalance and moves no partitions — only the record cache is redistributed. An exception in any of
the client's threads goes to the uncaught exception handler (KIP-671).

Why one module over ~600 lines: it is Kafka's ``KafkaStreams`` surface, method for method in snake
case, each with the docstring users read; the runtime it drives is built elsewhere
(``runtime/client_parts.py`` and ``runtime/streams_runtime.py``).

Locks, in the order they may be taken (never the other way round):
1. ``KafkaStreams._runtime_lock`` (RLock): held by ``start()`` while it builds and starts the runtime
   and by the close thread while it stops it, so a close never runs half-way through a start.
2. ``KafkaStreams._state_lock`` (the state machine's condition), held only to read or change the
   state; state listeners are called with no lock held.
3. ``StreamThreads.lock`` (RLock, in the runtime): the stream thread list. Held only to read or
   change the list, never while waiting for another thread: adding or removing a thread resizes
   the caches on the polling thread *after* releasing it, because the polling thread takes it to
   apply REPLACE_THREAD.
4. The task manager's lock, then the compiled structures' leaf mutexes.
``KafkaStreams._sensors_lock`` (the per-task sensors) is a leaf that stream threads take while
holding a task.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

from kstreams.cluster.port import ERROR_SHUTDOWN_REQUESTED, Cluster, Consumer, Producer
from kstreams.config import StreamsConfig
from kstreams.errors import (
    IllegalStateException,
    InvalidStateStoreException,
    UnknownStateStoreException,
)
from kstreams.init_parameters import InitParameters
from kstreams.metrics import MetricName, Sensor
from kstreams.queries import (
    HostInfo,
    KeyQueryMetadata,
    QueryableStoreTypes,
    StoreQueryParameters,
    StreamsMetadata,
)
from kstreams.runtime.client_parts import build_client_parts
from kstreams.runtime.client_state import State, check_transition
from kstreams.runtime.internal_topics.manager import SetupResult
from kstreams.runtime.restoration.state_updater import StateUpdater
from kstreams.runtime.streams_runtime import StreamsRuntime
from kstreams.runtime.tasks.task_manager import TaskManager
from kstreams.runtime.threads.polling_parts import Failure, FailureSource, RuntimeHooks
from kstreams.runtime.threads.polling_thread import PollingThread
from kstreams.runtime.threads.stream_thread import StreamThread
from kstreams.runtime.threads.thread_tasks import divide_tasks
from kstreams.state.directory import StateDirectory
from kstreams.state.restore_listener import StateRestoreListener
from kstreams.topology.topology import Topology

__all__ = [
    "HostInfo",
    "InitParameters",
    "KafkaStreams",
    "KeyQueryMetadata",
    "MetricName",
    "QueryableStoreTypes",
    "StateRestoreListener",
    "StoreQueryParameters",
    "StreamsMetadata",
    "StreamsUncaughtExceptionResponse",
    "ThreadMetadata",
]

logger = logging.getLogger(__name__)
# Metric groups whose metrics are per task: dropped when the task leaves this client.
_TASK_GROUPS = ("stream-task-metrics", "stream-processor-node-metrics")


class StreamsUncaughtExceptionResponse(enum.Enum):
    """What the uncaught exception handler asks for (KIP-671)."""

    REPLACE_THREAD = "REPLACE_THREAD"
    SHUTDOWN_CLIENT = "SHUTDOWN_CLIENT"
    SHUTDOWN_APPLICATION = "SHUTDOWN_APPLICATION"


ClientState = State
UncaughtExceptionHandler = Callable[[BaseException], StreamsUncaughtExceptionResponse]
StateListener = Callable[[State, State], None]


@dataclass(frozen=True)
class ThreadMetadata:
    """What ``metadata_for_local_threads`` tells of one live stream thread."""

    thread_name: str
    thread_state: str
    cache_max_bytes: int
    # The client's tasks divided over its threads (see metadata_for_local_threads).
    active_tasks: frozenset[str]
    standby_tasks: frozenset[str] = frozenset()


class KafkaStreams:
    """Runs a topology against a cluster. See the module docstring for its threads."""

    State: ClassVar[type[ClientState]]

    def __init__(
        self,
        topology: Topology,
        config: Mapping[str, Any] | StreamsConfig,
        cluster: Cluster | None = None,
    ) -> None:
        self.config = config if isinstance(config, StreamsConfig) else StreamsConfig(config)
        self._topology = topology
        # The runtime's parts that live as long as the client (kstreams/runtime/client_parts.py);
        # start() builds the rest (StreamsRuntime).
        parts = self._parts = build_client_parts(self, topology, self.config, cluster)
        self.plan = parts.plan
        self.process_id = parts.process_id
        self._release_process_id = parts.release_process_id
        self.client_id = parts.client_id
        self.cluster = parts.cluster
        self._metrics = parts.metrics
        self._admin = parts.admin
        self.internal_topics = parts.internal_topics
        self._queries = parts.queries
        self._state = State.CREATED
        self._state_lock = threading.Condition()
        self._runtime_lock = threading.RLock()
        self._starting_thread: threading.Thread | None = None
        # Threads inside a state listener call: a close() there must not wait for the shutdown,
        # which may be waiting for the listener to return.
        self._listener_threads: set[threading.Thread] = set()
        self._state_listener: StateListener | None = None
        self._handler: UncaughtExceptionHandler | None = None
        self._restore_listener: StateRestoreListener | None = None
        self._task_sensors: dict[Any, Sensor] = {}
        self._sensors_lock = threading.Lock()
        self._failed_threads = 0
        self._shutdown_logged = False
        # Made by start(): None before it (and in a client closed before it started).
        self._runtime: StreamsRuntime | None = None
        self._close_thread: threading.Thread | None = None
        client_tags = {"client-id": self.client_id}
        self._metrics.gauge(
            "alive-stream-threads", "stream-metrics", client_tags, lambda: float(len(self._live_threads()))
        )
        self._metrics.gauge(
            "failed-stream-threads", "stream-metrics", client_tags, lambda: float(self._failed_threads)
        )
        self._metrics.gauge(
            "state", "stream-metrics", client_tags, lambda: float(list(State).index(self._state))
        )

    # -- state machine ------------------------------------------------------------------------

    @property
    def state(self) -> ClientState:
        return self._state

    def set_state_listener(self, listener: StateListener) -> None:
        """Call ``listener(new_state, old_state)`` on every state change (outside any lock)."""
        if self._state is not State.CREATED:
            raise IllegalStateException("The state listener can only be set in state CREATED.")
        self._state_listener = listener

    def _set_state(self, new: ClientState) -> bool:
        with self._state_lock:
            old = self._state
            if not check_transition(self.client_id, old, new):
                return False
            self._state = new
            self._state_lock.notify_all()
        logger.info("Stream-client %s: state transition from %s to %s", self.client_id, old.name, new.name)
        listener = self._state_listener
        if listener is not None and old is not new:
            me = threading.current_thread()
            self._listener_threads.add(me)
            try:
                listener(new, old)
            except Exception:
                logger.exception("The state listener raised; the state change stands")
            finally:
                self._listener_threads.discard(me)
        return True

    def wait_for_state(self, *states: ClientState, timeout: float | None = None) -> bool:
        """Block until the client is in one of the states (True) or the timeout passes (False)."""
        with self._state_lock:
            return self._state_lock.wait_for(lambda: self._state in states, timeout)

    # -- handlers -----------------------------------------------------------------------------

    def set_uncaught_exception_handler(self, handler: UncaughtExceptionHandler) -> None:
        """Set the handler for exceptions in the client's threads (KIP-671).

        Stream threads: every response applies. The restore thread: REPLACE_THREAD closes the
        failing task and restores it again; the SHUTDOWN responses apply as usual. The polling
        thread cannot be replaced: REPLACE_THREAD is treated as SHUTDOWN_CLIENT (with a warning).
        Only in state CREATED.
        """
        if handler is None:
            raise ValueError("The uncaught exception handler must not be None.")
        if self._state is not State.CREATED:
            raise IllegalStateException("The uncaught exception handler can only be set in state CREATED.")
        self._handler = handler

    def set_global_state_restore_listener(self, listener: StateRestoreListener) -> None:
        if self._state is not State.CREATED:
            raise IllegalStateException("The restore listener can only be set in state CREATED.")
        self._restore_listener = listener

    # -- lifecycle ----------------------------------------------------------------------------

    def init(self, params: InitParameters | None = None, timeout: float | timedelta | None = None) -> None:
        """Set up the application's internal topics on the cluster (KIP-698). Only in CREATED.

        Raises MisconfiguredInternalTopicException, MissingSourceTopicException,
        InternalTopicsAlreadySetupException, MissingInternalTopicsException or TimeoutError as the
        KIP orders them.
        """
        if self._state is not State.CREATED:
            raise IllegalStateException(f"init() is only allowed in state CREATED, not {self._state.name}.")
        self.internal_topics.init(params, _seconds(timeout))

    def start(self) -> None:
        """Start the client's threads. Raises IllegalStateException unless the client is CREATED."""
        with self._state_lock:
            if self._state is not State.CREATED:
                raise IllegalStateException(
                    f"Stream-client {self.client_id}: the client is already started or already stopped "
                    f"(state {self._state.name}); create a new KafkaStreams to start again."
                )
        with self._runtime_lock:
            self._starting_thread = threading.current_thread()
            try:
                self._set_state(State.REBALANCING)
                if self._state is not State.REBALANCING:
                    return  # a state listener closed the client: start nothing
                try:
                    self._start_runtime()
                except BaseException:
                    self._set_state(State.PENDING_ERROR)
                    self._close_runtime(timeout=10.0)
                    self._set_state(State.ERROR)
                    raise
            finally:
                self._starting_thread = None

    def _start_runtime(self) -> None:
        self._runtime = StreamsRuntime(
            self._parts,
            self.config,
            _Hooks(self),
            self._on_stream_failure,
            self._on_restore_failure,
            self._task_sensor,
            self._restore_listener,
        )
        self._runtime.start(self.metrics_prometheus, self)

    # The runtime's parts (None before start()).

    @property
    def _polling(self) -> PollingThread | None:
        return self._runtime.polling if self._runtime is not None else None

    @property
    def _state_updater(self) -> StateUpdater | None:
        return self._runtime.state_updater if self._runtime is not None else None

    @property
    def _task_manager(self) -> TaskManager | None:
        return self._runtime.task_manager if self._runtime is not None else None

    @property
    def _consumer(self) -> Consumer | None:
        return self._runtime.consumer if self._runtime is not None else None

    @property
    def _producer(self) -> Producer | None:
        return self._runtime.producer if self._runtime is not None else None

    def close(self, timeout: float | timedelta | None = None) -> bool:
        """Shut the client down: stop the threads, commit and close every task, leave the group.

        The shutdown runs on its own thread and always completes (to NOT_RUNNING, or ERROR after a
        fatal error); ``close`` waits for it up to ``timeout`` (None waits for ever) and returns
        whether it completed in time. From one of the client's own threads (a processor, the
        uncaught exception handler) or a state listener it cannot wait for itself: it starts the
        shutdown and returns False at once (True if nothing runs yet, or the client is stopped).
        """
        seconds = _seconds(timeout)
        with self._state_lock:
            state = self._state
        if state in (State.NOT_RUNNING, State.ERROR):
            return True
        current = threading.current_thread()
        if state is State.CREATED or current is self._starting_thread:
            # Nothing runs yet (start() calls its REBALANCING listener before it starts threads):
            # the shutdown is complete at once, and start() then starts nothing.
            if self._set_state(State.PENDING_SHUTDOWN):
                self._close_runtime(seconds)
                self._set_state(State.NOT_RUNNING)
            return self.wait_for_state(State.NOT_RUNNING, State.ERROR, timeout=seconds)
        if self._set_state(State.PENDING_SHUTDOWN):
            self._close_async(State.NOT_RUNNING)
        if current in self._own_threads() or current in self._listener_threads:
            return False
        return self.wait_for_state(State.NOT_RUNNING, State.ERROR, timeout=seconds)

    def clean_up(self) -> None:
        """Delete this application's local state directory (``<state.dir>/<application.id>``), as
        Kafka's ``KafkaStreams.cleanUp()``: every task's stores and checkpoints, so the next start
        restores all state from the changelogs (after ``kstreams reset``: from scratch).

        Only before ``start()`` (CREATED) or after ``close()`` completed (NOT_RUNNING); otherwise
        IllegalStateException. Raises LockException, deleting nothing, while another running client
        holds a task directory of this application under the same state.dir. Before ``start()``
        the process id files stay (this client already took its id from them).
        """
        with self._state_lock:
            state = self._state
            if state not in (State.CREATED, State.NOT_RUNNING):
                raise IllegalStateException(
                    f"Stream-client {self.client_id}: cannot clean up the local state in state {state.name}: "
                    "call clean_up() before start() or after close() has completed."
                )
            holds_process_id = self._release_process_id is not None and self._release_process_id.alive
            StateDirectory(str(self.config["state.dir"]), self.config.application_id).clean(holds_process_id)

    def _close_async(self, final: ClientState) -> None:
        def finish() -> None:
            try:
                self._close_runtime(None)
            except Exception:
                logger.exception("Closing the runtime failed; the client stops all the same")
            self._set_state(final)

        self._close_thread = threading.Thread(
            target=finish, name=f"{self.client_id}-CloseThread", daemon=True
        )
        self._close_thread.start()

    def _own_threads(self) -> list[threading.Thread]:
        return self._runtime.threads() if self._runtime is not None else []

    def _close_runtime(self, timeout: float | None) -> bool:
        with self._runtime_lock:
            return self._stop_runtime(timeout)

    def _stop_runtime(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        ok = self._runtime.stop(deadline) if self._runtime is not None else True
        if ok and self._release_process_id is not None:
            self._release_process_id()  # a successor client may now take over the process id
        return ok

    def _abandon(self) -> None:
        """Simulate a crash (tests only): every thread stops where it is — nothing is committed or
        flushed, no task is closed, the group is not left and an open transaction stays open. The
        cluster notices only when the session times out, as it would for a killed process."""
        if self._runtime is not None:
            self._runtime.abandon()
        with self._state_lock:
            self._state = State.NOT_RUNNING
            self._state_lock.notify_all()

    # -- stream threads (KIP-663) ---------------------------------------------------------------

    def add_stream_thread(self) -> str | None:
        """Start one more stream thread and return its name, or None if the client is not RUNNING or
        REBALANCING. The record cache is redistributed over the threads at once; no rebalance is
        needed (tasks are picked dynamically), so nothing pauses."""
        return self._add_stream_thread(reserved=())

    def _add_stream_thread(self, reserved: tuple[str, ...]) -> str | None:
        runtime = self._runtime
        if runtime is None:
            logger.warning("Cannot add a stream thread in state %s", self._state.name)
            return None
        thread = runtime.stream_threads.add(lambda: self._state.is_running_or_rebalancing(), reserved)
        if thread is None:
            logger.warning("Cannot add a stream thread in state %s", self._state.name)
            return None
        if not self._state.is_running_or_rebalancing():
            thread.request_stop()
            thread.wait_dead(10.0)
            runtime.stream_threads.resize_caches()
            return None
        logger.info("Added stream thread %s", thread.name)
        return thread.name

    def remove_stream_thread(self, timeout: float | timedelta | None = None) -> str | None:
        """Stop one stream thread and return its name (None if none is alive or the client is not
        RUNNING/REBALANCING). Its tasks simply go on with the other threads; the record cache is
        redistributed. Raises TimeoutError if the thread did not stop in time — after the shutdown
        was requested and the caches resized. Removing the last thread keeps the client RUNNING:
        input then buffers up to a bound and the consumer pauses until a thread is added."""
        seconds = _seconds(timeout)
        runtime = self._runtime
        if runtime is None or not self._state.is_running_or_rebalancing():
            logger.warning("Cannot remove a stream thread in state %s", self._state.name)
            return None
        victim = runtime.stream_threads.request_removal()
        if victim is None:
            return None
        stopped = True
        if victim is not threading.current_thread():
            stopped = victim.wait_dead(max(seconds, 0.0) if seconds is not None else None)
        runtime.stream_threads.resize_caches(exclude=victim)
        if not stopped:
            raise TimeoutError(f"Thread {victim.name} did not stop in the allotted time")
        logger.info("Removed stream thread %s", victim.name)
        return victim.name

    def _live_threads(self) -> list[StreamThread]:
        return self._runtime.stream_threads.live() if self._runtime is not None else []

    # -- failures (KIP-671) ---------------------------------------------------------------------

    def _on_stream_failure(
        self, thread: StreamThread, handle: int, exc: BaseException, replace: bool
    ) -> None:
        tasks = self._task_manager
        entry = tasks.entry_for_handle(handle) if tasks is not None else None
        if self._polling is not None:
            self._polling.report(Failure(FailureSource.STREAM, exc, thread, entry, replace))

    def _on_restore_failure(self, entry: Any, exc: BaseException) -> None:
        if self._polling is not None:
            self._polling.report(Failure(FailureSource.RESTORE, exc, None, entry))

    def _respond(self, exc: BaseException) -> StreamsUncaughtExceptionResponse:
        if self._handler is None:
            logger.error("No uncaught exception handler is set: shutting the client down (SHUTDOWN_CLIENT).")
            return StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT
        try:
            response = self._handler(exc)
        except Exception:
            logger.exception("The uncaught exception handler raised; shutting the client down")
            return StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT
        if not isinstance(response, StreamsUncaughtExceptionResponse):
            logger.error(
                "The uncaught exception handler returned %r, not a StreamsUncaughtExceptionResponse; "
                "shutting the client down",
                response,
            )
            return StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT
        return response

    def _handle_failure(self, failure: Failure) -> None:
        """Apply the uncaught exception handler (runs on the polling thread, or as it dies)."""
        if failure.source is FailureSource.STREAM:
            self._failed_threads += 1
        if self._state in (State.PENDING_SHUTDOWN, State.NOT_RUNNING, State.PENDING_ERROR, State.ERROR):
            logger.info(
                "Ignoring a %s thread failure during shutdown: %s", failure.source.value, failure.exception
            )
            return
        response = self._respond(failure.exception)
        if (
            response is StreamsUncaughtExceptionResponse.REPLACE_THREAD
            and failure.source is FailureSource.POLLING
        ):
            logger.warning("The polling thread cannot be replaced; shutting the client down instead")
            response = StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT
        if response is StreamsUncaughtExceptionResponse.REPLACE_THREAD:
            if failure.entry is not None and self._polling is not None:
                self._polling.revive(failure.entry, getattr(failure.exception, "failed_at", None))
            if failure.source is FailureSource.STREAM and not failure.replace_thread:
                # remove_stream_thread() took this thread away (and said so) before it failed:
                # a replacement would undo that removal.
                name = failure.thread.name if failure.thread is not None else "?"
                logger.info("Not replacing stream thread %s: it was being removed when it failed", name)
            elif failure.source is FailureSource.STREAM:
                # The dying thread still holds its name (as in Kafka), so the new one gets another.
                dying = (failure.thread.name,) if failure.thread is not None else ()
                self._add_stream_thread(reserved=dying)
        elif response is StreamsUncaughtExceptionResponse.SHUTDOWN_APPLICATION:
            sent = self._request_application_shutdown()
            if not sent or failure.source is FailureSource.POLLING:
                # A failed polling thread sends the request as it dies (the other clients learn
                # it from the group), but it will never poll the group's answer to this client.
                self._shutdown_with_error()
        else:
            self._shutdown_with_error()

    def _shutdown_with_error(self) -> None:
        if self._set_state(State.PENDING_ERROR):
            self._close_async(State.ERROR)

    def shutdown_application(self) -> bool:
        """Shut down every client of this application (same application.id) into ERROR.

        Returns True if the request was sent, False if it cannot be (the client is not running).
        """
        if (
            not self._state.is_running_or_rebalancing()
            or self._polling is None
            or not self._polling.is_alive()
        ):
            return False
        return self._request_application_shutdown()

    def _request_application_shutdown(self) -> bool:
        polling, consumer = self._polling, self._consumer
        if polling is None or consumer is None or not polling.is_alive():
            return False
        try:
            polling.call(lambda: consumer.signal_application_error(ERROR_SHUTDOWN_REQUESTED), timeout=30.0)
        except Exception:
            logger.exception("Could not send the application shutdown request")
            return False
        return True

    def _on_application_error(self, code: int) -> None:
        if code == ERROR_SHUTDOWN_REQUESTED:
            if not self._shutdown_logged:
                self._shutdown_logged = True
                logger.error(
                    "Detected that shutdown was requested. All clients in this app will now begin to shutdown"
                )
            self._shutdown_with_error()
        else:
            logger.error("The group reported assignment error code %d; shutting the client down", code)
            self._shutdown_with_error()

    # -- introspection --------------------------------------------------------------------------

    def metadata_for_local_threads(self) -> list[ThreadMetadata]:
        """Metadata of every stream thread that is not DEAD (PENDING_SHUTDOWN ones included).

        Tasks are not pinned to threads here, so the client's tasks are divided over its threads
        for reporting (``runtime/threads/thread_tasks.py``): each active task (restoring or running) is
        listed under exactly one thread — the one that processed it last, or, for a task no
        thread has processed yet, the thread with the fewest tasks — and each standby task under
        exactly one thread, spread evenly. As in Kafka, the union over the threads is every task
        of the client, so the listing shows where tasks run."""
        threads = self._live_threads()
        tasks = self._task_manager
        updater = self._state_updater
        active = tasks.entries() if tasks is not None else []
        standby = sorted(updater.standby_ids()) if updater is not None else []
        divided = divide_tasks(
            [(t.name, t.cache) for t in threads], [(e.task_id, e.task.record_cache) for e in active], standby
        )
        return [
            ThreadMetadata(
                t.name,
                t.state.value,
                t.cache.max_bytes,
                frozenset(str(task) for task in divided[t.name][0]),
                frozenset(str(task) for task in divided[t.name][1]),
            )
            for t in threads
        ]

    # -- interactive queries across clients -----------------------------------------------------

    def metadata_for_all_streams_clients(self) -> list[StreamsMetadata]:
        """Every client of the application that has an ``application.server``, with the stores and
        partitions it holds, active and standby (Kafka's ``metadataForAllStreamsClients``). Empty
        until this client has joined the group and published its own metadata."""
        found = self._queries.metadata.all_metadata()
        return found if found is not None else []

    def streams_metadata_for_store(self, store_name: str) -> list[StreamsMetadata]:
        """The clients that hold ``store_name``, actively or as a standby (Kafka's
        ``streamsMetadataForStore``); every client for a global store."""
        if store_name is None:
            raise ValueError("store_name must not be None.")
        return self._queries.metadata.metadata_for_store(store_name)

    def query_metadata_for_key(
        self, store_name: str, key: Any, key_serializer: Any = None, *, partitioner: Any = None
    ) -> KeyQueryMetadata | None:
        """Where ``key`` of ``store_name`` lives: the active client, the standby clients and the
        partition (Kafka's ``queryMetadataForKey``). The partition is computed as the store's source
        topics are partitioned: murmur2 of the key serialized with ``key_serializer`` (default: the
        store's key serde), or ``partitioner(topic, key, None, num_partitions)`` (a custom
        StreamPartitioner). ``KeyQueryMetadata.NOT_AVAILABLE`` before the metadata is known; None
        for a store that no subtopology has."""
        if store_name is None:
            raise ValueError("store_name must not be None.")
        if key_serializer is None and partitioner is None:
            key_serializer = self.store_key_serde(store_name)
        return self._queries.metadata.key_metadata(store_name, key, key_serializer, partitioner)

    def store_key_serde(self, store_name: str) -> Any:
        """The key serde of a store: its own, else ``default.key.serde`` (None when neither is set)."""
        from kstreams.serdes import serde_from_config

        builder = self.plan.store_builders.get(store_name)
        if builder is None:
            stores = sorted(self.plan.store_builders)
            raise UnknownStateStoreException(
                f"No state store named {store_name!r} in the topology; stores: {stores}."
            )
        serde = getattr(builder, "key_serde", None)
        return serde if serde is not None else serde_from_config(self.config, "default.key.serde")

    @property
    def query_url(self) -> str | None:
        """The base URL of the query endpoint (``query.http.port``) while the client runs, else None."""
        return self._queries.url

    def _task_sensor(self, task_id: Any) -> Sensor:
        """The process sensor of one task (stream-task-metrics), created on first use."""
        with self._sensors_lock:
            sensor = self._task_sensors.get(task_id)
            if sensor is None:
                tags = {"client-id": self.client_id, "task-id": str(task_id)}
                sensor = self._metrics.sensor("process", "stream-task-metrics", tags)
                self._task_sensors[task_id] = sensor
            return sensor

    def metrics(self) -> dict[MetricName, float]:
        """Every metric of the client, by Kafka Streams' names: stream-metrics (client),
        stream-thread-metrics, stream-task-metrics and stream-processor-node-metrics (KIP-613's
        record-e2e-latency-avg/min/max of source and sink nodes; tasks running here now),
        stream-record-cache-metrics, stream-state-updater-metrics, with autoscaling
        stream-subtopology-metrics and stream-client-metrics, and with ``metrics.recording.level``
        DEBUG or TRACE stream-state-metrics (each open store's operation rates and latencies in ns;
        a store's metrics go when it closes)."""
        task_manager = self._task_manager
        if task_manager is not None:
            live = {str(t) for t in task_manager.task_ids()}
            with self._sensors_lock:
                for gone in [t for t in self._task_sensors if str(t) not in live]:
                    del self._task_sensors[gone]
            self._metrics.remove(lambda m: m.group in _TASK_GROUPS and m.tags.get("task-id") not in live)
        return self._metrics.snapshot()

    @property
    def metrics_url(self) -> str | None:
        """Where the metrics endpoint serves (``metrics.http.port``) while the client runs, else None."""
        return self._runtime.metrics_url if self._runtime is not None else None

    def metrics_prometheus(self) -> str:
        """The same metrics in Prometheus' text exposition format."""
        return self._metrics.to_prometheus()

    def store(self, name: str | StoreQueryParameters, timestamped: bool = False) -> Any:
        """A read-only view of a state store across this client's tasks (interactive queries).

        ``name`` is a store name, or Kafka's ``StoreQueryParameters``:
        ``StoreQueryParameters.from_name_and_type(name, QueryableStoreTypes.key_value_store())``,
        optionally ``.with_partition(p)``/``.with_partitions(ps)`` (only those partitions' tasks)
        and ``.enable_stale_stores()`` (restoring and standby stores answer too, and the client may
        be REBALANCING; see ``runtime/queries/store_query.py``). Without stale stores only running active
        tasks answer, and only while the client is RUNNING.

        The view finds the store's current local instances on every read, so it follows tasks as they
        come and go; reading a store that migrated away raises InvalidStateStoreException. A
        timestamped store (the DSL's tables and aggregations) shows plain values, as Kafka's
        ``keyValueStore()``/``windowStore()`` query types do; ``timestamped=True`` (or a timestamped
        query type) shows its ``ValueAndTimestamp`` values. Only this client's instances answer:
        find the client that holds a key with ``query_metadata_for_key``.
        """
        from kstreams.state.query import ReadOnlyKeyValueStore, ReadOnlySessionStore, ReadOnlyWindowStore

        params = name if isinstance(name, StoreQueryParameters) else StoreQueryParameters(name)
        store_name = params.store_name
        builder = self.plan.store_builders.get(store_name)
        if builder is None:
            stores = sorted(self.plan.store_builders)
            raise UnknownStateStoreException(
                f"No state store named {store_name!r} in the topology; stores: {stores}."
            )
        allowed = (State.RUNNING, State.REBALANCING) if params.stale_stores else (State.RUNNING,)
        if self._state not in allowed:
            raise InvalidStateStoreException(
                f"Cannot query store {store_name!r} in state {self._state.name}: wait until the client is "
                + ("RUNNING or REBALANCING." if params.stale_stores else "RUNNING (or enable stale stores).")
            )
        if params.query_type is not None:
            timestamped = timestamped or params.query_type.timestamped
            if not params.query_type.accepts(builder.store_type):
                raise InvalidStateStoreException(
                    f"Cannot get state store {store_name} because the queryable store type "
                    f"{params.query_type} does not accept the actual store type ({builder.store_type})."
                )
        from kstreams.state.timestamped import is_timestamped, plain_value_view

        if timestamped and not is_timestamped(builder):
            raise InvalidStateStoreException(
                f"State store {store_name!r} is not a timestamped store: query it with store({store_name!r})."
            )
        view = (lambda store: store) if timestamped else plain_value_view

        def instances() -> list[Any]:
            runtime = self._runtime
            if store_name in self.plan.global_store_names:
                # A global store: this client holds all of it (none once the client stopped).
                global_thread = runtime.global_thread if runtime is not None else None
                found = global_thread.stores.get(store_name) if global_thread is not None else None
                return [view(found)] if found is not None else []
            return self._queries.store_instances(params, view)

        views: dict[str, Any] = {"window": ReadOnlyWindowStore, "session": ReadOnlySessionStore}
        return views.get(builder.store_type, ReadOnlyKeyValueStore)(store_name, instances)


KafkaStreams.State = State  # Kafka's spelling: KafkaStreams.State.RUNNING


class _Hooks(RuntimeHooks):
    def __init__(self, streams: KafkaStreams) -> None:
        self._streams = streams

    def on_rebalance_started(self) -> None:
        if self._streams.state is State.RUNNING:
            self._streams._set_state(State.REBALANCING)

    def on_rebalance_finished(self) -> None:
        if self._streams.state is State.REBALANCING:
            self._streams._set_state(State.RUNNING)

    def on_failure(self, failure: Failure) -> None:
        self._streams._handle_failure(failure)

    def on_application_error(self, code: int) -> None:
        self._streams._on_application_error(code)

    def on_assignment(self) -> SetupResult:
        runtime = self._streams._runtime
        if runtime is not None:
            runtime.partition_count.clear()
        return self._streams.internal_topics.setup_for_rebalance()


def _seconds(timeout: float | timedelta | None) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    return float(timeout)
