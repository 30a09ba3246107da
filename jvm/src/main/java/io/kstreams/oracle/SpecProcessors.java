package io.kstreams.oracle;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorSupplier;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.ProcessorSupplier;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The named processors of the spec's process and process_values ops, each with a key-value store
 * of its own. tests/oracle/functions.py holds the same processors in Python (RunningCount,
 * FlushOnStreamTime): each name must do the same on both sides.
 */
final class SpecProcessors {
    private SpecProcessors() {}

    static FixedKeyProcessorSupplier<String, Object, Object> fixedKey(String name, String store) {
        if (!"running_count".equals(name)) {
            throw new IllegalArgumentException("unknown fixed-key processor " + name);
        }
        return () -> new RunningCount(store);
    }

    static ProcessorSupplier<String, Object, String, Object> processor(String name, String store) {
        if (!"flush_every_10".equals(name)) {
            throw new IllegalArgumentException("unknown processor " + name);
        }
        return () -> new FlushEvery10(store);
    }

    /** Counts each key's records in its store and forwards the count; a null key: 0, not stored. */
    private static final class RunningCount implements FixedKeyProcessor<String, Object, Object> {
        private final String storeName;
        private FixedKeyProcessorContext<String, Object> context;
        private KeyValueStore<String, Long> store;

        RunningCount(String storeName) {
            this.storeName = storeName;
        }

        @Override
        public void init(FixedKeyProcessorContext<String, Object> context) {
            this.context = context;
            this.store = context.getStateStore(storeName);
        }

        @Override
        public void process(FixedKeyRecord<String, Object> record) {
            if (record.key() == null) {
                context.forward(record.withValue(0L));
                return;
            }
            Long old = store.get(record.key());
            long count = (old == null ? 0L : old) + 1;
            store.put(record.key(), count);
            context.forward(record.withValue(count));
        }
    }

    /**
     * Keeps each key's latest value (rendered) in its store and every 10 ms of stream time forwards
     * every row in key order, stamped with the punctuation's time, then empties the store. A null
     * key is dropped; a null value deletes the key's row.
     */
    private static final class FlushEvery10 implements Processor<String, Object, String, Object> {
        private final String storeName;
        private ProcessorContext<String, Object> context;
        private KeyValueStore<String, String> store;

        FlushEvery10(String storeName) {
            this.storeName = storeName;
        }

        @Override
        public void init(ProcessorContext<String, Object> context) {
            this.context = context;
            this.store = context.getStateStore(storeName);
            context.schedule(Duration.ofMillis(10), PunctuationType.STREAM_TIME, this::flush);
        }

        @Override
        public void process(Record<String, Object> record) {
            if (record.key() == null) {
                return;
            }
            store.put(record.key(), record.value() == null ? null : SpecFunctions.render(record.value()));
        }

        private void flush(long timestamp) {
            List<KeyValue<String, String>> rows = new ArrayList<>();
            try (KeyValueIterator<String, String> it = store.all()) {
                it.forEachRemaining(rows::add);
            }
            for (KeyValue<String, String> row : rows) {
                context.forward(new Record<>(row.key, row.value, timestamp));
            }
            for (KeyValue<String, String> row : rows) {
                store.delete(row.key);
            }
        }
    }
}
