"""The processors the DSL adds to a topology.

Internal: not part of the public API; the public names are ``kstreams.__all__``.

Each operation is a *supplier*: a small callable class whose attributes hold the operation's
configuration (predicate, mapper, store name, window spec, aggregation kind, serdes) and whose
call returns one fresh ``Processor`` per task. The configuration stays inspectable so a later
compiler can recognise, for example, "count with a string key serde" and swap in a kernel.
"""

__all__: list[str] = []
