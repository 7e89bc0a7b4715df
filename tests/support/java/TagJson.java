// Java Paimon's own tag JSON, for tests/maintenance/test_tags.py (compiled against the same
// jar as PaimonReader). Usage:
//   TagJson <snapshot file> <create time, ISO LocalDateTime> <retention, ISO Duration>
//           <out file> [<tag file to parse>]
// Writes Tag.fromSnapshotAndTagTtl(snapshot, retention, create time).toJson() to <out file>;
// for a tag file given, prints what Java reads from it: its create time, its retention in
// nanoseconds, and whether its snapshot equals the snapshot file's, one a line.

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.time.LocalDateTime;

import org.apache.paimon.Snapshot;
import org.apache.paimon.tag.Tag;

public class TagJson {
    public static void main(String[] args) throws Exception {
        String snapshotJson = read(args[0]);
        Snapshot snapshot = Snapshot.fromJson(snapshotJson);
        Tag tag = Tag.fromSnapshotAndTagTtl(
                snapshot, Duration.parse(args[2]), LocalDateTime.parse(args[1]));
        Files.write(Paths.get(args[3]), tag.toJson().getBytes(StandardCharsets.UTF_8));
        if (args.length > 4) {
            Tag parsed = Tag.fromJson(read(args[4]));
            System.out.println(parsed.getTagCreateTime());
            Duration retained = parsed.getTagTimeRetained();
            System.out.println(retained == null ? "null" : Long.toString(retained.toNanos()));
            System.out.println(parsed.trimToSnapshot().equals(snapshot));
        }
    }

    private static String read(String path) throws Exception {
        return new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8);
    }
}
