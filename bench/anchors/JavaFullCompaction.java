/*
 * Anchor of bench/compact_anchors.py: Java Paimon's batch full compaction of one table, as a
 * user runs it in a JVM of its own (what Paimon's dedicated compaction does for a batch job).
 *
 *   java -cp JARS:CLASSES JavaFullCompaction WAREHOUSE DB.TABLE [--open-only]
 *
 * Opens the table through a filesystem catalog on WAREHOUSE, with write-only=false; lists the
 * partition/bucket pairs holding files in the latest snapshot; then BatchTableWrite.compact(
 * partition, bucket, true) of each and one BatchTableCommit of all the messages.
 * --open-only stops after the listing: the JVM's start-up, class loading and the table's
 * opening and planning, which the benchmark reports apart.
 * Prints nothing; an error is a stack trace on stderr and exit code 1.
 */

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryRow;
import org.apache.paimon.disk.IOManager;
import org.apache.paimon.options.Options;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.CommitMessage;
import org.apache.paimon.table.source.DataSplit;
import org.apache.paimon.table.source.Split;

public class JavaFullCompaction {

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: JavaFullCompaction WAREHOUSE DB.TABLE [--open-only]");
            System.exit(2);
        }
        boolean openOnly = args.length > 2 && args[2].equals("--open-only");
        Options options = new Options();
        options.set("warehouse", args[0]);
        try (Catalog catalog = CatalogFactory.createCatalog(CatalogContext.create(options))) {
            FileStoreTable table = (FileStoreTable) catalog.getTable(Identifier.fromString(args[1]));
            table = table.copy(Collections.singletonMap("write-only", "false"));
            // partition -> its buckets with files, in the order the scan lists them
            Map<BinaryRow, List<Integer>> buckets = new LinkedHashMap<>();
            for (Split split : table.newScan().plan().splits()) {
                DataSplit data = (DataSplit) split;
                List<Integer> list = buckets.computeIfAbsent(data.partition(), p -> new ArrayList<>());
                if (!list.contains(data.bucket())) {
                    list.add(data.bucket());
                }
            }
            if (openOnly || buckets.isEmpty()) {
                return;
            }
            BatchWriteBuilder builder = table.newBatchWriteBuilder();
            try (BatchTableWrite write = builder.newWrite();
                    BatchTableCommit commit = builder.newCommit()) {
                write.withIOManager(IOManager.create(System.getProperty("java.io.tmpdir")));
                for (Map.Entry<BinaryRow, List<Integer>> entry : buckets.entrySet()) {
                    for (int bucket : entry.getValue()) {
                        write.compact(entry.getKey(), bucket, true);
                    }
                }
                List<CommitMessage> messages = write.prepareCommit();
                commit.commit(messages);
            }
        }
    }
}
