package io.kstreams.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.BranchedKStream;
import org.apache.kafka.streams.kstream.CogroupedKStream;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;

/**
 * Builds a Kafka Streams topology from a spec: a list of nodes, each {"id", "op", "in", ...} with
 * its value type "vtype" ("s" String, "l" Long) filled in by tests/oracle/spec.py, which documents
 * the ops. tests/oracle/topology.py builds the same spec with kstreams' DSL.
 */
@SuppressWarnings({"unchecked", "rawtypes"})
final class SpecTopology {
    private static final Serde<String> STRING = Serdes.String();

    /** What a node gives: a stream, a table, a windowed table, a grouped stream or table. */
    private record Handle(String kind, Object obj, String vtype) {}

    private final StreamsBuilder builder;
    private final Map<String, Handle> nodes = new HashMap<>();

    private SpecTopology(StreamsBuilder builder) {
        this.builder = builder;
    }

    static Topology build(JsonNode spec) {
        return build(spec, new StreamsBuilder());
    }

    /** The spec built by {@code builder} (one made with a TopologyConfig, say). */
    static Topology build(JsonNode spec, StreamsBuilder builder) {
        SpecTopology topology = new SpecTopology(builder);
        for (JsonNode node : spec.get("nodes")) {
            topology.add(node);
        }
        return topology.builder.build();
    }

    static Serde serde(String vtype) {
        return "l".equals(vtype) ? Serdes.Long() : Serdes.String();
    }

    private Handle in(JsonNode node, String field) {
        String id = node.get(field).asText();
        Handle handle = nodes.get(id);
        if (handle == null) {
            throw new IllegalArgumentException("node " + node.get("id").asText() + " reads unknown node " + id);
        }
        return handle;
    }

    private static String text(JsonNode node, String field) {
        JsonNode value = node.get(field);
        return value == null || value.isNull() ? null : value.asText();
    }

    private static Duration ms(JsonNode node, String field) {
        return Duration.ofMillis(node.get(field).asLong());
    }

    private static <S extends org.apache.kafka.streams.processor.StateStore> Materialized materialized(
            String store, String vtype) {
        Materialized mat = store == null ? Materialized.with(STRING, serde(vtype)) : Materialized.as(store);
        return mat.withKeySerde(STRING).withValueSerde(serde(vtype));
    }

    /** The node's store: an LRU map of at most "lru" keys when the node has one, else as materialized(). */
    private static Materialized materialized(JsonNode node, String store, String vtype) {
        if (!node.hasNonNull("lru")) {
            return materialized(store, vtype);
        }
        Materialized mat = Materialized.as(Stores.lruMap(store, node.get("lru").asInt()));
        return mat.withKeySerde(STRING).withValueSerde(serde(vtype));
    }

