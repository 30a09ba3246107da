package io.kstreams.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyConfig;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.ValueAndTimestamp;
import org.apache.kafka.streams.test.TestRecord;

/**
 * Kafka Streams as the oracle of kstreams' semantics: reads one case per line on stdin (JSON), runs
 * it on Kafka Streams' TopologyTestDriver, and writes the result as one JSON line on stdout.
 *
 * <p>A case: {"spec": {"nodes": [...]}, "config": {"cache_bytes": N, "dsl_store": "in_memory" (a
 * TopologyConfig's default.dsl.store), "client_dsl_store": "in_memory" (the driver's
 * dsl.store.suppliers.class)}, "wall_clock_start": ms,
 * "input": [{"topic", "key", "value", "ts", "headers": [[k, v]]} | {"wall": ms}],
 * "sinks": {topic: "s"|"l"}, "stores": [{"name", "kind": "kv"|"window"|"session"|"plain", "vtype"}]}.
 * The answer: {"outputs": {topic: [{"key", "value", "ts", "headers"}]}, "stores": {name: rows},
 * "error": null or what Kafka Streams threw}. Rows: kv [key, value, ts]; window [[key, start,
 * end], value, ts]; session [[key, start, end], value], each in its store's iteration order.
 * tests/support/oracle.py is the client.
 */
public final class OracleMain {
    private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

    private OracleMain() {}

