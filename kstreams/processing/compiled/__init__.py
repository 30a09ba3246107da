"""The compiled path: a task's batches run through kernels of ``kstreams._native`` instead of the
Python processors, with the same results.

``compiler`` builds a task's compiled segments (which DSL operations qualify is decided by
``kstreams.topology.compiled_ops``; the compiler checks that the running task fits them);
``steps`` holds what every batch step is (``Step``, the per-record boundary), typed against the
``SegmentTask`` protocol; the steps are by kind beside it: ``stateless_steps``, ``sink_steps``,
``aggregate_steps``, ``session_steps``; ``columns`` decodes a batch's columns into Python objects.
"""
