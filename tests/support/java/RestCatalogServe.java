/*
 * Test service: Apache Paimon's own REST catalog server (RESTCatalogServer, from paimon-core's
 * published test jar) on 127.0.0.1, over a filesystem warehouse, for the REST catalog tests
 * (tests/support/rest_catalog.py).
 *
 * Arguments: DATA_PATH TOKEN PREFIX WAREHOUSE. The server keeps its tables under DATA_PATH,
 * answers requests that carry "Authorization: Bearer TOKEN", serves its resources under
 * /v1/PREFIX/ and names its warehouse WAREHOUSE. It prints "#URL <base url>" once started and
 * stops when stdin closes.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

import org.apache.paimon.rest.RESTCatalogServer;
import org.apache.paimon.rest.auth.BearTokenAuthProvider;
import org.apache.paimon.rest.responses.ConfigResponse;

public class RestCatalogServe {

    public static void main(String[] args) throws Exception {
        String dataPath = args[0];
        String token = args[1];
        String prefix = args[2];
        String warehouse = args[3];
        Map<String, String> defaults = new HashMap<>();
        defaults.put("prefix", prefix);
        defaults.put("warehouse", warehouse);
        RESTCatalogServer server =
                new RESTCatalogServer(
                        dataPath,
                        new BearTokenAuthProvider(token),
                        new ConfigResponse(defaults, new HashMap<>()),
                        warehouse);
        // The server's own test hook: when set, a successful commit answers with an error so
        // that clients retry. Not wanted here.
        RESTCatalogServer.commitSuccessThrowException = false;
        server.start();
        System.out.println("#URL " + server.getUrl());
        System.out.flush();
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (in.readLine() != null) {
            // nothing to do: the server runs until stdin closes
        }
        server.shutdown();
    }
}