    public static void main(String[] args) throws Exception {
        // Only answers go to stdout: anything that prints (a logger's console appender) gets stderr.
        PrintStream answers = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        ObjectMapper mapper = new ObjectMapper();
        Path stateRoot = Files.createTempDirectory("kstreams-oracle-");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        long n = 0;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode answer;
            try {
                answer = runCase(mapper.readTree(line), stateRoot.resolve("case-" + n++));
            } catch (Exception e) {
                // A spec the oracle cannot build is an answer too: the client shows it.
                answer = JSON.objectNode();
                answer.put("error", describe(e));
                answer.put("fatal", true);
            }
            answers.println(mapper.writeValueAsString(answer));
            answers.flush();
        }
    }

    private static String describe(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        if (System.getenv("KSTREAMS_ORACLE_TRACE") != null) {
            StringWriter trace = new StringWriter();
            e.printStackTrace(new PrintWriter(trace));
            System.err.println(trace);
        }
        return root.getClass().getSimpleName() + ": " + root.getMessage();
    }

    private static ObjectNode runCase(JsonNode request, Path stateDir) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "oracle");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        JsonNode config = request.path("config");
        if (config.has("cache_bytes")) {
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, config.get("cache_bytes").asLong());
        }
        // The DSL's store choice: the builder's (a TopologyConfig's default.dsl.store) or the
        // client's (dsl.store.suppliers.class, which Kafka's store factories read at start).
        StreamsBuilder builder = new StreamsBuilder();
        if (config.has("dsl_store")) {
            Properties topologyProps = new Properties();
            topologyProps.putAll(props);
            topologyProps.put(StreamsConfig.DEFAULT_DSL_STORE_CONFIG, config.get("dsl_store").asText());
            builder = new StreamsBuilder(new TopologyConfig(new StreamsConfig(topologyProps)));
        }
        if (config.has("client_dsl_store")) {
            props.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG, config.get("client_dsl_store").asText().equals("in_memory")
                    ? BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class
                    : BuiltInDslStoreSuppliers.RocksDBDslStoreSuppliers.class);
        }
        Instant start = Instant.ofEpochMilli(request.path("wall_clock_start").asLong(0));
        ObjectNode answer = JSON.objectNode();
        ObjectNode outputs = answer.putObject("outputs");
        TopologyTestDriver driver = new TopologyTestDriver(SpecTopology.build(request.get("spec"), builder), props, start);
        try {
            Map<String, TestOutputTopic<String, Object>> sinks = new HashMap<>();
            request.get("sinks").fields().forEachRemaining(e -> {
                Deserializer value = SpecTopology.serde(e.getValue().asText()).deserializer();
                sinks.put(e.getKey(), driver.createOutputTopic(
                        e.getKey(), Serdes.String().deserializer(), (Deserializer<Object>) value));
                outputs.putArray(e.getKey());
            });
            try {
                pipe(driver, request.get("input"));
            } catch (RuntimeException e) {
                answer.put("error", describe(e));
            }
            for (Map.Entry<String, TestOutputTopic<String, Object>> e : sinks.entrySet()) {
                ArrayNode records = (ArrayNode) outputs.get(e.getKey());
                for (TestRecord<String, Object> record : e.getValue().readRecordsToList()) {
                    records.add(record(record));
                }
            }
            if (!answer.has("error")) {
                answer.set("stores", stores(driver, request.get("stores")));
            }
        } finally {
            try {
                driver.close();
            } catch (RuntimeException e) {
                // After a failed record the driver may fail to close too: the first error is the answer.
                if (!answer.has("error")) {
                    answer.put("error", describe(e));
                }
            }
        }
        return answer;
    }

    private static void pipe(TopologyTestDriver driver, JsonNode input) {
        Map<String, TestInputTopic<String, String>> topics = new HashMap<>();
        for (JsonNode event : input) {
            if (event.has("wall")) {
                driver.advanceWallClockTime(Duration.ofMillis(event.get("wall").asLong()));
                continue;
            }
            String topic = event.get("topic").asText();
            TestInputTopic<String, String> in = topics.computeIfAbsent(topic, t ->
                    driver.createInputTopic(t, new StringSerializer(), new StringSerializer()));
            RecordHeaders headers = new RecordHeaders();
            for (JsonNode header : event.path("headers")) {
                JsonNode value = header.get(1);
                headers.add(header.get(0).asText(),
                        value.isNull() ? null : value.asText().getBytes(StandardCharsets.UTF_8));
            }
            String key = event.get("key").isNull() ? null : event.get("key").asText();
            String value = event.get("value").isNull() ? null : event.get("value").asText();
            in.pipeInput(new TestRecord<>(key, value, headers, event.get("ts").asLong()));
        }
    }

    private static ObjectNode record(TestRecord<String, Object> record) {
        ObjectNode out = JSON.objectNode();
        out.put("key", record.key());
        out.set("value", value(record.value()));
        out.put("ts", record.timestamp());
        ArrayNode headers = out.putArray("headers");
        for (Header header : record.headers()) {
            ArrayNode pair = headers.addArray();
            pair.add(header.key());
            pair.add(header.value() == null ? null : new String(header.value(), StandardCharsets.UTF_8));
        }
        return out;
    }

    private static JsonNode value(Object value) {
        if (value == null) {
            return JSON.nullNode();
        }
        return value instanceof Long l ? JSON.numberNode(l) : JSON.textNode(value.toString());
    }

    private static ArrayNode windowedKey(Windowed<String> key) {
        ArrayNode out = JSON.arrayNode();
        out.add(key.key());
        out.add(key.window().start());
        out.add(key.window().end());
        return out;
    }

    private static ObjectNode stores(TopologyTestDriver driver, JsonNode wanted) {
        ObjectNode out = JSON.objectNode();
        for (JsonNode store : wanted) {
            String name = store.get("name").asText();
            ArrayNode rows = out.putArray(name);
            switch (store.get("kind").asText()) {
                case "kv" -> {
                    try (KeyValueIterator<String, ValueAndTimestamp<Object>> it =
                            driver.<String, Object>getTimestampedKeyValueStore(name).all()) {
                        it.forEachRemaining(kv -> rows.addArray().add(kv.key)
                                .add(value(kv.value.value())).add(kv.value.timestamp()));
                    }
                }
                case "plain" -> {
                    try (KeyValueIterator<String, Object> it = driver.<String, Object>getKeyValueStore(name).all()) {
                        it.forEachRemaining(kv -> rows.addArray().add(kv.key).add(value(kv.value)));
                    }
                }
                case "window" -> {
                    try (KeyValueIterator<Windowed<String>, ValueAndTimestamp<Object>> it =
                            driver.<String, Object>getTimestampedWindowStore(name).all()) {
                        it.forEachRemaining(kv -> rows.addArray().add(windowedKey(kv.key))
                                .add(value(kv.value.value())).add(kv.value.timestamp()));
                    }
                }
                case "session" -> {
                    try (KeyValueIterator<Windowed<String>, Object> it =
                            driver.<String, Object>getSessionStore(name).fetch(null, null)) {
                        it.forEachRemaining((KeyValue<Windowed<String>, Object> kv) ->
                                rows.addArray().add(windowedKey(kv.key)).add(value(kv.value)));
                    }
                }
                default -> throw new IllegalArgumentException("unknown store kind " + store);
            }
        }
        return out;
    }
}
