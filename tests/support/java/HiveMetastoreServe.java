import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;
import org.apache.hadoop.hive.metastore.txn.TxnDbUtil;

/**
 * A standalone Hive metastore for the tests: the transaction tables the metastore's lock API
 * needs created first in its Derby database (the metastore jar ships no schema scripts, and
 * its own test mode, which would create them, refuses a lock without an operation type, as
 * Paimon's HiveCatalogLock sends it), then the metastore's own main with the arguments
 * (-p PORT). Configuration: metastore-site.xml on the classpath.
 */
public class HiveMetastoreServe {
    public static void main(String[] args) throws Throwable {
        Configuration conf = MetastoreConf.newMetastoreConf();
        TxnDbUtil.prepDb(conf);
        HiveMetaStore.main(args);
    }
}
