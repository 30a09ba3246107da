"""The compiled path: a task's batches run through kernels of ``kstreams._native`` instead of the
Python processors, with the same results.

``compiler`` builds a task's compiled segments (which DSL operations qualify is decided by
``kstreams.topology.compiled_ops``; the compiler checks that the running task fits them);
``steps`` holds the batch steps a segment is made of, typed against the ``SegmentTask`` protocol.
"""
