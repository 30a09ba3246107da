"""Wiring a KStream-KStream windowed join into the topology (Kafka's KStreamImplJoin).

Each side gets a "windowed" processor that keeps its records in a window store, and a join
processor that looks the other side's store up; a pass-through merges both sides' results. Left
and outer joins add a shared key-value store for records waiting for their window to close.
Names follow Kafka: ``KSTREAM-WINDOWED-``, ``KSTREAM-JOINTHIS-``/``KSTREAM-OUTERTHIS-``,
``KSTREAM-JOINOTHER-``/``KSTREAM-OUTEROTHER-``, ``KSTREAM-MERGE-``, stores
``<join processor>-store`` and ``KSTREAM-OUTERSHARED-<n>-store``; ``StreamJoined.with_name`` and
``with_store_name`` replace them with "<name>-this-join", "<store name>-this-join-store", etc.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kstreams.errors import StreamsException
from kstreams.topology.dsl import naming
from kstreams.topology.dsl.kstream import KStream
from kstreams.topology.dsl.materialize import plain_key_value_store_builder, window_store_builder
from kstreams.topology.dsl.parameters import StoreType, StreamJoined
from kstreams.topology.dsl.processors.stateless import PassThroughSupplier
from kstreams.topology.dsl.processors.stream_join import (
    JoinTimeTrackers,
    JoinWindowSupplier,
    LeftOrRightValueListSerde,
    StreamStreamJoinSupplier,
    TimestampedKeyAndJoinSideSerde,
)
from kstreams.topology.dsl.windows import JoinWindows

__all__ = ["stream_stream_join"]

logger = logging.getLogger(__name__)


def stream_stream_join(
    this: KStream[Any, Any],
    other: KStream[Any, Any],
    joiner: Callable[..., Any],
    windows: JoinWindows,
    joined: StreamJoined,
    left_outer: bool,
    right_outer: bool,
    with_key: bool = False,
) -> KStream[Any, Any]:
    """Join ``this`` with ``other`` within ``windows``; repartitions either side whose key may
    have changed (topics "<name>-left-repartition"/"<name>-right-repartition" with a
    ``StreamJoined`` name, else named after the side's processor)."""
    builder = this._builder
    if this._repartition_required:
        prefix = f"{joined.name}-left" if joined.name else this._name
        this = this._repartition_for_join(prefix, joined.key_serde, joined.value_serde)
    if other._repartition_required:
        prefix = f"{joined.name}-right" if joined.name else other._name
        other = other._repartition_for_join(prefix, joined.key_serde, joined.other_value_serde)
    sources = this._source_nodes | other._source_nodes
    builder.copartition(sources)
    if left_outer or right_outer:
        # An outer side joins a record with a null key at once (KIP-962): the repartitions
        # upstream let such records through.
        builder.relax_null_keys(this._name, other._name)

    base = joined.name
    this_windowed = builder.suffixed_or_generate(base, "-this-windowed", naming.WINDOWED)
    other_windowed = builder.suffixed_or_generate(base, "-other-windowed", naming.WINDOWED)
    this_prefix = naming.OUTERTHIS if right_outer else naming.JOINTHIS
    this_generated = builder.new_processor_name(this_prefix)
    other_generated = builder.new_processor_name(naming.OUTEROTHER if left_outer else naming.JOINOTHER)
    this_suffix = "-outer-this-join" if right_outer else "-this-join"
    other_suffix = "-outer-other-join" if left_outer else "-other-join"
    join_this = f"{base}{this_suffix}" if base else this_generated
    join_other = f"{base}{other_suffix}" if base else other_generated
    merge = builder.suffixed_or_generate(base, "-merge", naming.MERGE)

    key_serde = joined.key_serde if joined.key_serde is not None else this._key_serde
    this_value_serde = joined.value_serde if joined.value_serde is not None else this._value_serde
    other_value_serde = (
        joined.other_value_serde if joined.other_value_serde is not None else other._value_serde
    )
    retention_ms = windows.size() + windows.grace_ms
    store_options: dict[str, Any] = {
        "store_type": joined.store_type,
        "logging_enabled": joined.logging_enabled,
        "log_config": joined.log_config,
    }

    def side_store(supplier: Any, suffix: str, generated: str, value_serde: Any) -> tuple[str, Any]:
        """A side's window store: its name and builder."""
        if supplier is not None:
            # As Kafka builds a supplier's store: logged with the default topic config
            # (StreamJoined's logging settings are for the stores the join names itself).
            name = supplier.name
            return name, window_store_builder(
                name,
                supplier.retention_ms,
                supplier.window_size_ms,
                key_serde,
                value_serde,
                supplier=supplier,
            )
        name = (f"{joined.store_name}{suffix}" if joined.store_name else generated) + "-store"
        # Each side keeps every record of the join window: duplicates retained.
        return name, window_store_builder(
            name,
            retention_ms,
            windows.size(),
            key_serde,
            value_serde,
            retain_duplicates=True,
            **store_options,
        )

    this_supplier, other_supplier = joined.this_store_supplier, joined.other_store_supplier
    _check_store_suppliers(this_supplier, other_supplier, windows)
    this_store, this_store_builder = side_store(this_supplier, this_suffix, this_generated, this_value_serde)
    other_store, other_store_builder = side_store(
        other_supplier, other_suffix, other_generated, other_value_serde
    )
    outer_store: str | None = None
    outer_serdes: tuple[Any, ...] = ()
    outer_store_builder = None
    if left_outer and windows.spurious_result_fix:
        outer_suffix = "-outer-shared-join" if right_outer else "-left-shared-join"
        outer_options = dict(store_options)
        if this_supplier is not None:
            # Named after this side's store and kept where it is kept, in memory or in RocksDB
            # (Kafka's OuterStreamJoinStoreFactory).
            outer_store = f"{this_supplier.name}{outer_suffix}-store"
            persistent = getattr(this_supplier, "persistent", None)
            if isinstance(persistent, bool):
                outer_options["store_type"] = StoreType.ROCKS_DB if persistent else StoreType.IN_MEMORY
        elif joined.store_name:
            outer_store = f"{joined.store_name}{outer_suffix}-store"
        else:
            outer_store = f"{naming.OUTERSHARED}{this_generated[len(this_prefix) :]}-store"
        outer_serdes = (
            TimestampedKeyAndJoinSideSerde(key_serde),
            LeftOrRightValueListSerde(this_value_serde, other_value_serde),
        )
        # A key-value store, as Kafka's: its keys lead with the timestamp, and the join processors
        # delete what they emit or join, so it needs no retention of its own.
        outer_store_builder = plain_key_value_store_builder(
            outer_store, outer_serdes[0], outer_serdes[1], **outer_options
        )

    trackers = JoinTimeTrackers()
    common: dict[str, Any] = {
        "before_ms": windows.before_ms,
        "after_ms": windows.after_ms,
        "grace_ms": windows.grace_ms,
        "joiner": joiner,
        "with_key": with_key,
        "outer_store_name": outer_store,
        "time_trackers": trackers,
        "outer_serdes": outer_serdes,
    }
    builder.add_processor(this_windowed, JoinWindowSupplier(this_store), this._name)
    builder.add_processor(other_windowed, JoinWindowSupplier(other_store), other._name)
    builder.add_processor(
        join_this,
        StreamStreamJoinSupplier(True, other_store, outer=left_outer, **common),
        this_windowed,
    )
    builder.add_processor(
        join_other,
        StreamStreamJoinSupplier(False, this_store, outer=right_outer, **common),
        other_windowed,
    )
    builder.add_processor(merge, PassThroughSupplier(), join_this, join_other)
    builder.add_store(this_store_builder, this_windowed, join_other)
    builder.add_store(other_store_builder, other_windowed, join_this)
    if outer_store_builder is not None:
        builder.add_store(outer_store_builder, join_this, join_other)
    return KStream(builder, merge, key_serde, None, False, sources)


def _check_store_suppliers(this_supplier: Any, other_supplier: Any, windows: JoinWindows) -> None:
    """Kafka's checks of the window store suppliers a StreamJoined gives (KStreamImplJoin): distinct
    names, duplicates retained (a side may hold several records of one key and time), the join's
    window size and a retention of window size plus grace (what the join reads, no less and no
    more). A StreamsException, when the join is built, otherwise."""
    if this_supplier is not None and other_supplier is not None and this_supplier.name == other_supplier.name:
        raise StreamsException(
            f"Both store suppliers of the stream-stream join are named {this_supplier.name!r}: give "
            "StreamJoined.with_this_store_supplier and with_other_store_supplier stores of distinct names."
        )
    size, retention = windows.size(), windows.size() + windows.grace_ms
    for side, supplier in (("this", this_supplier), ("other", other_supplier)):
        if supplier is None:
            continue
        if not supplier.retain_duplicates:
            raise StreamsException(
                f"The {side} store supplier {supplier.name!r} of the stream-stream join must retain "
                "duplicates (retain_duplicates=True): a side may hold several records of one key and "
                "timestamp."
            )
        if supplier.window_size_ms != size or supplier.retention_ms != retention:
            raise StreamsException(
                f"Window settings mismatch: the {side} store supplier {supplier.name!r} has window size "
                f"{supplier.window_size_ms} ms and retention {supplier.retention_ms} ms; the JoinWindows "
                f"need window size {size} ms (before + after) and retention {retention} ms (window size "
                "+ grace)."
            )
