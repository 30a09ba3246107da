"""The processing engine: a task running its processors and stores over batches of records.

Internal: not part of the public API; the public names are ``kstreams.__all__``.

The engine depends on the topology, state, serdes, the Processor API and ``_native``, never on the
runtime. Three hosts run it alike: the streaming runtime (``kstreams.runtime``, one task per
partition, picked by stream threads), the test driver (``kstreams.testing``) and Spark
(``kstreams.spark.partition_task``).

- ``task``: ``StreamTask``, one partition of one subtopology: its processors, stores, stream time,
  punctuation and committable offsets;
- ``global_task``: ``GlobalStateTask``, the task of a global subtopology;
- ``processor_context``: the ``ProcessorContext`` processors and stores see of their task;
- ``record_context``: where the record being processed came from (Kafka's ``ProcessorRecordContext``);
- ``record_loop``: ``RecordLoopTask``, what the C per-record loop (``_native/per_record``) calls back
  on its task;
- ``record_errors``: the processing and production exception handlers and the dead-letter queue;
- ``record_cache``: the record cache budget (``statestore.cache.max.bytes``) split over the threads
  that process (the cache itself is ``_native/record_cache``, its store layer ``state/caching.py``);
- ``e2e_latency``: KIP-613's end-to-end latency at source and terminal nodes;
- ``offset_metadata``: the partition time a task commits with each offset;
- ``compiled``: the compiled path, batches run through ``_native``'s kernels instead of Python
  processors, with the same results.
"""
