// A test-time reader of Paimon tables through Apache Paimon's own Java batch read.
//
// Compiled and run by tests/java_reader.py against the Paimon 1.0 classes of the
// paimon-python-ali wheel's jar. Not part of paimond.
//
// A request is a list of arguments:
//   <table path> [--snapshot ID] [--tag NAME] [--projection a,b,...] [--filter EXPR]...
//                [--incremental FROM,TO [--scan-mode changelog|delta|auto]]
// --incremental reads what snapshots FROM (exclusive) to TO added: with scan mode
// `changelog`, the changelog files their changelog manifest lists name, row kinds kept
// (the read keeps -U/-D rows whenever --incremental is given).
// EXPR is `col=value`, `col!=value`, `col<value`, `col<=value`, `col>value`, `col>=value`,
// `col=null` (IS NULL) or `col!=null` (IS NOT NULL); several filters are ANDed.
// --check-buckets N: every row of every split is also read whole and given to Java's
// FixedBucketRowKeyExtractor for a copy of the schema with `bucket` = N; the rows whose
// bucket is not their split's are counted (#BUCKETS before #END).
//
//   java -cp jar:classes PaimonReader <request args>     one read; exit 1 on an error
//   java -cp jar:classes PaimonReader --serve            one request a line on stdin, the
//                                                         arguments separated by tabs
//
// Output of a request, on stdout:
//   #SCHEMA ["col", ...]                    the printed columns, in order
//   #SPLITS {"splits":n,"files":n,"levels":[...],"deletionFiles":n,"rawConvertible":n}
//   <row kind>\t<JSON array of the row's values>          one line per row
//   #BUCKETS {"checked":n,"mismatched":n}   only with --check-buckets
//   #END {"rows":n,"candidates":n}  (candidates: rows the reader returned before the
//                                    filter was applied to each row here)
// or, when the read fails, `#ERROR <JSON string: the stack trace>` (in --serve mode; the
// trace also goes to stderr). Values: numbers; DECIMAL as the plain BigDecimal string;
// strings; BINARY/VARBINARY as lowercase hex; DATE as epoch days; TIME as millis of day;
// TIMESTAMP(p)/TIMESTAMP_LTZ(p) as [epoch millis, nanos of milli]; ARRAY and ROW as arrays;
// MAP as {"map": [[key, value], ...]} in stored order; NULL as null. FLOAT is printed
// widened to double.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.DataGetters;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.InternalArray;
import org.apache.paimon.data.InternalMap;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.fs.Path;
import org.apache.paimon.fs.local.LocalFileIO;
import org.apache.paimon.io.DataFileMeta;
import org.apache.paimon.predicate.Predicate;
import org.apache.paimon.predicate.PredicateBuilder;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.FileStoreTableFactory;
import org.apache.paimon.table.sink.FixedBucketRowKeyExtractor;
import org.apache.paimon.table.source.DataSplit;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.types.ArrayType;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypeChecks;
import org.apache.paimon.types.MapType;
import org.apache.paimon.types.MultisetType;
import org.apache.paimon.types.RowType;

public final class PaimonReader {

