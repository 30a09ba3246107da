package io.kstreams.oracle;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.Function;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.kstream.Aggregator;
import org.apache.kafka.streams.kstream.Initializer;
import org.apache.kafka.streams.kstream.KeyValueMapper;
import org.apache.kafka.streams.kstream.Merger;
import org.apache.kafka.streams.kstream.Predicate;
import org.apache.kafka.streams.kstream.Reducer;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.kstream.ValueMapper;

/**
 * The fixed library of named functions a topology spec draws from. tests/oracle/functions.py is the
 * same library in Python: each name must mean the same thing on both sides, null keys and values
 * included. Values are String ("s") or Long ("l"); render() is how any value becomes text.
 */
final class SpecFunctions {
    private SpecFunctions() {}

    /** Text of a key or value: "null" for null, else its toString (Python: str()). */
    static String render(Object x) {
        return Objects.toString(x, "null");
    }

    private static long weight(Object v) {
        if (v == null) {
            return 0L;
        }
        return v instanceof Long ? (Long) v : ((String) v).length();
    }

    private static String head(String s) {
        return s == null || s.isEmpty() ? null : s.substring(0, 1);
    }

    /** "a" for a value of length 1, "b" for 2...: a key of the generator's from any value. */
    private static String lenLetter(Object v) {
        int n = render(v).length();
        return n == 0 ? null : String.valueOf((char) ('a' + n - 1));
    }

    static Predicate<String, Object> predicate(String name) {
        switch (name) {
            case "key_even":
                return (k, v) -> k != null && !k.isEmpty() && k.charAt(0) % 2 == 0;
            case "key_null":
                return (k, v) -> k == null;
            case "key_is_a":
                return (k, v) -> "a".equals(k);
            case "value_null":
                return (k, v) -> v == null;
            case "value_short":
                return (k, v) -> v != null && render(v).length() <= 2;
            default:
                throw new IllegalArgumentException("unknown predicate " + name);
        }
    }

    static ValueMapper<Object, Object> valueMapper(String name) {
        switch (name) {
            case "upper":
                return v -> v == null ? null : ((String) v).toUpperCase();
            case "exclaim":
                return v -> v == null ? null : render(v) + "!";
            case "len":
                return v -> v == null ? null : (Object) (long) ((String) v).length();
            case "to_str":
                return v -> v == null ? null : render(v);
            case "twice":
                return v -> v == null ? null : (Object) ((Long) v * 2);
            case "null_if_x":
                return v -> v != null && ((String) v).contains("x") ? null : v;
            default:
                throw new IllegalArgumentException("unknown value mapper " + name);
        }
    }

    static KeyValueMapper<String, Object, String> keyMapper(String name) {
        switch (name) {
            case "value_head":
                return (k, v) -> v == null ? null : head(render(v));
            case "key_upper":
                return (k, v) -> k == null ? null : k.toUpperCase();
            case "const_all":
                return (k, v) -> "all";
            case "key_len":
                return (k, v) -> k == null ? null : String.valueOf(k.length());
            case "value_len_letter":
                return (k, v) -> v == null ? null : lenLetter(v);
            default:
                throw new IllegalArgumentException("unknown key mapper " + name);
        }
    }

    static KeyValueMapper<String, Object, KeyValue<String, Object>> keyValueMapper(String name) {
        switch (name) {
            case "swap":
                return (k, v) -> KeyValue.pair((String) v, k);
            case "head_tag":
                return (k, v) -> KeyValue.pair(head(k), render(k) + "=" + render(v));
            default:
                throw new IllegalArgumentException("unknown key-value mapper " + name);
        }
    }

    static ValueMapper<Object, Iterable<Object>> flatValueMapper(String name) {
        switch (name) {
            case "chars":
                return v -> {
                    List<Object> out = new ArrayList<>();
                    if (v != null) {
                        for (char c : ((String) v).toCharArray()) {
                            out.add(String.valueOf(c));
                        }
                    }
                    return out;
                };
            case "dup":
                return v -> {
                    List<Object> out = new ArrayList<>();
                    out.add(v);
                    out.add(v);
                    return out;
                };
            default:
                throw new IllegalArgumentException("unknown flat value mapper " + name);
        }
    }