    private void add(JsonNode node) {
        String id = node.get("id").asText();
        String op = node.get("op").asText();
        String vtype = text(node, "vtype");
        String fn = text(node, "fn");
        String store = text(node, "store");
        switch (op) {
            case "stream" -> nodes.put(id, new Handle("stream",
                    builder.stream(text(node, "topic"), Consumed.with(STRING, STRING)), "s"));
            case "table" -> {
                Materialized mat = materialized(node, store, "s");
                if (node.hasNonNull("versioned")) {
                    mat = Materialized.as(Stores.persistentVersionedKeyValueStore(store, ms(node, "versioned")));
                    mat = mat.withKeySerde(STRING).withValueSerde(STRING);
                }
                nodes.put(id, new Handle("table", builder.table(text(node, "topic"),
                        Consumed.with(STRING, STRING), mat), "s"));
            }
            case "global_table" -> nodes.put(id, new Handle("global", store == null
                    ? builder.globalTable(text(node, "topic"), Consumed.with(STRING, STRING))
                    : builder.globalTable(text(node, "topic"), Consumed.with(STRING, STRING),
                            (Materialized<String, String, KeyValueStore<Bytes, byte[]>>) materialized(store, "s")),
                    "s"));
            case "fk_join", "fk_left_join" -> {
                KTable t = (KTable) in(node, "in").obj;
                KTable other = (KTable) in(node, "other").obj;
                var extractor = SpecFunctions.foreignKeyExtractor(text(node, "extractor"));
                var joiner = SpecFunctions.joiner(fn);
                boolean left = op.equals("fk_left_join");
                KTable out;
                if (store == null) {
                    out = left ? t.leftJoin(other, extractor, joiner) : t.join(other, extractor, joiner);
                } else {
                    Materialized mat = materialized(store, vtype);
                    out = left ? t.leftJoin(other, extractor, joiner, mat) : t.join(other, extractor, joiner, mat);
                }
                nodes.put(id, new Handle("table", out, vtype));
            }
            case "process_values", "process" -> {
                builder.addStateStore(Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore(store), STRING,
                        serde(vtype)));
                KStream s = (KStream) in(node, "in").obj;
                KStream out = op.equals("process_values")
                        ? s.processValues(SpecProcessors.fixedKey(fn, store), store)
                        : s.process(SpecProcessors.processor(fn, store), store);
                nodes.put(id, new Handle("stream", out, vtype));
            }
            case "filter", "filter_not" -> {
                Handle h = in(node, "in");
                boolean not = op.equals("filter_not");
                Object out;
                if (h.kind.equals("stream")) {
                    KStream s = (KStream) h.obj;
                    out = not ? s.filterNot(SpecFunctions.predicate(fn)) : s.filter(SpecFunctions.predicate(fn));
                } else {
                    KTable t = (KTable) h.obj;
                    out = not ? t.filterNot(SpecFunctions.predicate(fn)) : t.filter(SpecFunctions.predicate(fn));
                }
                nodes.put(id, new Handle(h.kind, out, h.vtype));
            }
            case "map_values" -> {
                Handle h = in(node, "in");
                Object out = h.kind.equals("stream")
                        ? ((KStream) h.obj).mapValues(SpecFunctions.valueMapper(fn))
                        : ((KTable) h.obj).mapValues(SpecFunctions.valueMapper(fn));
                nodes.put(id, new Handle(h.kind, out, vtype));
            }
            case "map" -> nodes.put(id, new Handle("stream",
                    ((KStream) in(node, "in").obj).map(SpecFunctions.keyValueMapper(fn)), vtype));
            case "select_key" -> nodes.put(id, new Handle("stream",
                    ((KStream) in(node, "in").obj).selectKey(SpecFunctions.keyMapper(fn)), vtype));
            case "flat_map_values" -> nodes.put(id, new Handle("stream",
                    ((KStream) in(node, "in").obj).flatMapValues(SpecFunctions.flatValueMapper(fn)), vtype));
            case "flat_map" -> nodes.put(id, new Handle("stream",
                    ((KStream) in(node, "in").obj).flatMap(SpecFunctions.flatKeyValueMapper(fn)), vtype));
            case "merge" -> nodes.put(id, new Handle("stream",
                    ((KStream) in(node, "in").obj).merge((KStream) in(node, "other").obj), vtype));
            case "split" -> split(id, node, in(node, "in"));
            case "repartition" -> nodes.put(id, new Handle("stream",
                    ((KStream) in(node, "in").obj).repartition(Repartitioned.with(STRING, serde(vtype))), vtype));
            case "to_table" -> nodes.put(id, new Handle("table",
                    ((KStream) in(node, "in").obj).toTable(materialized(node, store, vtype)), vtype));
            case "group_by_key" -> nodes.put(id, new Handle("grouped",
                    ((KStream) in(node, "in").obj).groupByKey(Grouped.with(STRING, serde(vtype))), vtype));
            case "group_by" -> {
                Handle h = in(node, "in");
                if (h.kind.equals("stream")) {
                    nodes.put(id, new Handle("grouped", ((KStream) h.obj).groupBy(
                            SpecFunctions.keyMapper(fn), Grouped.with(STRING, serde(vtype))), vtype));
                } else {
                    nodes.put(id, new Handle("gtable", ((KTable) h.obj).groupBy(
                            SpecFunctions.keyValueMapper(fn), Grouped.with(STRING, serde(vtype))), vtype));
                }
            }
            case "windowed_by" -> nodes.put(id, windowedBy(node, in(node, "in")));
            case "count", "reduce", "aggregate" -> nodes.put(id, aggregate(op, node, in(node, "in"), fn, store, vtype));
            case "cogroup" -> nodes.put(id, cogroup(node, store, vtype));
            case "suppress" -> {
                Handle h = in(node, "in");
                nodes.put(id, new Handle(h.kind, ((KTable) h.obj).suppress(suppressed(node)), h.vtype));
            }
            case "to_stream" -> {
                Handle h = in(node, "in");
                KStream out = h.kind.equals("wtable")
                        ? ((KTable<Windowed<String>, Object>) h.obj).toStream((wk, v) ->
                                wk.key() + "@" + wk.window().start() + "/" + wk.window().end())
                        : ((KTable) h.obj).toStream();
                nodes.put(id, new Handle("stream", out, h.vtype));
            }
            case "join", "left_join", "outer_join" -> nodes.put(id, join(op, node, store, vtype));
            case "to" -> ((KStream) in(node, "in").obj).to(text(node, "topic"),
                    Produced.with(STRING, serde(in(node, "in").vtype)));
            default -> throw new IllegalArgumentException("unknown op " + op);
        }
    }

    private void split(String id, JsonNode node, Handle h) {
        BranchedKStream branched = ((KStream) h.obj).split(Named.as(id + "-"));
        int i = 1;
        for (JsonNode pred : node.get("preds")) {
            branched = branched.branch(SpecFunctions.predicate(pred.asText()), Branched.as(String.valueOf(i++)));
        }
        Map<String, KStream> branches = node.get("default").asBoolean()
                ? branched.defaultBranch(Branched.as("0"))
                : branched.noDefaultBranch();
        for (Map.Entry<String, KStream> e : branches.entrySet()) {
            nodes.put(id + ":" + e.getKey().substring(id.length() + 1), new Handle("stream", e.getValue(), h.vtype));
        }
    }

    private static Object windows(JsonNode w) {
        return switch (w.get("type").asText()) {
            case "tumbling" -> TimeWindows.ofSizeAndGrace(ms(w, "size"), ms(w, "grace"));
            case "hopping" -> TimeWindows.ofSizeAndGrace(ms(w, "size"), ms(w, "grace")).advanceBy(ms(w, "advance"));
            case "sliding" -> SlidingWindows.ofTimeDifferenceAndGrace(ms(w, "diff"), ms(w, "grace"));
            case "session" -> SessionWindows.ofInactivityGapAndGrace(ms(w, "gap"), ms(w, "grace"));
            default -> throw new IllegalArgumentException("unknown windows " + w);
        };
    }

    private Handle windowedBy(JsonNode node, Handle h) {
        Object w = windows(node.get("windows"));
        KGroupedStream g = (KGroupedStream) h.obj;
        boolean onClose = "close".equals(text(node, "emit"));
        Object out;
        if (w instanceof TimeWindows tw) {
            TimeWindowedKStream s = g.windowedBy(tw);
            out = onClose ? s.emitStrategy(EmitStrategy.onWindowClose()) : s;
        } else if (w instanceof SlidingWindows sw) {
            TimeWindowedKStream s = g.windowedBy(sw);
            out = onClose ? s.emitStrategy(EmitStrategy.onWindowClose()) : s;
        } else {
            SessionWindowedKStream s = g.windowedBy((SessionWindows) w);
            out = onClose ? s.emitStrategy(EmitStrategy.onWindowClose()) : s;
        }
        return new Handle("wgrouped", out, h.vtype);
    }

    private Handle aggregate(String op, JsonNode node, Handle h, String fn, String store, String vtype) {
        Materialized mat = materialized(node, store, vtype);
        Object g = h.obj;
        Object out;
        if (g instanceof KGroupedStream s) {
            out = switch (op) {
                case "count" -> s.count(mat);
                case "reduce" -> s.reduce(SpecFunctions.reducer(fn), mat);
                default -> s.aggregate(SpecFunctions.initializer(fn), SpecFunctions.aggregator(fn), mat);
            };
            return new Handle("table", out, vtype);
        }
        if (g instanceof KGroupedTable t) {
            out = switch (op) {
                case "count" -> t.count(mat);
                case "reduce" -> t.reduce(SpecFunctions.tableReducer(fn, false), SpecFunctions.tableReducer(fn, true), mat);
                default -> t.aggregate(SpecFunctions.initializer(fn), SpecFunctions.tableAggregator(fn, false),
                        SpecFunctions.tableAggregator(fn, true), mat);
            };
            return new Handle("table", out, vtype);
        }
        if (g instanceof TimeWindowedKStream w) {
            out = switch (op) {
                case "count" -> w.count(mat);
                case "reduce" -> w.reduce(SpecFunctions.reducer(fn), mat);
                default -> w.aggregate(SpecFunctions.initializer(fn), SpecFunctions.aggregator(fn), mat);
            };
            return new Handle("wtable", out, vtype);
        }
        SessionWindowedKStream w = (SessionWindowedKStream) g;
        out = switch (op) {
            case "count" -> w.count(mat);
            case "reduce" -> w.reduce(SpecFunctions.reducer(fn), mat);
            default -> w.aggregate(SpecFunctions.initializer(fn), SpecFunctions.aggregator(fn),
                    SpecFunctions.merger(fn), mat);
        };
        return new Handle("wtable", out, vtype);
    }

    private Handle cogroup(JsonNode node, String store, String vtype) {
        JsonNode ins = node.get("ins");
        JsonNode fns = node.get("fns");
        CogroupedKStream c = ((KGroupedStream) nodes.get(ins.get(0).asText()).obj)
                .cogroup(SpecFunctions.aggregator(fns.get(0).asText()));
        for (int i = 1; i < ins.size(); i++) {
            c = c.cogroup((KGroupedStream) nodes.get(ins.get(i).asText()).obj,
                    SpecFunctions.aggregator(fns.get(i).asText()));
        }
        String first = fns.get(0).asText();
        Materialized mat = materialized(store, vtype);
        JsonNode w = node.get("windows");
        if (w == null || w.isNull()) {
            return new Handle("table", c.aggregate(SpecFunctions.initializer(first), mat), vtype);
        }
        Object windows = windows(w);
        Object out;
        if (windows instanceof TimeWindows tw) {
            out = c.windowedBy(tw).aggregate(SpecFunctions.initializer(first), mat);
        } else if (windows instanceof SlidingWindows sw) {
            out = c.windowedBy(sw).aggregate(SpecFunctions.initializer(first), mat);
        } else {
            out = c.windowedBy((SessionWindows) windows).aggregate(SpecFunctions.initializer(first),
                    SpecFunctions.merger(first), mat);
        }
        return new Handle("wtable", out, vtype);
    }

    private static Suppressed suppressed(JsonNode node) {
        if ("close".equals(text(node, "mode"))) {
            return Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded());
        }
        JsonNode maxRecords = node.get("max_records");
        JsonNode maxBytes = node.get("max_bytes");
        boolean records = maxRecords != null && !maxRecords.isNull();
        boolean bytes = maxBytes != null && !maxBytes.isNull();
        Suppressed.BufferConfig buffer = Suppressed.BufferConfig.unbounded();
        if (records) {
            buffer = buffer.withMaxRecords(maxRecords.asLong());
        }
        if (bytes) {
            buffer = buffer.withMaxBytes(maxBytes.asLong());
        }
        if (records || bytes) {
            buffer = buffer.emitEarlyWhenFull();
        }
        return Suppressed.untilTimeLimit(ms(node, "ms"), buffer);
    }

    private Handle join(String op, JsonNode node, String store, String vtype) {
        Handle left = in(node, "in");
        Handle right = in(node, "other");
        var joiner = SpecFunctions.joiner(text(node, "fn"));
        if (right.kind.equals("global")) {
            KStream s = (KStream) left.obj;
            GlobalKTable g = (GlobalKTable) right.obj;
            var keyFn = SpecFunctions.keyMapper(text(node, "key_fn"));
            KStream out = op.equals("join") ? s.join(g, keyFn, joiner) : s.leftJoin(g, keyFn, joiner);
            return new Handle("stream", out, vtype);
        }
        if (left.kind.equals("stream") && right.kind.equals("table")) {
            KStream s = (KStream) left.obj;
            Joined joined = Joined.with(STRING, serde(left.vtype), serde(right.vtype));
            if (node.hasNonNull("grace")) {
                joined = joined.withGracePeriod(ms(node, "grace"));
            }
            KStream out = op.equals("join")
                    ? s.join((KTable) right.obj, joiner, joined)
                    : s.leftJoin((KTable) right.obj, joiner, joined);
            return new Handle("stream", out, vtype);
        }
        if (left.kind.equals("stream")) {
            JsonNode w = node.get("windows");
            JoinWindows windows = JoinWindows.ofTimeDifferenceAndGrace(ms(w, "diff"), ms(w, "grace"));
            if (w.hasNonNull("before")) {
                windows = windows.before(ms(w, "before"));
            }
            if (w.hasNonNull("after")) {
                windows = windows.after(ms(w, "after"));
            }
            StreamJoined joined = StreamJoined.with(STRING, serde(left.vtype), serde(right.vtype));
            KStream s = (KStream) left.obj;
            KStream other = (KStream) right.obj;
            KStream out = switch (op) {
                case "join" -> s.join(other, joiner, windows, joined);
                case "left_join" -> s.leftJoin(other, joiner, windows, joined);
                default -> s.outerJoin(other, joiner, windows, joined);
            };
            return new Handle("stream", out, vtype);
        }
        KTable t = (KTable) left.obj;
        KTable other = (KTable) right.obj;
        KTable out;
        if (store == null) {
            out = switch (op) {
                case "join" -> t.join(other, joiner);
                case "left_join" -> t.leftJoin(other, joiner);
                default -> t.outerJoin(other, joiner);
            };
        } else {
            Materialized mat = materialized(store, vtype);
            out = switch (op) {
                case "join" -> t.join(other, joiner, mat);
                case "left_join" -> t.leftJoin(other, joiner, mat);
                default -> t.outerJoin(other, joiner, mat);
            };
        }
        // A join of two windowed tables is a windowed table (its keys are the windows).
        return new Handle(left.kind, out, vtype);
    }
}