    private static final char[] HEX = "0123456789abcdef".toCharArray();

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        if (args.length == 1 && args[0].equals("--serve")) {
            BufferedReader in =
                    new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                try {
                    read(line.split("\t", -1), out);
                } catch (Throwable t) {
                    String trace = stackTrace(t);
                    System.err.println(trace);
                    System.err.flush();
                    out.println("#ERROR " + quote(trace));
                }
                out.flush();
            }
            return;
        }
        try {
            read(args, out);
            out.flush();
        } catch (Throwable t) {
            out.flush();
            t.printStackTrace();
            System.exit(1);
        }
    }

    private static String stackTrace(Throwable t) {
        StringWriter w = new StringWriter();
        t.printStackTrace(new PrintWriter(w));
        return w.toString();
    }

    // ---- one read ---------------------------------------------------------------------

    private static void read(String[] args, PrintStream out) throws Exception {
        if (args.length == 0) {
            throw new IllegalArgumentException("no table path");
        }
        String tablePath = args[0];
        Map<String, String> dynamic = new HashMap<>();
        List<String> projection = null;
        List<String> filters = new ArrayList<>();
        boolean keepDelete = false;
        int checkBuckets = 0;
        for (int i = 1; i < args.length; i++) {
            String flag = args[i];
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException("missing value after " + flag);
            }
            String value = args[++i];
            switch (flag) {
                case "--snapshot":
                    dynamic.put("scan.snapshot-id", value);
                    break;
                case "--tag":
                    dynamic.put("scan.tag-name", value);
                    break;
                case "--incremental":
                    dynamic.put("incremental-between", value);
                    keepDelete = true;
                    break;
                case "--scan-mode":
                    dynamic.put("incremental-between-scan-mode", value);
                    break;
                case "--projection":
                    projection = value.isEmpty() ? new ArrayList<>()
                            : Arrays.asList(value.split(","));
                    break;
                case "--filter":
                    filters.add(value);
                    break;
                case "--check-buckets":
                    checkBuckets = Integer.parseInt(value);
                    break;
                default:
                    throw new IllegalArgumentException("unknown argument " + flag);
            }
        }

        // <path>$branch_<name>: that branch of the table
        int at = tablePath.indexOf("$branch_");
        FileStoreTable table = FileStoreTableFactory.create(
                LocalFileIO.create(), new Path(at < 0 ? tablePath : tablePath.substring(0, at)));
        if (at >= 0) {
            table = table.switchToBranch(tablePath.substring(at + "$branch_".length()));
        }
        if (!dynamic.isEmpty()) {
            table = table.copy(dynamic);
        }
        RowType rowType = table.rowType();
        List<String> printed = projection != null ? projection : rowType.getFieldNames();

        // Read the printed columns and those the filters name; the filters are applied to
        // the read rows here, after Paimon's own pushdown (stats, file indexes, row groups).
        List<String> readNames = new ArrayList<>(printed);
        List<String[]> parsedFilters = new ArrayList<>();
        for (String filter : filters) {
            String[] parsed = parseFilter(filter);
            parsedFilters.add(parsed);
            if (!readNames.contains(parsed[0])) {
                readNames.add(parsed[0]);
            }
        }
        int[] readIndexes = new int[readNames.size()];
        for (int i = 0; i < readIndexes.length; i++) {
            readIndexes[i] = fieldIndex(rowType, readNames.get(i));
        }
        RowType readType = rowType.project(readIndexes);

        ReadBuilder builder = table.newReadBuilder();
        Predicate predicate = null;
        if (!parsedFilters.isEmpty()) {
            builder.withFilter(predicate(new PredicateBuilder(rowType), rowType, parsedFilters));
            predicate = predicate(new PredicateBuilder(readType), readType, parsedFilters);
        }
        builder.withProjection(readIndexes);

        List<Split> splits = builder.newScan().plan().splits();
        out.println("#SCHEMA " + jsonStrings(printed));
        out.println("#SPLITS " + describeSplits(splits));

        List<DataField> fields = readType.getFields();
        int printedCount = printed.size();
        long rows = 0;
        long candidates = 0;
        org.apache.paimon.table.source.TableRead tableRead = builder.newRead();
        if (keepDelete) {
            tableRead = ((org.apache.paimon.table.source.InnerTableRead) tableRead)
                    .forceKeepDelete();
        }
        try (RecordReader<InternalRow> reader = tableRead.createReader(splits)) {
            RecordReader.RecordIterator<InternalRow> batch;
            while ((batch = reader.readBatch()) != null) {
                InternalRow row;
                while ((row = batch.next()) != null) {
                    candidates++;
                    if (predicate != null && !predicate.test(row)) {
                        continue;
                    }
                    rows++;
                    StringBuilder line = new StringBuilder();
                    line.append(row.getRowKind().shortString()).append('\t').append('[');
                    for (int i = 0; i < printedCount; i++) {
                        if (i > 0) {
                            line.append(',');
                        }
                        value(line, row, i, fields.get(i).type());
                    }
                    out.println(line.append(']'));
                }
                batch.releaseBatch();
            }
        }
        if (checkBuckets > 0) {
            out.println("#BUCKETS " + checkBuckets(table, splits, checkBuckets));
        }
        out.println("#END {\"rows\":" + rows + ",\"candidates\":" + candidates + "}");
    }

    private static String checkBuckets(FileStoreTable table, List<Split> splits, int buckets)
            throws Exception {
        Map<String, String> options = new HashMap<>(table.schema().options());
        options.put("bucket", String.valueOf(buckets));
        FixedBucketRowKeyExtractor extractor =
                new FixedBucketRowKeyExtractor(table.schema().copy(options));
        long checked = 0;
        long mismatched = 0;
        for (Split split : splits) {
            int bucket = ((DataSplit) split).bucket();
            try (RecordReader<InternalRow> reader =
                    table.newReadBuilder().newRead().createReader(split)) {
                RecordReader.RecordIterator<InternalRow> batch;
                while ((batch = reader.readBatch()) != null) {
                    InternalRow row;
                    while ((row = batch.next()) != null) {
                        extractor.setRecord(row);
                        checked++;
                        if (extractor.bucket() != bucket) {
                            mismatched++;
                        }
                    }
                    batch.releaseBatch();
                }
            }
        }
        return "{\"checked\":" + checked + ",\"mismatched\":" + mismatched + "}";
    }

    private static int fieldIndex(RowType rowType, String name) {
        int index = rowType.getFieldIndex(name);
        if (index < 0) {
            throw new IllegalArgumentException(
                    "no column " + name + " in " + rowType.getFieldNames());
        }
        return index;
    }

    private static String describeSplits(List<Split> splits) {
        TreeMap<Integer, Integer> levels = new TreeMap<>();
        int files = 0;
        int deletionFiles = 0;
        int rawConvertible = 0;
        for (Split split : splits) {
            if (!(split instanceof DataSplit)) {
                continue; // a fallback or chain split (Paimon 2.x): no file levels to describe
            }
            DataSplit data = (DataSplit) split;
            if (data.rawConvertible()) {
                rawConvertible++;
            }
            for (DataFileMeta file : data.dataFiles()) {
                files++;
                levels.merge(file.level(), 1, Integer::sum);
            }
            if (data.deletionFiles().isPresent()) {
                for (Object f : data.deletionFiles().get()) {
                    if (f != null) {
                        deletionFiles++;
                    }
                }
            }
        }
        StringBuilder levelJson = new StringBuilder("{");
        for (Map.Entry<Integer, Integer> e : levels.entrySet()) {
            if (levelJson.length() > 1) {
                levelJson.append(',');
            }
            levelJson.append('"').append(e.getKey()).append("\":").append(e.getValue());
        }
        levelJson.append('}');
        return "{\"splits\":" + splits.size() + ",\"files\":" + files + ",\"levels\":"
                + levelJson + ",\"deletionFiles\":" + deletionFiles + ",\"rawConvertible\":"
                + rawConvertible + "}";
    }

    // ---- filters ------------------------------------------------------------------------

    private static final String[] OPS = {"!=", "<=", ">=", "=", "<", ">"};

    /** {column, operator, value}. */
    private static String[] parseFilter(String expr) {
        int best = -1;
        String bestOp = null;
        for (String op : OPS) {
            int at = expr.indexOf(op);
            if (at > 0 && (best < 0 || at < best)) {
                best = at;
                bestOp = op;
            }
        }
        if (best < 0) {
            throw new IllegalArgumentException("not a filter: " + expr);
        }
        // At the same position a two-character operator wins ("<=" over "<").
        for (String op : OPS) {
            if (op.length() == 2 && expr.startsWith(op, best)) {
                bestOp = op;
                break;
            }
        }
        return new String[] {
            expr.substring(0, best), bestOp, expr.substring(best + bestOp.length())
        };
    }

    private static Predicate predicate(
            PredicateBuilder pb, RowType rowType, List<String[]> filters) {
        List<Predicate> all = new ArrayList<>();
        for (String[] f : filters) {
            int index = fieldIndex(rowType, f[0]);
            String op = f[1];
            if (f[2].equals("null")) {
                if (op.equals("=")) {
                    all.add(pb.isNull(index));
                    continue;
                }
                if (op.equals("!=")) {
                    all.add(pb.isNotNull(index));
                    continue;
                }
            }
            Object literal = literal(rowType.getTypeAt(index), f[2]);
            switch (op) {
                case "=":
                    all.add(pb.equal(index, literal));
                    break;
                case "!=":
                    all.add(pb.notEqual(index, literal));
                    break;
                case "<":
                    all.add(pb.lessThan(index, literal));
                    break;
                case "<=":
                    all.add(pb.lessOrEqual(index, literal));
                    break;
                case ">":
                    all.add(pb.greaterThan(index, literal));
                    break;
                case ">=":
                    all.add(pb.greaterOrEqual(index, literal));
                    break;
                default:
                    throw new IllegalArgumentException(op);
            }
        }
        return PredicateBuilder.and(all);
    }

    /** A literal in Paimon's internal representation, from the canonical text form. */
    private static Object literal(DataType type, String text) {
        switch (type.getTypeRoot()) {
            case BOOLEAN:
                return Boolean.parseBoolean(text);
            case TINYINT:
                return Byte.parseByte(text);
            case SMALLINT:
                return Short.parseShort(text);
            case INTEGER:
            case DATE:
            case TIME_WITHOUT_TIME_ZONE:
                return Integer.parseInt(text);
            case BIGINT:
                return Long.parseLong(text);
            case FLOAT:
                return Float.parseFloat(text);
            case DOUBLE:
                return Double.parseDouble(text);
            case DECIMAL:
                return Decimal.fromBigDecimal(
                        new BigDecimal(text),
                        DataTypeChecks.getPrecision(type),
                        DataTypeChecks.getScale(type));
            case CHAR:
            case VARCHAR:
                return BinaryString.fromString(text);
            case BINARY:
            case VARBINARY:
                return unhex(text);
            case TIMESTAMP_WITHOUT_TIME_ZONE:
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                {
                    // "millis" or "millis:nanosOfMilli"
                    String[] parts = text.split(":");
                    return Timestamp.fromEpochMillis(
                            Long.parseLong(parts[0]),
                            parts.length > 1 ? Integer.parseInt(parts[1]) : 0);
                }
            default:
                throw new IllegalArgumentException("no literal of type " + type);
        }
    }

    private static byte[] unhex(String text) {
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    // ---- values -------------------------------------------------------------------------

    private static void value(StringBuilder sb, DataGetters g, int pos, DataType type) {
        if (g.isNullAt(pos)) {
            sb.append("null");
            return;
        }
        switch (type.getTypeRoot()) {
            case BOOLEAN:
                sb.append(g.getBoolean(pos));
                break;
            case TINYINT:
                sb.append(g.getByte(pos));
                break;
            case SMALLINT:
                sb.append(g.getShort(pos));
                break;
            case INTEGER:
            case DATE:
            case TIME_WITHOUT_TIME_ZONE:
                sb.append(g.getInt(pos));
                break;
            case BIGINT:
                sb.append(g.getLong(pos));
                break;
            case FLOAT:
                sb.append(Double.toString(g.getFloat(pos)));
                break;
            case DOUBLE:
                sb.append(Double.toString(g.getDouble(pos)));
                break;
            case DECIMAL:
                {
                    Decimal d =
                            g.getDecimal(
                                    pos,
                                    DataTypeChecks.getPrecision(type),
                                    DataTypeChecks.getScale(type));
                    sb.append(quote(d.toBigDecimal().toPlainString()));
                    break;
                }
            case CHAR:
            case VARCHAR:
                sb.append(quote(g.getString(pos).toString()));
                break;
            case BINARY:
            case VARBINARY:
                {
                    byte[] bytes = g.getBinary(pos);
                    sb.append('"');
                    for (byte b : bytes) {
                        sb.append(HEX[(b >> 4) & 0xf]).append(HEX[b & 0xf]);
                    }
                    sb.append('"');
                    break;
                }
            case TIMESTAMP_WITHOUT_TIME_ZONE:
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                {
                    Timestamp ts = g.getTimestamp(pos, DataTypeChecks.getPrecision(type));
                    sb.append('[')
                            .append(ts.getMillisecond())
                            .append(',')
                            .append(ts.getNanoOfMillisecond())
                            .append(']');
                    break;
                }
            case ARRAY:
                array(sb, g.getArray(pos), ((ArrayType) type).getElementType());
                break;
            case MULTISET:
                {
                    InternalMap map = g.getMap(pos);
                    map(sb, map, ((MultisetType) type).getElementType(), new org.apache.paimon
                            .types.IntType());
                    break;
                }
            case MAP:
                {
                    MapType mapType = (MapType) type;
                    map(sb, g.getMap(pos), mapType.getKeyType(), mapType.getValueType());
                    break;
                }
            case ROW:
                {
                    RowType rowType = (RowType) type;
                    InternalRow nested = g.getRow(pos, rowType.getFieldCount());
                    sb.append('[');
                    for (int i = 0; i < rowType.getFieldCount(); i++) {
                        if (i > 0) {
                            sb.append(',');
                        }
                        value(sb, nested, i, rowType.getTypeAt(i));
                    }
                    sb.append(']');
                    break;
                }
            default:
                throw new UnsupportedOperationException("cannot print type " + type);
        }
    }

    private static void array(StringBuilder sb, InternalArray array, DataType elementType) {
        sb.append('[');
        for (int i = 0; i < array.size(); i++) {
            if (i > 0) {
                sb.append(',');
            }
            value(sb, array, i, elementType);
        }
        sb.append(']');
    }

    private static void map(StringBuilder sb, InternalMap map, DataType keyType,
                            DataType valueType) {
        InternalArray keys = map.keyArray();
        InternalArray values = map.valueArray();
        sb.append("{\"map\":[");
        for (int i = 0; i < map.size(); i++) {
            if (i > 0) {
                sb.append(',');
            }
            sb.append('[');
            value(sb, keys, i, keyType);
            sb.append(',');
            value(sb, values, i, valueType);
            sb.append(']');
        }
        sb.append("]}");
    }

    private static String jsonStrings(List<String> names) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < names.size(); i++) {
            if (i > 0) {
                sb.append(',');
            }
            sb.append(quote(names.get(i)));
        }
        return sb.append(']').toString();
    }

    private static String quote(String s) {
        StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"').toString();
    }
}