    static KeyValueMapper<String, Object, Iterable<KeyValue<String, Object>>> flatKeyValueMapper(String name) {
        switch (name) {
            case "explode":
                return (k, v) -> {
                    List<KeyValue<String, Object>> out = new ArrayList<>();
                    if (v != null) {
                        for (char c : ((String) v).toCharArray()) {
                            out.add(KeyValue.pair(String.valueOf(c), render(k)));
                        }
                    }
                    return out;
                };
            case "dup_kv":
                return (k, v) -> {
                    List<KeyValue<String, Object>> out = new ArrayList<>();
                    out.add(KeyValue.pair(k, v));
                    out.add(KeyValue.pair(k, v));
                    return out;
                };
            default:
                throw new IllegalArgumentException("unknown flat key-value mapper " + name);
        }
    }

    static Reducer<Object> reducer(String name) {
        switch (name) {
            case "concat":
                return (agg, v) -> agg + "," + v;
            case "max":
                return (agg, v) -> v == null || (agg != null && ((String) agg).compareTo((String) v) >= 0) ? agg : v;
            case "sum":
                return (agg, v) -> v == null ? agg : (Object) ((Long) agg + (Long) v);
            default:
                throw new IllegalArgumentException("unknown reducer " + name);
        }
    }

    /** A table reduction's adder ({@code subtract} false) or subtractor. */
    static Reducer<Object> tableReducer(String name, boolean subtract) {
        switch (name) {
            case "concat":
                return (agg, v) -> agg + (subtract ? "-" : "+") + v;
            case "sum":
                return (agg, v) -> subtract ? (Long) agg - (Long) v : (Long) agg + (Long) v;
            default:
                throw new IllegalArgumentException("unknown table reducer " + name);
        }
    }

    static Initializer<Object> initializer(String name) {
        switch (name) {
            case "collect":
                return () -> "";
            case "sum_len":
                return () -> 0L;
            default:
                throw new IllegalArgumentException("unknown aggregator " + name);
        }
    }

    static Aggregator<String, Object, Object> aggregator(String name) {
        switch (name) {
            case "collect":
                return (k, v, agg) -> agg + render(v) + ";";
            case "sum_len":
                return (k, v, agg) -> (Long) agg + weight(v);
            default:
                throw new IllegalArgumentException("unknown aggregator " + name);
        }
    }

    /** A table aggregation's adder ({@code subtract} false) or subtractor. */
    static Aggregator<String, Object, Object> tableAggregator(String name, boolean subtract) {
        switch (name) {
            case "collect":
                return (k, v, agg) -> agg + (subtract ? "-" : "+") + render(v);
            case "sum_len":
                return (k, v, agg) -> subtract ? (Long) agg - weight(v) : (Long) agg + weight(v);
            default:
                throw new IllegalArgumentException("unknown table aggregator " + name);
        }
    }

    static Merger<String, Object> merger(String name) {
        switch (name) {
            case "collect":
                return (k, a, b) -> a + "|" + b;
            case "sum_len":
                return (k, a, b) -> (Long) a + (Long) b;
            default:
                throw new IllegalArgumentException("unknown merger " + name);
        }
    }

    static ValueJoiner<Object, Object, Object> joiner(String name) {
        if (!"pair".equals(name)) {
            throw new IllegalArgumentException("unknown joiner " + name);
        }
        return (l, r) -> render(l) + "|" + render(r);
    }

    /** A foreign-key join's extractor: the other table's key from this table's value. */
    static Function<Object, String> foreignKeyExtractor(String name) {
        switch (name) {
            case "value_head":
                return v -> v == null ? null : head(render(v));
            case "before_dash":
                return v -> v == null ? null : render(v).split("-", -1)[0];
            case "len_letter":
                return v -> v == null ? null : lenLetter(v);
            default:
                throw new IllegalArgumentException("unknown foreign-key extractor " + name);
        }
    }
}
