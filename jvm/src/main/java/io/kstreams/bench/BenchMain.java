package io.kstreams.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * The end-to-end pipelines of bench/e2e_throughput.py, on Kafka Streams: the peer kstreams is measured
 * beside (bench/e2e_throughput.py --kafka-streams, bench/e2e_latency.py).
 *
 * <ul>
 *   <li>P1: values parsed with Jackson ({@code readTree}) by the source's value serde, keep those whose
 *       "bot" is the boolean false, map each to its "user" text, write it with the String serde.
 *   <li>P2: values parsed the same way; a count per key (store "counts", RocksDB, logged) written to the
 *       output topic, and a windowed count (1-minute tumbling windows, no grace, store
 *       "windowed-counts", RocksDB, logged).
 *   <li>P3: a sum per key of a long value (store "sums", RocksDB, logged), written to the output topic.
 * </ul>
 *
 * <p>Usage: {@code BenchMain <p1|p2|p3> <input topic> <output topic> <streams properties file>}. The
 * protocol on stdin/stdout (one line each): it prints {@code ready} once the topology is built, waits for a
 * line on stdin, starts, and then prints {@code processed <n>} (the stream threads' process-total
 * summed) every {@code report.ms} (a key of the properties file, default 20) whenever n changed, and
 * {@code restored <n>} (the records restored into its stores so far) each time a store partition's
 * restoration ends. When stdin closes (or a line {@code stop} arrives) it closes the client and prints
 * {@code closed}.
 */
public final class BenchMain {
    static final long WINDOW_MS = 60_000L;

    private BenchMain() {}

    /** Jackson's tree parser as a serde: the counterpart of kstreams' {@code Serdes.json()}. */
    static final class JsonSerde implements Serde<JsonNode> {
        private static final ObjectMapper MAPPER = new ObjectMapper();

        @Override
        public Serializer<JsonNode> serializer() {
            return (topic, node) -> {
                try {
                    return node == null ? null : MAPPER.writeValueAsBytes(node);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            };
        }

        @Override
        public Deserializer<JsonNode> deserializer() {
            return (topic, bytes) -> {
                try {
                    return bytes == null ? null : MAPPER.readTree(bytes);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            };
        }
    }

    static Topology topology(String pipeline, String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        switch (pipeline) {
            case "p1": {
                KStream<String, JsonNode> stream = builder.stream(input, Consumed.with(Serdes.String(), new JsonSerde()));
                stream.filter((key, doc) -> {
                        JsonNode bot = doc.get("bot");
                        return bot != null && bot.isBoolean() && !bot.booleanValue();
                    })
                    .mapValues(doc -> doc.get("user").asText())
                    .to(output, Produced.with(Serdes.String(), Serdes.String()));
                break;
            }
            case "p2": {
                KStream<String, JsonNode> stream = builder.stream(input, Consumed.with(Serdes.String(), new JsonSerde()));
                KGroupedStream<String, JsonNode> grouped = stream.groupByKey();
                grouped.count(Materialized.as("counts"))
                    .toStream()
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
                grouped.windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMillis(WINDOW_MS)))
                    .count(Materialized.as("windowed-counts"));
                break;
            }
            case "p3": {
                KStream<String, Long> stream = builder.stream(input, Consumed.with(Serdes.String(), Serdes.Long()));
                stream.groupByKey()
                    .reduce(Long::sum, Materialized.as("sums"))
                    .toStream()
                    .to(output, Produced.with(Serdes.String(), Serdes.Long()));
                break;
            }
            default:
                throw new IllegalArgumentException("unknown pipeline " + pipeline + " (p1, p2 or p3)");
        }
        return builder.build();
    }

    /** The stream threads' process-total metrics (found once the threads exist). */
    static List<Metric> processTotals(KafkaStreams streams) {
        List<Metric> found = new ArrayList<>();
        for (Map.Entry<MetricName, ? extends Metric> e : streams.metrics().entrySet()) {
            MetricName name = e.getKey();
            if (name.name().equals("process-total") && name.group().equals("stream-thread-metrics")) {
                found.add(e.getValue());
            }
        }
        return found;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: BenchMain <p1|p2|p3> <input topic> <output topic> <properties file>");
            System.exit(2);
        }
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[3])) {
            props.load(in);
        }
        long reportMs = Long.parseLong((String) props.getOrDefault("report.ms", "20"));
        props.remove("report.ms");
        int threads = Integer.parseInt((String) props.getOrDefault("num.stream.threads", "1"));
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        KafkaStreams streams = new KafkaStreams(topology(args[0], args[1], args[2]), props);
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            out.println("error " + e);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                .SHUTDOWN_CLIENT;
        });
        AtomicLong restored = new AtomicLong();
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition partition, String store, long start, long end) {}

            @Override
            public void onBatchRestored(TopicPartition partition, String store, long batchEnd, long n) {}

            @Override
            public void onRestoreEnd(TopicPartition partition, String store, long total) {
                out.println("restored " + restored.addAndGet(total));
            }
        });
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        out.println("ready");
        if (stdin.readLine() == null) {
            return;
        }
        streams.start();
        out.println("started");
        // stdin closing (or "stop") ends the run; a daemon thread watches it.
        Thread watcher = new Thread(() -> {
            try {
                String line;
                while ((line = stdin.readLine()) != null && !line.trim().equals("stop")) {
                    // ignore anything else
                }
            } catch (IOException ignored) {
                // the parent went away: stop as if stdin closed
            }
        }, "bench-stdin");
        watcher.setDaemon(true);
        watcher.start();
        List<Metric> totals = new ArrayList<>();
        long last = -1;
        while (watcher.isAlive()) {
            if (totals.size() < threads) {
                totals = processTotals(streams);
            }
            long n = 0;
            for (Metric m : totals) {
                n += (long) ((Number) m.metricValue()).doubleValue();
            }
            if (n != last) {
                out.println("processed " + n);
                last = n;
            }
            if (streams.state() == KafkaStreams.State.ERROR || streams.state() == KafkaStreams.State.NOT_RUNNING) {
                out.println("error state " + streams.state());
                break;
            }
            watcher.join(reportMs);
        }
        streams.close(Duration.ofSeconds(60));
        out.println("closed");
        System.exit(0);
    }
}
