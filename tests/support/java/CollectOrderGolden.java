/*
 * Test oracle: Apache Paimon's own FieldCollectAgg (distinct) and FieldMergeMapAgg, fed the
 * same inputs as paimond's aggregates, print the arrays and maps they produce, in their order.
 *
 * stdin, one case a line: FUNCTION \t TYPE \t INPUTS, where FUNCTION is collect_distinct or
 * merge_map, TYPE the element (or map key) type (INT, BIGINT, STRING, DOUBLE, DECIMAL for
 * DECIMAL(10,2), TIMESTAMP for TIMESTAMP(6) written as millis:nanosOfMilli, DATE as epoch
 * days), INPUTS the values folded one after the other (acc = agg(acc, input), starting from
 * null) separated by ';', the elements of one by ',', '~' for a null element; a map's entries
 * are key=value with INT values. stdout, one line a case: the result's elements (or key=value
 * entries) separated by ','.
 *
 * The aggregators' constructors differ between releases (1.0: (type, distinct); later: (name,
 * type, distinct)); they are found by reflection.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Constructor;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.GenericArray;
import org.apache.paimon.data.GenericMap;
import org.apache.paimon.data.InternalArray;
import org.apache.paimon.data.InternalMap;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.mergetree.compact.aggregate.FieldAggregator;
import org.apache.paimon.types.ArrayType;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypes;
import org.apache.paimon.types.MapType;

public class CollectOrderGolden {

    public static void main(String[] args) throws Exception {
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        StringBuilder out = new StringBuilder();
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] parts = line.split("\t", -1);
            out.append(run(parts[0], parts[1], parts[2])).append('\n');
        }
        System.out.print(out);
        System.out.flush();
    }

    static String run(String function, String typeName, String inputs) throws Exception {
        DataType type = type(typeName);
        boolean isMap = function.equals("merge_map");
        FieldAggregator agg =
                isMap
                        ? create(
                                "org.apache.paimon.mergetree.compact.aggregate.FieldMergeMapAgg",
                                DataTypes.MAP(type, DataTypes.INT()),
                                null)
                        : create(
                                "org.apache.paimon.mergetree.compact.aggregate.FieldCollectAgg",
                                DataTypes.ARRAY(type),
                                Boolean.TRUE);
        Object acc = null;
        for (String input : inputs.split(";", -1)) {
            acc = agg.agg(acc, isMap ? map(typeName, input) : array(typeName, input));
        }
        return isMap ? printMap(typeName, (InternalMap) acc) : printArray(typeName, (InternalArray) acc);
    }

    static FieldAggregator create(String className, DataType type, Boolean distinct)
            throws Exception {
        Class<?> cls = Class.forName(className);
        for (Constructor<?> c : cls.getConstructors()) {
            Class<?>[] p = c.getParameterTypes();
            List<Object> values = new ArrayList<>();
            for (Class<?> t : p) {
                if (t == String.class) {
                    values.add("f");
                } else if (t == boolean.class || t == Boolean.class) {
                    values.add(distinct);
                } else if (t == ArrayType.class || t == MapType.class || t == DataType.class) {
                    values.add(type);
                } else {
                    values = null;
                    break;
                }
            }
            if (values != null) {
                return (FieldAggregator) c.newInstance(values.toArray());
            }
        }
        throw new IllegalStateException("no known constructor of " + className);
    }

    static DataType type(String name) {
        switch (name) {
            case "INT":
                return DataTypes.INT();
            case "BIGINT":
                return DataTypes.BIGINT();
            case "STRING":
                return DataTypes.STRING();
            case "DOUBLE":
                return DataTypes.DOUBLE();
            case "DECIMAL":
                return DataTypes.DECIMAL(10, 2);
            case "TIMESTAMP":
                return DataTypes.TIMESTAMP(6);
            case "DATE":
                return DataTypes.DATE();
            default:
                throw new IllegalArgumentException(name);
        }
    }

    static Object value(String typeName, String text) {
        if (text.equals("~")) {
            return null;
        }
        switch (typeName) {
            case "INT":
            case "DATE":
                return Integer.valueOf(text);
            case "BIGINT":
                return Long.valueOf(text);
            case "STRING":
                return BinaryString.fromString(text);
            case "DOUBLE":
                return Double.valueOf(text);
            case "DECIMAL":
                return Decimal.fromBigDecimal(new BigDecimal(text), 10, 2);
            case "TIMESTAMP":
                String[] p = text.split(":");
                return Timestamp.fromEpochMillis(Long.parseLong(p[0]), Integer.parseInt(p[1]));
            default:
                throw new IllegalArgumentException(typeName);
        }
    }

    static String text(String typeName, Object value) {
        if (value == null) {
            return "~";
        }
        if (typeName.equals("TIMESTAMP")) {
            Timestamp t = (Timestamp) value;
            return t.getMillisecond() + ":" + t.getNanoOfMillisecond();
        }
        if (typeName.equals("DECIMAL")) {
            return ((Decimal) value).toBigDecimal().toPlainString();
        }
        return value.toString();
    }

    static GenericArray array(String typeName, String input) {
        if (input.isEmpty()) {
            return new GenericArray(new Object[0]);
        }
        String[] items = input.split(",", -1);
        Object[] values = new Object[items.length];
        for (int i = 0; i < items.length; i++) {
            values[i] = value(typeName, items[i]);
        }
        return new GenericArray(values);
    }

    static GenericMap map(String typeName, String input) {
        Map<Object, Object> entries = new LinkedHashMap<>();
        if (!input.isEmpty()) {
            for (String item : input.split(",", -1)) {
                String[] kv = item.split("=", -1);
                entries.put(value(typeName, kv[0]), value("INT", kv[1]));
            }
        }
        return new GenericMap(entries);
    }

    static String printArray(String typeName, InternalArray array) {
        InternalArray.ElementGetter getter = InternalArray.createElementGetter(type(typeName));
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < array.size(); i++) {
            b.append(i == 0 ? "" : ",").append(text(typeName, getter.getElementOrNull(array, i)));
        }
        return b.toString();
    }

    static String printMap(String typeName, InternalMap map) {
        InternalArray.ElementGetter keys = InternalArray.createElementGetter(type(typeName));
        InternalArray.ElementGetter values = InternalArray.createElementGetter(DataTypes.INT());
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < map.size(); i++) {
            b.append(i == 0 ? "" : ",")
                    .append(text(typeName, keys.getElementOrNull(map.keyArray(), i)))
                    .append('=')
                    .append(text("INT", values.getElementOrNull(map.valueArray(), i)));
        }
        return b.toString();
    }
}
