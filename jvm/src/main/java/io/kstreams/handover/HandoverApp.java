package io.kstreams.handover;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;

/**
 * The Java side of the state hand-over test (tests/integration/test_java_handover.py): a Kafka
 * Streams application whose state and internal topics a kstreams application with the same
 * application.id takes over, and the reverse. The test's {@code handover_topology} builds the
 * same topology with kstreams; both leave every name to Kafka's generated ones.
 * {@link HandoverTablesApp} is the second application of the test (sessions and table joins).
 *
 * <p>Topics (String keys and values unless said): {@code in} (key: user, value: page),
 * {@code profiles} (key: user, value: a profile, the table of the join), and the outputs
 * {@code counts} (records per user, Long values), {@code windowed} (the users of each page per
 * 10-second window, grace 5 s, keyed {@code page@start}), {@code final} (the same windows
 * suppressed until they close) and {@code joined} ({@code page/profile}).
 *
 * <p>Arguments: bootstrap servers, application.id, state.dir, and a prefix of every topic name
 * (optional, so that tests sharing a broker do not share topics). Prints the topology description to
 * stderr, {@code RUNNING} on stdout once the client runs; a line {@code close} (or the end of
 * stdin) closes it, leaving the group, and it prints {@code CLOSED}.
 */
public final class HandoverApp {
    private HandoverApp() {}

    public static Topology topology(String prefix) {
        Serde<String> s = Serdes.String();
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> in = builder.stream(prefix + "in", Consumed.with(s, s));
        KTable<String, String> profiles = builder.table(prefix + "profiles", Consumed.with(s, s));
        in.groupByKey(Grouped.with(s, s)).count().toStream().to(prefix + "counts", Produced.with(s, Serdes.Long()));
        KTable<Windowed<String>, String> windowed = in
            .map((user, page) -> KeyValue.pair(page, user))
            .groupByKey(Grouped.with(s, s))
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(10), Duration.ofSeconds(5)))
            .aggregate(() -> "", (page, user, users) -> users.isEmpty() ? user : users + "," + user,
                Materialized.with(s, s));
        windowed.toStream()
            .map((window, users) -> KeyValue.pair(window.key() + "@" + window.window().start(), users))
            .to(prefix + "windowed", Produced.with(s, s));
        windowed.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
            .toStream()
            .map((window, users) -> KeyValue.pair(window.key() + "@" + window.window().start(), users))
            .to(prefix + "final", Produced.with(s, s));
        in.join(profiles, (page, profile) -> page + "/" + profile).to(prefix + "joined", Produced.with(s, s));
        return builder.build();
    }

    public static void main(String[] args) throws Exception {
        run(topology(args.length > 3 ? args[3] : ""), args);
    }

    /**
     * Runs {@code topology} as described in the class comment (the arguments are main's) and exits
     * the JVM: 0 when the client closed cleanly.
     */
    static void run(Topology topology, String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[2]);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 500);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        System.err.println(topology.describe());
        KafkaStreams streams = new KafkaStreams(topology, props);
        CountDownLatch running = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.err.println("state " + before + " -> " + now);
            if (now == KafkaStreams.State.RUNNING) {
                running.countDown();
            }
        });
        streams.start();
        if (!running.await(120, TimeUnit.SECONDS)) {
            System.out.println("NOT RUNNING " + streams.state());
        } else {
            System.out.println("RUNNING");
        }
        System.out.flush();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = stdin.readLine()) != null && !line.trim().equals("close")) {
            // Only "close" (or the end of stdin) means anything.
        }
        boolean closed = streams.close(new KafkaStreams.CloseOptions().leaveGroup(true).timeout(Duration.ofSeconds(60)));
        System.out.println(closed ? "CLOSED" : "NOT CLOSED");
        System.out.flush();
        System.exit(closed ? 0 : 1);
    }
}
