"""The streaming runtime of a ``KafkaStreams`` client: threads, tasks, restoration, assignment,
interactive queries and internal topics around the processing engine (``kstreams.processing``).
Internal: not part of the public API; the public names are ``kstreams.__all__``. The public types
it works with are defined in public modules (``kstreams.queries``, ``kstreams.init_parameters``,
``kstreams.state.restore_listener``).

The map (the threads and how a record flows: ``docs/internals.md``):

- ``client_parts`` and ``streams_runtime``: the one composition root. ``build_client_parts`` builds
  what a client holds from its construction (plan, process id, metrics, admin, internal topic
  manager, query access); ``StreamsRuntime``, built by ``start()`` from those, builds every other
  part below once, starts and stops them together. Every part takes the parts it uses, never the
  runtime, so each can be built alone (``tests/unit/runtime/`` mirrors the packages);
- ``threads``: the polling thread (the only user of the main consumer and the producer) and what it
  is built from (``polling_parts``), the stream threads that pick tasks under per-task locks
  (KIP-663's add/remove), the Python gate, task idling (``max.task.idle.ms``) and REPLACE_THREAD's
  back-off;
- ``tasks``: the task manager (active tasks, their input buffers and scheduling), checkpoints,
  standby tasks, the commit barrier and the commit of all tasks at once (the record collector's
  draining: ``kstreams/processing/record_collector.py``);
- ``restoration``: the state updater (the restore thread) and the global stream thread, which call
  the ``StateRestoreListener`` (``kstreams.state.restore_listener``);
- ``assignment``: the group assignor, KIP-441 task assignment and standby placement;
- ``queries``: interactive queries (``StoreQueryParameters``, ``StreamsMetadata``), the metadata
  channel between clients, and the clients' HTTP endpoints for queries and metrics;
- ``internal_topics``: repartition, changelog and control topics (KIP-698's ``init()``, KIP-878's
  autoscaling, repartition purging);
- ``client_state``: the client's states and transitions; ``retry``: ``task.timeout.ms`` retries.

Layers, lowest first: ``retry`` and ``client_state``; ``internal_topics``; ``tasks``;
``restoration``; ``assignment``; ``queries``; ``threads``; ``client_parts``; ``streams_runtime``.
A module imports only from its own package or a lower layer (TYPE_CHECKING imports included), so
no import circle crosses two of them; a type two layers share lives in the lower one.

Dependencies: ``runtime`` uses ``processing``, ``topology``, ``state``, ``cluster`` and ``_native``;
nothing below it imports it.
"""
