"""kstreams' compiled core (Cython, GIL released on the hot paths).

Internal: not part of the public API; the public names are ``kstreams.__all__``.

Modules: ``record_batch`` (columnar batches of records), ``record_buffer`` (a task's input FIFO),
``scheduler`` (task picking with per-task locks and the commit barrier), ``record_collector``
(output buffers with changelog suppression), ``record_cache`` (the byte-bounded LRU record cache),
``store_access`` (per-record get and put of a cached store), ``python_chain`` (a line of Python
functions called record by record from C), ``per_record`` (the per-record path's task loop,
``forward`` and the DSL's filter/map/map_values processors), ``kernels`` (batch kernels of the
compiled processors).
"""
