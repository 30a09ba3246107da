"""KStream: an unbounded stream of records, and the operations that build on it.

Every operation adds a processor to the topology and returns a new KStream (or KTable, or
grouped stream) positioned after it. Operations that may change the key (``map``, ``flat_map``,
``select_key``, ``process``) mark the result as needing a repartition: a following aggregation or
join first writes the records to a repartition topic keyed by the new key and reads them back in a
new subtopology, so that all records of a key meet in one task.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from kstreams.errors import TopologyException
from kstreams.topology.dsl import naming
from kstreams.topology.dsl.internal_builder import InternalStreamsBuilder
from kstreams.topology.dsl.materialize import plain_key_value_store_builder
from kstreams.topology.dsl.parameters import (
    Grouped,
    Joined,
    Materialized,
    Named,
    Produced,
    Repartitioned,
    StoreType,
    StreamJoined,
    leading_options,
    named_as,
)
from kstreams.topology.dsl.processors.stateless import (
    FilterSupplier,
    FlatMapSupplier,
    FlatMapValuesSupplier,
    ForeachSupplier,
    MapSupplier,
    MapValuesSupplier,
    PassThroughSupplier,
    PeekSupplier,
    SelectKeySupplier,
)
from kstreams.topology.dsl.processors.stream_table_join import (
    BufferKeySerde,
    StreamRecordSerde,
    StreamTableJoinSupplier,
)
from kstreams.topology.dsl.windows import JoinWindows

if TYPE_CHECKING:
    from kstreams.processor import Processor
    from kstreams.processor.fixed_key import FixedKeyProcessor
    from kstreams.topology.dsl.branched import BranchedKStream
    from kstreams.topology.dsl.global_ktable import GlobalKTable
    from kstreams.topology.dsl.grouped import KGroupedStream
    from kstreams.topology.dsl.ktable import KTable
    from kstreams.topology.dsl.printed import Printed
    from kstreams.topology.dsl.records import KeyValue

__all__ = ["KStream"]

logger = logging.getLogger(__name__)

_INHERIT: Any = object()

K = TypeVar("K")
V = TypeVar("V")
KR = TypeVar("KR")
VR = TypeVar("VR")
VO = TypeVar("VO")


class KStream(Generic[K, V]):
    """A stream of key-value records with keys of type ``K`` and values of type ``V``. Create one
    with ``StreamsBuilder.stream``."""

    def __init__(
        self,
        builder: InternalStreamsBuilder,
        name: str,
        key_serde: Any,
        value_serde: Any,
        repartition_required: bool,
        source_nodes: Iterable[str],
    ) -> None:
        self._builder = builder
        self._name = name
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._repartition_required = repartition_required
        self._source_nodes = frozenset(source_nodes)
        # The repartition this stream's last join made (Kafka's KStreamImpl.repartitionNode).
        self._join_repartition: KStream[K, V] | None = None

    @property
    def name(self) -> str:
        """The name of the processor this stream comes out of."""
        return self._name

    @property
    def repartition_required(self) -> bool:
        """Whether the key may have changed since the last partitioning of the records."""
        return self._repartition_required

    def __repr__(self) -> str:
        return f"KStream({self._name!r}, repartition_required={self._repartition_required})"

    def _then(
        self,
        prefix: str,
        named: Named | str | None,
        supplier: Any,
        *,
        key_serde: Any = _INHERIT,
        value_serde: Any = _INHERIT,
        repartition_required: bool | None = None,
    ) -> KStream[Any, Any]:
        name = self._builder.name_or_generate(named_as(named), prefix)
        self._builder.add_processor(name, supplier, self._name)
        return KStream(
            self._builder,
            name,
            self._key_serde if key_serde is _INHERIT else key_serde,
            self._value_serde if value_serde is _INHERIT else value_serde,
            self._repartition_required if repartition_required is None else repartition_required,
            self._source_nodes,
        )

    # --- stateless -------------------------------------------------------------------------

    def filter(self, predicate: Callable[[K, V], bool], named: Named | str | None = None) -> KStream[K, V]:
        """Records for which ``predicate(key, value)`` holds."""
        return self._then(naming.FILTER, named, FilterSupplier(predicate))

    def filter_not(
        self, predicate: Callable[[K, V], bool], named: Named | str | None = None
    ) -> KStream[K, V]:
        """Records for which ``predicate(key, value)`` does not hold."""
        return self._then(naming.FILTER, named, FilterSupplier(predicate, negate=True))

    def map(
        self, mapper: Callable[[K, V], KeyValue[KR, VR] | tuple[KR, VR]], named: Named | str | None = None
    ) -> KStream[KR, VR]:
        """``mapper(key, value) -> KeyValue`` per record; the key may change (repartition needed)."""
        return self._then(
            naming.MAP,
            named,
            MapSupplier(mapper),
            key_serde=None,
            value_serde=None,
            repartition_required=True,
        )

    @overload
    def map_values(
        self, mapper: Callable[[V], VR], named: Named | str | None = None, *, with_key: Literal[False] = False
    ) -> KStream[K, VR]: ...

    @overload
    def map_values(
        self, mapper: Callable[[K, V], VR], named: Named | str | None = None, *, with_key: Literal[True]
    ) -> KStream[K, VR]: ...

    @overload
    def map_values(
        self, mapper: Callable[..., VR], named: Named | str | None = None, *, with_key: bool
    ) -> KStream[K, VR]: ...

    def map_values(
        self, mapper: Callable[..., Any], named: Named | str | None = None, *, with_key: bool = False
    ) -> KStream[K, Any]:
        """``mapper(value)`` (or ``mapper(key, value)`` with ``with_key``) as the new value."""
        return self._then(naming.MAPVALUES, named, MapValuesSupplier(mapper, with_key), value_serde=None)

    def flat_map(
        self,
        mapper: Callable[[K, V], Iterable[KeyValue[KR, VR] | tuple[KR, VR]]],
        named: Named | str | None = None,
    ) -> KStream[KR, VR]:
        """Zero or more KeyValues per record from ``mapper(key, value)`` (repartition needed)."""
        return self._then(
            naming.FLATMAP,
            named,
            FlatMapSupplier(mapper),
            key_serde=None,
            value_serde=None,
            repartition_required=True,
        )

    @overload
    def flat_map_values(
        self,
        mapper: Callable[[V], Iterable[VR]],
        named: Named | str | None = None,
        *,
        with_key: Literal[False] = False,
    ) -> KStream[K, VR]: ...

    @overload
    def flat_map_values(
        self,
        mapper: Callable[[K, V], Iterable[VR]],
        named: Named | str | None = None,
        *,
        with_key: Literal[True],
    ) -> KStream[K, VR]: ...

    @overload
    def flat_map_values(
        self, mapper: Callable[..., Iterable[VR]], named: Named | str | None = None, *, with_key: bool
    ) -> KStream[K, VR]: ...

    def flat_map_values(
        self,
        mapper: Callable[..., Iterable[Any]],
        named: Named | str | None = None,
        *,
        with_key: bool = False,
    ) -> KStream[K, Any]:
        """One record per value of ``mapper(value)``, each with the input's key."""
        return self._then(
            naming.FLATMAPVALUES, named, FlatMapValuesSupplier(mapper, with_key), value_serde=None
        )

    def select_key(self, selector: Callable[[K, V], KR], named: Named | str | None = None) -> KStream[KR, V]:
        """``selector(key, value)`` as the new key (repartition needed)."""
        return self._then(
            naming.KEY_SELECT, named, SelectKeySupplier(selector), key_serde=None, repartition_required=True
        )

    def peek(self, action: Callable[[K, V], None], named: Named | str | None = None) -> KStream[K, V]:
        """Calls ``action(key, value)`` for each record and passes the record on."""
        return self._then(naming.PEEK, named, PeekSupplier(action))

    def foreach(self, action: Callable[[K, V], None], named: Named | str | None = None) -> None:
        """Calls ``action(key, value)`` for each record; ends the stream."""
        name = self._builder.name_or_generate(named_as(named), naming.FOREACH)
        self._builder.add_processor(name, ForeachSupplier(action), self._name)

    def split(self, named: Named | str | None = None) -> BranchedKStream[K, V]:
        """Branches: ``split().branch(pred, Branched.as_("a")).default_branch()`` returns a dict
        of branch name -> KStream; each record goes to the first branch whose predicate holds."""
        from kstreams.topology.dsl.branched import BranchedKStream

        return BranchedKStream(self, named_as(named))

    def merge(self, other: KStream[K, V], named: Named | str | None = None) -> KStream[K, V]:
        """The records of both streams, interleaved as they arrive."""
        if not isinstance(other, KStream):
            raise TypeError(f"merge() takes a KStream, got {other!r}.")
        name = self._builder.name_or_generate(named_as(named), naming.MERGE)
        self._builder.add_processor(name, PassThroughSupplier(), self._name, other._name)
        same_serdes = self._key_serde is other._key_serde and self._value_serde is other._value_serde
        return KStream(
            self._builder,
            name,
            self._key_serde if same_serdes else None,
            self._value_serde if same_serdes else None,
            self._repartition_required or other._repartition_required,
            self._source_nodes | other._source_nodes,
        )

    @overload
    def process(
        self,
        processor_supplier: Callable[[], Processor[Any, Any, KR, VR]],
        *store_names: str | Named,
        named: Named | str | None = None,
    ) -> KStream[KR, VR]: ...

    @overload
    def process(
        self,
        processor_supplier: Callable[[], object],
        *store_names: str | Named,
        named: Named | str | None = None,
    ) -> KStream[Any, Any]: ...

    def process(
        self,
        processor_supplier: Callable[[], Any],
        *store_names: str | Named,
        named: Named | str | None = None,
    ) -> KStream[Any, Any]:
        """A Processor API processor in the stream: ``processor_supplier()`` makes one per task;
        it may use the named stores (and the stores its supplier's ``stores()`` declares). The
        processor may change keys, so the result needs a repartition before a keyed operation.
        A ``Named`` before the store names names the processor, as Kafka's ``process(supplier,
        Named, String...)`` does."""
        if not callable(processor_supplier):
            raise TypeError(
                "process() takes a processor supplier (a callable returning a Processor), "
                f"got {processor_supplier!r}."
            )
        named, store_names = _named_before_stores(store_names, named, "process()")
        name = self._builder.name_or_new(named_as(named), naming.PROCESSOR)
        # The topology adds and connects the stores a supplier's stores() declares.
        self._builder.add_processor(name, processor_supplier, self._name)
        self._builder.connect_stores(name, store_names)
        return KStream(self._builder, name, None, None, True, self._source_nodes)

    def process_values(
        self,
        fixed_key_processor_supplier: Callable[[], FixedKeyProcessor[K, V, VR]],
        *store_names: str | Named,
        named: Named | str | None = None,
    ) -> KStream[K, VR]:
        """A key-preserving processor in the stream: ``fixed_key_processor_supplier()`` makes one
        ``FixedKeyProcessor`` per task; it may change values, timestamps and headers (not keys)
        and use the named stores (and those its supplier's ``stores()`` declares). Keys stay, so
        unlike ``process`` the result needs no repartition. A ``Named`` may lead the store names,
        as in ``process``."""
        from kstreams.processor.fixed_key import FixedKeyProcessorSupplierAdapter

        named, store_names = _named_before_stores(store_names, named, "process_values()")
        supplier = FixedKeyProcessorSupplierAdapter(fixed_key_processor_supplier)
        name = self._builder.name_or_new(named_as(named), naming.PROCESSVALUES)
        self._builder.add_processor(name, supplier, self._name)
        self._builder.connect_stores(name, store_names)
        return KStream(
            self._builder, name, self._key_serde, None, self._repartition_required, self._source_nodes
        )

    def print(self, printed: Printed) -> None:
        """Print each record as ``[label]: key, value`` to standard output or a file (see
        ``Printed``); ends the stream."""
        from kstreams.topology.dsl.printed import Printed, PrintSupplier

        if not isinstance(printed, Printed):
            raise TypeError(
                f"print() takes a Printed (Printed.to_sys_out() or Printed.to_file(path)), got {printed!r}."
            )
        name = self._builder.name_or_generate(printed.name, naming.PRINTER)
        label = printed.label if printed.label is not None else name
        self._builder.add_processor(name, PrintSupplier(printed, label), self._name)

    # --- sinks and repartitioning ----------------------------------------------------------

    def to(self, topic: str | Callable[[K, V, Any], str], produced: Produced | None = None) -> None:
        """Write the records to a topic, or to the topic ``topic(key, value, record_context)``
        picks per record. Serdes default to the stream's, then to the application's."""
        produced = produced or Produced()
        name = self._builder.name_or_generate(produced.name, naming.SINK)
        key_serde = produced.key_serde if produced.key_serde is not None else self._key_serde
        partitioner = produced.partitioner
        if partitioner is None and hasattr(key_serde, "serialize_base_key"):
            # Kafka's sinks partition windowed keys by the inner key: a key's windows stay together.
            from kstreams.topology.dsl.windowed_serdes import WindowedStreamPartitioner

            partitioner = WindowedStreamPartitioner(key_serde)
        self._builder.add_sink(
            name,
            topic,
            self._name,
            key_serde,
            produced.value_serde if produced.value_serde is not None else self._value_serde,
            partitioner,
        )

    def repartition(self, repartitioned: Repartitioned | None = None) -> KStream[K, V]:
        """Write the records through a repartition topic (``<app>-<name>-repartition``) and read
        them back, optionally with a fixed partition count or a custom partitioner."""
        repartitioned = repartitioned or Repartitioned()
        prefix = repartitioned.name or self._builder.new_processor_name(naming.REPARTITION)
        key_serde = repartitioned.key_serde if repartitioned.key_serde is not None else self._key_serde
        value_serde = (
            repartitioned.value_serde if repartitioned.value_serde is not None else self._value_serde
        )
        source = self._builder.repartition(
            self._name,
            prefix,
            key_serde,
            value_serde,
            repartitioned.number_of_partitions,
            repartitioned.partitioner,
        )
        return KStream(self._builder, source, key_serde, value_serde, False, (source,))

    def _repartition_for_join(self, prefix: str, key_serde: Any, value_serde: Any) -> KStream[K, V]:
        """This stream through a repartition topic named after ``prefix``, for a join. As Kafka's
        ``KStreamImpl.repartitionForJoin``: a join not named (``prefix`` is the stream's own name)
        reuses the repartition the stream's last join made, whatever that one was named; the
        three names of a repartition are drawn either way."""
        key_serde = key_serde if key_serde is not None else self._key_serde
        value_serde = value_serde if value_serde is not None else self._value_serde
        stream = self._join_repartition
        if stream is not None and prefix == self._name:
            self._builder.draw_repartition_names()
            return stream
        source = self._builder.repartition(self._name, prefix, key_serde, value_serde)
        stream = self._join_repartition = KStream(
            self._builder, source, key_serde, value_serde, False, (source,)
        )
        return stream

    def to_table(
        self,
        named: Named | str | Materialized | None = None,
        materialized: Materialized | None = None,
    ) -> KTable[K, V]:
        """This stream as a table: each record is the new value of its key (None deletes it).
        The stream is repartitioned first if its key may have changed. Takes Kafka's overloads
        ``()``, ``(Named)``, ``(Materialized)`` and ``(Named, Materialized)``."""
        from kstreams.topology.dsl.ktable import updates_table

        if isinstance(named, Materialized):
            if materialized is not None:
                raise TypeError("to_table() got two Materialized; pass one.")
            named, materialized = None, named
        if materialized is not None and not isinstance(materialized, Materialized):
            raise TypeError(
                f"to_table() takes ([Named][, Materialized]), got {materialized!r} where a Materialized goes."
            )
        materialized = materialized or Materialized()
        name = self._builder.name_or_generate(named_as(named), naming.TO_KTABLE)
        store_name = materialized.store_name or self._builder.new_store_name(naming.TO_KTABLE)
        parent, sources = self._name, self._source_nodes
        if self._repartition_required:
            parent = self._builder.repartition(self._name, name, self._key_serde, self._value_serde)
            sources = frozenset((parent,))
        key_serde = materialized.key_serde if materialized.key_serde is not None else self._key_serde
        value_serde = materialized.value_serde if materialized.value_serde is not None else self._value_serde
        return updates_table(
            self._builder, name, parent, name, store_name, materialized, key_serde, value_serde, sources
        )

    # --- grouping --------------------------------------------------------------------------

    def group_by_key(self, grouped: Grouped | None = None) -> KGroupedStream[K, V]:
        """Group by the current key (repartitioned first if the key may have changed)."""
        from kstreams.topology.dsl.grouped import KGroupedStream

        grouped = grouped or Grouped()
        return KGroupedStream(
            self._builder,
            self._name,
            grouped.key_serde if grouped.key_serde is not None else self._key_serde,
            grouped.value_serde if grouped.value_serde is not None else self._value_serde,
            self._repartition_required,
            grouped.name,
            self._source_nodes,
        )

    def group_by(
        self, selector: Callable[[K, V], KR], grouped: Grouped | None = None
    ) -> KGroupedStream[KR, V]:
        """Group by ``selector(key, value)``; always repartitions."""
        from kstreams.topology.dsl.grouped import KGroupedStream

        grouped = grouped or Grouped()
        # As Kafka's groupBy: the key selector takes the Grouped name (the index drawn either way).
        name = self._builder.name_or_generate(grouped.name, naming.KEY_SELECT)
        self._builder.add_processor(name, SelectKeySupplier(selector), self._name)
        return KGroupedStream(
            self._builder,
            name,
            grouped.key_serde,
            grouped.value_serde if grouped.value_serde is not None else self._value_serde,
            True,
            grouped.name,
            self._source_nodes,
        )

    # --- joins -----------------------------------------------------------------------------

    @overload
    def join(
        self,
        other: KTable[K, VO],
        joiner: Callable[[V, VO], VR],
        windows: Joined | None = None,
        *,
        with_key: Literal[False] = False,
    ) -> KStream[K, VR]: ...

    @overload
    def join(
        self,
        other: KTable[K, VO],
        joiner: Callable[[K, V, VO], VR],
        windows: Joined | None = None,
        *,
        with_key: Literal[True],
    ) -> KStream[K, VR]: ...

    @overload
    def join(
        self,
        other: KTable[K, VO],
        joiner: Callable[[V, VO], VR],
        windows: None = None,
        joined: Joined | None = None,
        *,
        with_key: Literal[False] = False,
    ) -> KStream[K, VR]: ...

    @overload
    def join(
        self,
        other: KTable[K, VO],
        joiner: Callable[[K, V, VO], VR],
        windows: None = None,
        joined: Joined | None = None,
        *,
        with_key: Literal[True],
    ) -> KStream[K, VR]: ...

    @overload
    def join(
        self,
        other: KStream[K, VO],
        joiner: Callable[[V, VO], VR],
        windows: JoinWindows,
        joined: StreamJoined | None = None,
        *,
        with_key: Literal[False] = False,
    ) -> KStream[K, VR]: ...

    @overload
    def join(
        self,
        other: KStream[K, VO],
        joiner: Callable[[K, V, VO], VR],
        windows: JoinWindows,
        joined: StreamJoined | None = None,
        *,
        with_key: Literal[True],
    ) -> KStream[K, VR]: ...

    @overload
    def join(
        self,
        other: GlobalKTable[KR, VO],
        joiner: Callable[[K, V], KR],
        windows: Callable[[V, VO], VR],
        joined: Named | str | None = None,
        *,
        with_key: Literal[False] = False,
    ) -> KStream[K, VR]: ...

    @overload
    def join(
        self,
        other: GlobalKTable[KR, VO],
        joiner: Callable[[K, V], KR],
        windows: Callable[[K, V, VO], VR],
        joined: Named | str | None = None,
        *,
        with_key: Literal[True],
    ) -> KStream[K, VR]: ...

    def join(
        self,
        other: KStream[Any, Any] | KTable[Any, Any] | GlobalKTable[Any, Any],
        joiner: Callable[..., Any],
        windows: JoinWindows | Joined | Callable[..., Any] | None = None,
        joined: Joined | StreamJoined | Named | str | None = None,
        *,
        with_key: bool = False,
    ) -> KStream[Any, Any]:
        """Inner join with a KTable (``join(table, joiner[, Joined])``), with another KStream
        within ``windows`` (``join(stream, joiner, JoinWindows[, StreamJoined])``), or with a
        GlobalKTable (``join(global_table, key_selector, joiner[, named])``: ``key_selector(key,
        value)`` gives the table key to look up; no repartition).
        ``joiner(this_value, other_value)`` makes the result value; with ``with_key``,
        ``joiner(key, this_value, other_value)`` (Kafka's ValueJoinerWithKey; the key is this
        stream's record key, for a GlobalKTable too)."""
        return self._join(
            other, joiner, windows, joined, left_outer=False, right_outer=False, with_key=with_key
        )

    @overload
    def left_join(
        self,
        other: KTable[K, VO],
        joiner: Callable[[V, VO | None], VR],
        windows: Joined | None = None,
        *,
        with_key: Literal[False] = False,
    ) -> KStream[K, VR]: ...

    @overload
    def left_join(
        self,
        other: KTable[K, VO],
        joiner: Callable[[K, V, VO | None], VR],
        windows: Joined | None = None,
        *,
        with_key: Literal[True],
    ) -> KStream[K, VR]: ...

    @overload
    def left_join(
        self,
        other: KTable[K, VO],
        joiner: Callable[[V, VO | None], VR],
        windows: None = None,
        joined: Joined | None = None,
        *,
        with_key: Literal[False] = False,
    ) -> KStream[K, VR]: ...

    @overload
    def left_join(
        self,
        other: KTable[K, VO],
        joiner: Callable[[K, V, VO | None], VR],
        windows: None = None,
        joined: Joined | None = None,
        *,
        with_key: Literal[True],
    ) -> KStream[K, VR]: ...

    @overload
    def left_join(
        self,
        other: KStream[K, VO],
        joiner: Callable[[V, VO | None], VR],
        windows: JoinWindows,
        joined: StreamJoined | None = None,
        *,
        with_key: Literal[False] = False,
    ) -> KStream[K, VR]: ...

    @overload
    def left_join(
        self,
        other: KStream[K, VO],
        joiner: Callable[[K, V, VO | None], VR],
        windows: JoinWindows,
        joined: StreamJoined | None = None,
        *,
        with_key: Literal[True],
    ) -> KStream[K, VR]: ...

    @overload
    def left_join(
        self,
        other: GlobalKTable[KR, VO],
        joiner: Callable[[K, V], KR],
        windows: Callable[[V, VO | None], VR],
        joined: Named | str | None = None,
        *,
        with_key: Literal[False] = False,
    ) -> KStream[K, VR]: ...

    @overload
    def left_join(
        self,
        other: GlobalKTable[KR, VO],
        joiner: Callable[[K, V], KR],
        windows: Callable[[K, V, VO | None], VR],
        joined: Named | str | None = None,
        *,
        with_key: Literal[True],
    ) -> KStream[K, VR]: ...

    def left_join(
        self,
        other: KStream[Any, Any] | KTable[Any, Any] | GlobalKTable[Any, Any],
        joiner: Callable[..., Any],
        windows: JoinWindows | Joined | Callable[..., Any] | None = None,
        joined: Joined | StreamJoined | Named | str | None = None,
        *,
        with_key: bool = False,
    ) -> KStream[Any, Any]:
        """Like ``join``, but every record of this stream yields a result: unmatched ones are
        joined with None (for stream-stream joins, once their window has closed)."""
        return self._join(
            other, joiner, windows, joined, left_outer=True, right_outer=False, with_key=with_key
        )

    @overload
    def outer_join(
        self,
        other: KStream[K, VO],
        joiner: Callable[[V | None, VO | None], VR],
        windows: JoinWindows,
        joined: StreamJoined | None = None,
        *,
        with_key: Literal[False] = False,
    ) -> KStream[K, VR]: ...

    @overload
    def outer_join(
        self,
        other: KStream[K, VO],
        joiner: Callable[[K, V | None, VO | None], VR],
        windows: JoinWindows,
        joined: StreamJoined | None = None,
        *,
        with_key: Literal[True],
    ) -> KStream[K, VR]: ...

    def outer_join(
        self,
        other: KStream[K, VO],
        joiner: Callable[..., VR],
        windows: JoinWindows,
        joined: StreamJoined | None = None,
        *,
        with_key: bool = False,
    ) -> KStream[K, VR]:
        """Windowed outer join of two streams: unmatched records of either side are joined with
        None once their window has closed (``joiner(key, left, right)`` with ``with_key``)."""
        if not isinstance(other, KStream):
            raise TypeError(f"outer_join() takes a KStream and JoinWindows, got {other!r}.")
        return self._join(
            other, joiner, windows, joined, left_outer=True, right_outer=True, with_key=with_key
        )

    def _join(
        self,
        other: Any,
        joiner: Callable[..., Any],
        windows: Any,
        joined: Any,
        *,
        left_outer: bool,
        right_outer: bool,
        with_key: bool,
    ) -> KStream[Any, Any]:
        from kstreams.topology.dsl.global_ktable import GlobalKTable, stream_global_table_join
        from kstreams.topology.dsl.ktable import KTable

        if isinstance(other, GlobalKTable):
            # join(global_table, key_selector, joiner[, named]): the arguments shift by one.
            _check_joiner_arity(windows, with_key)
            return stream_global_table_join(self, other, joiner, windows, joined, left_outer, with_key)
        _check_joiner_arity(joiner, with_key)
        if isinstance(other, KTable):
            if isinstance(windows, Joined) and joined is None:
                windows, joined = None, windows
            if windows is not None or not (joined is None or isinstance(joined, Joined)):
                raise TypeError(
                    "A stream-table join takes (table, joiner[, Joined]); JoinWindows apply only to "
                    "stream-stream joins."
                )
            return self._stream_table_join(other, joiner, joined or Joined(), left_outer, with_key)
        if isinstance(other, KStream):
            if not isinstance(windows, JoinWindows):
                raise TypeError(
                    "A stream-stream join needs JoinWindows: join(other, joiner, "
                    "JoinWindows.of_time_difference_with_no_grace(...))."
                )
            if joined is not None and not isinstance(joined, StreamJoined):
                raise TypeError(f"A stream-stream join takes a StreamJoined, got {joined!r}.")
            from kstreams.topology.dsl.stream_joins import stream_stream_join

            return stream_stream_join(
                self, other, joiner, windows, joined or StreamJoined(), left_outer, right_outer, with_key
            )
        raise TypeError(f"A KStream joins a KStream, a KTable or a GlobalKTable, got {other!r}.")

    def _stream_table_join(
        self,
        table: KTable[Any, Any],
        joiner: Callable[..., Any],
        joined: Joined,
        left: bool,
        with_key: bool,
    ) -> KStream[Any, Any]:
        stream = self
        if self._repartition_required:
            stream = self._repartition_for_join(
                joined.name or self._name, joined.key_serde, joined.value_serde
            )
        name = self._builder.name_or_generate(joined.name, naming.LEFTJOIN if left else naming.JOIN)
        getter = table._value_getter_supplier()
        key_serde = joined.key_serde if joined.key_serde is not None else stream._key_serde
        if joined.grace_period_ms is None:
            supplier = StreamTableJoinSupplier(getter, joiner, left, with_key)
            buffer_builder = None
        else:
            value_serde = joined.value_serde if joined.value_serde is not None else stream._value_serde
            supplier, buffer_builder = self._grace_period_join(
                name, table, getter, joiner, left, with_key, joined.grace_period_ms, key_serde, value_serde
            )
        self._builder.add_processor(name, supplier, stream._name)
        if left:
            # A left join joins a record with a null key (KIP-962): the repartition it reads,
            # and any upstream, let such records through.
            self._builder.relax_null_keys(stream._name)
        if buffer_builder is not None:
            self._builder.add_store(buffer_builder, name)  # first, as Kafka's describe() lists it
        self._builder.connect_stores(name, getter.store_names())
        sources = stream._source_nodes | table._source_nodes
        self._builder.copartition(sources)
        return KStream(self._builder, name, key_serde, None, False, sources)

    def _grace_period_join(
        self,
        name: str,
        table: KTable[Any, Any],
        getter: Any,
        joiner: Callable[..., Any],
        left: bool,
        with_key: bool,
        grace_ms: int,
        key_serde: Any,
        value_serde: Any,
    ) -> tuple[StreamTableJoinSupplier, Any]:
        """The processor and buffer store of a stream-table join with a grace period (KIP-923),
        after Kafka's checks: the table is versioned (kept in a versioned store, or a filter or
        map_values of such a table that reads through to it), and that store keeps history for
        the grace period."""
        if not getter.is_versioned():
            raise TopologyException(
                f"KTable must be versioned to use a grace period in a stream table join: join {name} "
                f"has a grace period of {grace_ms} ms, and table {table._name} neither is kept in a "
                "versioned store nor reads through to one (a filter or map_values of a versioned table "
                "does). Materialize it with Stores.persistent_versioned_key_value_store(...), or drop "
                "the grace period."
            )
        store_builders = self._builder.topology.store_builders
        for store_name in getter.store_names():
            retention = getattr(
                getattr(store_builders.get(store_name), "supplier", None), "history_retention_ms", None
            )
            if retention is not None and grace_ms > retention:
                raise TopologyException(
                    f"History retention must be at least grace period: join {name} has a grace period "
                    f"of {grace_ms} ms, and versioned store {store_name} keeps {retention} ms of history. "
                    "Shorten the grace period or lengthen the history retention."
                )
        serdes = (BufferKeySerde(key_serde), StreamRecordSerde(value_serde))
        buffer_name = f"{name}-Buffer"
        # In RocksDB and logged, as Kafka's RocksDBTimeOrderedKeyValueBuffer.
        buffer_builder = plain_key_value_store_builder(
            buffer_name, serdes[0], serdes[1], store_type=StoreType.ROCKS_DB
        )
        supplier = StreamTableJoinSupplier(
            getter,
            joiner,
            left,
            with_key,
            grace_ms=grace_ms,
            buffer_store_name=buffer_name,
            buffer_serdes=serdes,
        )
        return supplier, buffer_builder


