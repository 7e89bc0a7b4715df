/*
 * Test oracle: Apache Paimon's own Java writer and dedicated compaction, as the reference the
 * differential tests hold paimond's maintenance against (tests/support/java_maintainer.py).
 *
 * --serve: one request a line on stdin, tab-separated, one answer line on stdout:
 *   write TABLE ROWS [ASSIGNER]
 *                       a batch commit of ROWS with write-only=true (what writers that leave
 *                       maintenance to an external compactor run); ROWS is a JSON array of
 *                       [rowKind, field values in the table's order] ("+I", "-U", "+U", "-D");
 *                       values: numbers, strings, booleans, null, arrays (ARRAY) and arrays of
 *                       [key, value] pairs (MAP). A dynamic-bucket table's rows get their
 *                       bucket from a SimpleHashBucketAssigner (the table's target row
 *                       number) kept in this JVM under the name ASSIGNER, so that commits to
 *                       copies of one table assign each key the bucket it had (no hash index
 *                       files are written)
 *   compact TABLE FULL  Java's dedicated compaction (write-only=false, as Paimon's compact
 *                       action and procedure run it): TableWrite.compact(partition, bucket,
 *                       FULL) of every bucket of the latest snapshot, one commit; a
 *                       bucket-unaware append table runs AppendCompactCoordinator's tasks
 *   expire TABLE N      ExpireSnapshots keeping N snapshots (no time retention)
 *   tag TABLE NAME ID   createTag(NAME, ID)
 * Answers: "#OK <latest snapshot id or 0>" or "#ERROR <JSON string of the stack trace>".
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

import org.apache.paimon.append.AppendCompactCoordinator;
import org.apache.paimon.append.AppendCompactTask;
import org.apache.paimon.data.BinaryRow;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.GenericArray;
import org.apache.paimon.data.GenericMap;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.disk.IOManager;
import org.apache.paimon.fs.Path;
import org.apache.paimon.io.CompactIncrement;
import org.apache.paimon.io.DataFileMeta;
import org.apache.paimon.io.DataIncrement;
import org.apache.paimon.operation.BaseAppendFileStoreWrite;
import org.apache.paimon.operation.ListUnexistingFiles;
import org.apache.paimon.options.ExpireConfig;
import org.apache.paimon.partition.actions.PartitionMarkDoneAction;
import org.apache.paimon.Snapshot;
import org.apache.paimon.fs.local.LocalFileIO;
import org.apache.paimon.index.SimpleHashBucketAssigner;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.FileStoreTableFactory;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.sink.CommitMessageImpl;
import org.apache.paimon.table.sink.TableCommitImpl;
import org.apache.paimon.table.sink.RowKeyExtractor;
import org.apache.paimon.table.source.DataSplit;
import org.apache.paimon.types.ArrayType;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DecimalType;
import org.apache.paimon.types.MapType;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;

public class PaimonMaintainer {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Map<String, SimpleHashBucketAssigner> ASSIGNERS = new HashMap<>();
    private static final Map<String, org.apache.paimon.catalog.Catalog> CATALOGS = new HashMap<>();

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            try {
                out.println("#OK " + handle(line.split("\t", -1)));
            } catch (Throwable t) {
                StringWriter w = new StringWriter();
                t.printStackTrace(new PrintWriter(w));
                System.err.println(w);
                System.err.flush();
                out.println("#ERROR " + JSON.writeValueAsString(w.toString()));
            }
            out.flush();
        }
    }

    /** A table path, or {@code <path>$branch_<name>}: that branch of the table. */
    static FileStoreTable open(String spec) {
        int at = spec.indexOf("$branch_");
        String path = at < 0 ? spec : spec.substring(0, at);
        FileStoreTable table = FileStoreTableFactory.create(LocalFileIO.create(), new Path(path));
        return at < 0 ? table : table.switchToBranch(spec.substring(at + "$branch_".length()));
    }

    private static long handle(String[] request) throws Exception {
        if (request[0].equals("jdbc-write")) {
            return jdbcWrite(request[1], request[2], request[3], JSON.readTree(request[4]));
        }
        if (request[0].equals("catalog-write")) {
            return catalogWrite(optionsOf(request[1]), request[2], JSON.readTree(request[3]));
        }
        if (request[0].equals("catalog-latest")) {
            return catalogLatest(optionsOf(request[1]), request[2]);
        }
        if (request[0].equals("catalog-count")) {
            return catalogCount(optionsOf(request[1]), request[2]);
        }
        if (request[0].equals("catalog-create-partitioned")) {
            return catalogCreatePartitioned(optionsOf(request[1]), request[2], optionsOf(request[3]));
        }
        if (request[0].equals("catalog-metastore-partitions")) {
            return catalogMetastorePartitions(optionsOf(request[1]), request[2], request[3]);
        }
        FileStoreTable table = open(request[1]);
        switch (request[0]) {
            case "write":
                write(table, JSON.readTree(request[2]), request.length > 3 ? request[3] : request[1]);
                break;
            case "compact":
                if (table.coreOptions().bucket() == -1 && table.primaryKeys().isEmpty()) {
                    compactUnaware(table);
                } else {
                    compact(table, Boolean.parseBoolean(request[2]));
                }
                break;
            case "expire":
                int keep = Integer.parseInt(request[2]);
                table.newExpireSnapshots()
                        .config(
                                ExpireConfig.builder()
                                        .snapshotRetainMax(keep)
                                        .snapshotRetainMin(keep)
                                        .snapshotTimeRetain(Duration.ZERO)
                                        .build())
                        .expire();
                break;
            case "tag":
                table.createTag(request[2], Long.parseLong(request[3]));
                break;
            case "fast-forward":
                table.fastForward(request[2]);
                break;
            case "create-branch":
                if (request[3].isEmpty()) {
                    table.createBranch(request[2]);
                } else {
                    table.createBranch(request[2], request[3]);
                }
                table = table.switchToBranch(request[2]);
                break;
            case "earlier-or-equal-watermark": // answers the snapshot id found, 0: none
                Snapshot earlier = table.snapshotManager().earlierOrEqualWatermark(Long.parseLong(request[2]));
                return earlier == null ? 0 : earlier.id();
            case "later-or-equal-watermark": // answers the snapshot id found, 0: none
                Snapshot later = table.snapshotManager().laterOrEqualWatermark(Long.parseLong(request[2]));
                return later == null ? 0 : later.id();
            case "expire-partitions": // what a writer's commit runs, checked now
                FileStoreTable expiring =
                        table.copy(Collections.singletonMap("partition.expiration-check-interval", "0 s"));
                org.apache.paimon.operation.PartitionExpire partitionExpire =
                        expiring.store().newPartitionExpire("paimon-maintainer", expiring);
                if (partitionExpire != null) {
                    partitionExpire.expire(Long.MAX_VALUE);
                }
                break;
            case "merge-branch": // mergeBranch(SOURCE, TARGET); answers TARGET's latest
                // by reflection: Paimon 2.0's API, and this class also compiles against 1.4
                table.getClass()
                        .getMethod("mergeBranch", String.class, String.class)
                        .invoke(table, request[2], request[3]);
                table = table.switchToBranch(request[3]);
                break;
            case "rename-branch": // renameBranch(FROM, TO); answers TO's latest
                table.renameBranch(request[2], request[3]);
                table = table.switchToBranch(request[3]);
                break;
            case "remove-unexisting-files":
                removeUnexistingFiles(table);
                break;
            case "mark-partition-done":
                // as MarkPartitionDoneProcedure: every action of the table's options, then each
                for (PartitionMarkDoneAction action :
                        PartitionMarkDoneAction.createActions(
                                PaimonMaintainer.class.getClassLoader(), table, table.coreOptions())) {
                    action.markDone(request[2]);
                    action.close();
                }
                break;
            default:
                throw new IllegalArgumentException("unknown request " + request[0]);
        }
        Long latest = table.snapshotManager().latestSnapshotId();
        return latest == null ? 0 : latest;
    }

    /**
     * jdbc-write URI WAREHOUSE DB.TABLE ROWS: through a JDBC catalog with lock.enabled, the
     * table created first if absent (id INT primary key, v STRING, 1 bucket); a write-only
     * commit of ROWS, under the catalog's lock. Answers the table's latest snapshot id.
     */
    private static long jdbcWrite(String uri, String warehouse, String name, JsonNode rows)
            throws Exception {
        Map<String, String> options = new HashMap<>();
        options.put("metastore", "jdbc");
        options.put("uri", uri);
        options.put("warehouse", warehouse);
        options.put("lock.enabled", "true");
        return catalogWrite(options, name, rows);
    }

    /**
     * catalog-write OPTIONS DB.TABLE ROWS: the same through the catalog OPTIONS (a JSON object
     * of Paimon catalog options), e.g. a REST catalog, whose tables commit through its server.
     * catalog-latest OPTIONS DB.TABLE: the table's latest snapshot id as the catalog answers it
     * (a REST catalog: its server's), 0 for none.
     */
    private static long catalogWrite(Map<String, String> options, String name, JsonNode rows)
            throws Exception {
        FileStoreTable table = catalogTable(options, name, true);
        write(table, rows, options + name);
        return catalogLatest(options, name);
    }

    private static long catalogLatest(Map<String, String> options, String name)
            throws Exception {
        Snapshot latest = catalogTable(options, name, false).latestSnapshot().orElse(null);
        return latest == null ? 0 : latest.id();
    }

    /** catalog-count OPTIONS DB.TABLE: the number of rows a batch read of the table returns. */
    private static long catalogCount(Map<String, String> options, String name) throws Exception {
        FileStoreTable table = catalogTable(options, name, false);
        org.apache.paimon.table.source.ReadBuilder builder = table.newReadBuilder();
        long[] rows = {0};
        try (org.apache.paimon.reader.RecordReader<org.apache.paimon.data.InternalRow> reader =
                builder.newRead().createReader(builder.newScan().plan())) {
            reader.forEachRemaining(row -> rows[0]++);
        }
        return rows[0];
    }

    /**
     * catalog-create-partitioned OPTIONS DB.TABLE TABLE_OPTIONS: create (dt STRING, id INT,
     * v STRING), primary key (dt, id), partitioned by dt, 1 bucket, with TABLE_OPTIONS (a
     * JSON object), through the catalog OPTIONS. Answers 0.
     */
    private static long catalogCreatePartitioned(
            Map<String, String> options, String name, Map<String, String> tableOptions)
            throws Exception {
        org.apache.paimon.catalog.Catalog catalog = catalog(options);
        org.apache.paimon.catalog.Identifier identifier =
                org.apache.paimon.catalog.Identifier.fromString(name);
        catalog.createDatabase(identifier.getDatabaseName(), true);
        catalog.createTable(
                identifier,
                org.apache.paimon.schema.Schema.newBuilder()
                        .column("dt", org.apache.paimon.types.DataTypes.STRING().notNull())
                        .column("id", org.apache.paimon.types.DataTypes.INT().notNull())
                        .column("v", org.apache.paimon.types.DataTypes.STRING())
                        .primaryKey("dt", "id")
                        .partitionKeys("dt")
                        .option("bucket", "1")
                        .options(tableOptions)
                        .build(),
                false);
        return 0;
    }

    /**
     * catalog-metastore-partitions OPTIONS DB.TABLE VALUE: how many partitions a Hive
     * catalog's metastore lists for the table (HiveCatalog.listPartitionsFromHms) whose first
     * value is VALUE ("*": all of them).
     */
    private static long catalogMetastorePartitions(
            Map<String, String> options, String name, String value) throws Exception {
        org.apache.paimon.catalog.Catalog catalog = catalog(options);
        while (catalog instanceof org.apache.paimon.catalog.DelegateCatalog) {
            catalog = ((org.apache.paimon.catalog.DelegateCatalog) catalog).wrapped();
        }
        java.util.List<?> partitions =
                (java.util.List<?>)
                        catalog.getClass()
                                .getMethod(
                                        "listPartitionsFromHms",
                                        org.apache.paimon.catalog.Identifier.class)
                                .invoke(catalog, org.apache.paimon.catalog.Identifier.fromString(name));
        long count = 0;
        for (Object partition : partitions) {
            java.util.List<?> values =
                    (java.util.List<?>) partition.getClass().getMethod("getValues").invoke(partition);
            count += value.equals("*") || value.equals(values.get(0)) ? 1 : 0;
        }
        return count;
    }

    private static org.apache.paimon.catalog.Catalog catalog(Map<String, String> options) {
        // one catalog per options for the JVM's life: SQLite's writers must share connections
        return CATALOGS.computeIfAbsent(
                options.toString(),
                key ->
                        org.apache.paimon.catalog.CatalogFactory.createCatalog(
                                org.apache.paimon.catalog.CatalogContext.create(
                                        org.apache.paimon.options.Options.fromMap(options))));
    }

    private static FileStoreTable catalogTable(
            Map<String, String> options, String name, boolean create) throws Exception {
        org.apache.paimon.catalog.Catalog catalog = catalog(options);
        org.apache.paimon.catalog.Identifier identifier =
                org.apache.paimon.catalog.Identifier.fromString(name);
        if (create) {
            catalog.createDatabase(identifier.getDatabaseName(), true);
            catalog.createTable(
                    identifier,
                    org.apache.paimon.schema.Schema.newBuilder()
                            .column("id", org.apache.paimon.types.DataTypes.INT().notNull())
                            .column("v", org.apache.paimon.types.DataTypes.STRING())
                            .primaryKey("id")
                            .option("bucket", "1")
                            .build(),
                    true);
        }
        return (FileStoreTable) catalog.getTable(identifier);
    }

    private static Map<String, String> optionsOf(String json) throws Exception {
        Map<String, String> options = new HashMap<>();
        JSON.readTree(json).fields().forEachRemaining(e -> options.put(e.getKey(), e.getValue().asText()));
        return options;
    }

    private static void write(FileStoreTable table, JsonNode rows, String assignerName)
            throws Exception {
        FileStoreTable writing = table.copy(Collections.singletonMap("write-only", "true"));
        RowType type = writing.rowType();
        boolean dynamic = writing.coreOptions().bucket() == -1 && !writing.primaryKeys().isEmpty();
        RowKeyExtractor keys = writing.createRowKeyExtractor();
        SimpleHashBucketAssigner assigner =
                dynamic
                        ? ASSIGNERS.computeIfAbsent(
                                assignerName,
                                n ->
                                        new SimpleHashBucketAssigner(
                                                1,
                                                0,
                                                writing.coreOptions().dynamicBucketTargetRowNum(),
                                                -1))
                        : null;
        BatchWriteBuilder builder = writing.newBatchWriteBuilder();
        try (BatchTableWrite write = withDisk(builder.newWrite());
                BatchTableCommit commit = builder.newCommit()) {
            for (JsonNode row : rows) {
                GenericRow internal = new GenericRow(type.getFieldCount());
                internal.setRowKind(RowKind.fromShortString(row.get(0).asText()));
                for (int i = 0; i < type.getFieldCount(); i++) {
                    internal.setField(i, value(type.getTypeAt(i), row.get(i + 1)));
                }
                if (assigner == null) {
                    write.write(internal);
                } else {
                    keys.setRecord(internal);
                    int hash = keys.trimmedPrimaryKey().hashCode();
                    write.write(internal, assigner.assign(keys.partition(), hash));
                }
            }
            commit.commit(write.prepareCommit());
        }
    }

    private static void compact(FileStoreTable table, boolean full) throws Exception {
        FileStoreTable compacting = table.copy(Collections.singletonMap("write-only", "false"));
        Set<List<Object>> buckets = new LinkedHashSet<>();
        Map<List<Object>, BinaryRow> partitions = new LinkedHashMap<>();
        for (DataSplit split : compacting.newSnapshotReader().read().dataSplits()) {
            List<Object> key = new ArrayList<>();
            key.add(split.partition());
            key.add(split.bucket());
            buckets.add(key);
            partitions.put(key, split.partition());
        }
        BatchWriteBuilder builder = compacting.newBatchWriteBuilder();
        try (BatchTableWrite write = withDisk(builder.newWrite());
                BatchTableCommit commit = builder.newCommit()) {
            for (List<Object> key : buckets) {
                write.compact(partitions.get(key), (Integer) key.get(1), full);
            }
            List<CommitMessage> messages = write.prepareCommit();
            commit.commit(messages);
        }
    }

    /**
     * The remove_unexisting_files procedure's work: each partition's live data files that are
     * missing, deleted by one commit of every partition's messages.
     */
    private static void removeUnexistingFiles(FileStoreTable table) throws Exception {
        ListUnexistingFiles listing = new ListUnexistingFiles(table);
        List<CommitMessage> messages = new ArrayList<>();
        for (BinaryRow partition : table.newScan().listPartitions()) {
            for (Map.Entry<Integer, Map<String, DataFileMeta>> bucket :
                    listing.list(partition).entrySet()) {
                DataIncrement deleted =
                        new DataIncrement(
                                Collections.emptyList(),
                                new ArrayList<>(bucket.getValue().values()),
                                Collections.emptyList());
                messages.add(
                        new CommitMessageImpl(
                                partition.copy(),
                                bucket.getKey(),
                                table.coreOptions().bucket(),
                                deleted,
                                CompactIncrement.emptyIncrement()));
            }
        }
        if (messages.isEmpty()) {
            return;
        }
        try (TableCommitImpl commit = table.newCommit(UUID.randomUUID().toString())) {
            commit.commit(Long.MAX_VALUE, messages);
        }
    }

    /** Spill and lookup files (lookup changelog, deletion vectors) go to java.io.tmpdir. */
    private static BatchTableWrite withDisk(BatchTableWrite write) {
        return write.withIOManager(IOManager.create(System.getProperty("java.io.tmpdir")));
    }

    private static void compactUnaware(FileStoreTable table) throws Exception {
        FileStoreTable compacting = table.copy(Collections.singletonMap("write-only", "false"));
        List<AppendCompactTask> tasks = new AppendCompactCoordinator(compacting, false).run();
        if (tasks.isEmpty()) {
            return;
        }
        BaseAppendFileStoreWrite write =
                (BaseAppendFileStoreWrite) compacting.store().newWrite("paimon-compact");
        write.withIOManager(IOManager.create(System.getProperty("java.io.tmpdir")));
        List<CommitMessage> messages = new ArrayList<>();
        for (AppendCompactTask task : tasks) {
            messages.add(task.doCompact(compacting, write));
        }
        write.close();
        try (BatchTableCommit commit = compacting.newBatchWriteBuilder().newCommit()) {
            commit.commit(messages);
        }
    }

    private static Object value(DataType type, JsonNode node) {
        if (node == null || node.isNull()) {
            return null;
        }
        switch (type.getTypeRoot()) {
            case BOOLEAN:
                return node.asBoolean();
            case TINYINT:
                return (byte) node.asInt();
            case SMALLINT:
                return (short) node.asInt();
            case INTEGER:
            case DATE:
                return node.asInt();
            case BIGINT:
                return node.asLong();
            case FLOAT:
                return (float) node.asDouble();
            case DOUBLE:
                return node.asDouble();
            case CHAR:
            case VARCHAR:
                return BinaryString.fromString(node.asText());
            case DECIMAL:
                DecimalType d = (DecimalType) type;
                return Decimal.fromBigDecimal(
                        new BigDecimal(node.asText()), d.getPrecision(), d.getScale());
            case ARRAY:
                DataType element = ((ArrayType) type).getElementType();
                Object[] values = new Object[node.size()];
                for (int i = 0; i < node.size(); i++) {
                    values[i] = value(element, node.get(i));
                }
                return new GenericArray(values);
            case MAP:
                MapType map = (MapType) type;
                Map<Object, Object> entries = new LinkedHashMap<>();
                for (JsonNode pair : node) {
                    entries.put(
                            value(map.getKeyType(), pair.get(0)),
                            value(map.getValueType(), pair.get(1)));
                }
                return new GenericMap(entries);
            default:
                throw new IllegalArgumentException("no JSON conversion for " + type);
        }
    }
}
