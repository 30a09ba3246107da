package io.kstreams.handover;

import java.time.Duration;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.TableJoined;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;

/**
 * The second application of the state hand-over test (tests/integration/test_java_handover.py,
 * whose {@code tables_topology} is the same topology in kstreams' DSL): the parts of Kafka's wire
 * formats {@link HandoverApp} does not reach. Every store and repartition topic is named, so the
 * internal topic names do not depend on generated numbering.
 *
 * <p>Topics (String keys and values unless said): {@code clicks} (key: user, value: page),
 * {@code orders} (key: order id, value {@code product#version}) and {@code products} (key:
 * product id, value: its name), and the outputs {@code sessions} (the clicks of each user's
 * session, inactivity gap 2 s, grace 1 s, keyed {@code user@start-end}, Long values, a null
 * value when a session merged into a longer one), {@code enriched} (the foreign-key join of each
 * order with its product, {@code order+product}) and {@code per-product} (orders per product: a
 * table group_by re-keying orders by product, Long values).
 *
 * <p>Arguments as {@link HandoverApp}'s.
 */
public final class HandoverTablesApp {
    static final Duration GAP = Duration.ofSeconds(2);
    static final Duration GRACE = Duration.ofSeconds(1);

    private HandoverTablesApp() {}

    public static Topology topology(String prefix) {
        Serde<String> s = Serdes.String();
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(prefix + "clicks", Consumed.with(s, s))
            .groupByKey(Grouped.with("clicks-by-user", s, s))
            .windowedBy(SessionWindows.ofInactivityGapAndGrace(GAP, GRACE))
            .count(Materialized.<String, Long, SessionStore<Bytes, byte[]>>as("click-sessions")
                .withKeySerde(s).withValueSerde(Serdes.Long()))
            .toStream()
            .map((session, clicks) -> KeyValue.pair(
                session.key() + "@" + session.window().start() + "-" + session.window().end(), clicks))
            .to(prefix + "sessions", Produced.with(s, Serdes.Long()));
        KTable<String, String> orders = builder.table(prefix + "orders", Consumed.with(s, s),
            Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("orders").withKeySerde(s).withValueSerde(s));
        KTable<String, String> products = builder.table(prefix + "products", Consumed.with(s, s),
            Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("products").withKeySerde(s).withValueSerde(s));
        orders.join(products, order -> order.split("#")[0], (order, product) -> order + "+" + product,
                TableJoined.as("orders-products"),
                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("orders-with-products")
                    .withKeySerde(s).withValueSerde(s))
            .toStream()
            .to(prefix + "enriched", Produced.with(s, s));
        orders.groupBy((id, order) -> KeyValue.pair(order.split("#")[0], order), Grouped.with("orders-by-product", s, s))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("orders-per-product")
                .withKeySerde(s).withValueSerde(Serdes.Long()))
            .toStream()
            .to(prefix + "per-product", Produced.with(s, Serdes.Long()));
        return builder.build();
    }

    public static void main(String[] args) throws Exception {
        HandoverApp.run(topology(args.length > 3 ? args[3] : ""), args);
    }
}