def _named_before_stores(
    store_names: tuple[Any, ...], named: Named | str | None, operation: str
) -> tuple[Named | str | None, tuple[str, ...]]:
    """The processor name and the store names of ``process``/``process_values``: a Named may
    lead the store names (Kafka's overload) or come as ``named=``, not both."""
    _, leading, names = leading_options(store_names, operation, allow_materialized=False)
    if leading is not None:
        if named is not None:
            raise TypeError(f"{operation} got two names, {leading!r} and {named!r}; pass one.")
        named = leading
    return named, names


def _check_joiner_arity(joiner: Any, with_key: bool) -> None:
    """A joiner that cannot take the arguments it will get fails at build, not at its first
    record: Kafka tells a ValueJoinerWithKey from a ValueJoiner by its type, Python by
    ``with_key``, which a program ported from Java easily misses."""
    if not callable(joiner):
        return  # the join's own checks say what was expected
    try:
        signature = inspect.signature(joiner)
    except (TypeError, ValueError):  # builtins without a signature: trust them
        return
    arguments = "(key, value, other_value)" if with_key else "(value, other_value)"
    try:
        signature.bind(*range(3 if with_key else 2))
    except TypeError:
        hint = (
            "without with_key=True a joiner gets (value, other_value)"
            if with_key
            else "a joiner taking (key, value, other_value) (Kafka's ValueJoinerWithKey) needs with_key=True"
        )
        raise TypeError(f"The joiner {joiner!r} cannot take {arguments}: {hint}.") from None
