package ki.search;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.opensearch.analysis.common.CommonAnalysisPlugin;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.http.HttpServerTransport;
import org.opensearch.index.reindex.ReindexPlugin;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.painless.PainlessPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.transport.Netty4Plugin;

/**
 * A single OpenSearch 2.19.1 node in this JVM, for ki's integration tests.
 *
 * <p>Subclasses {@link Node} (its plugin-list constructor is protected) instead of going through
 * {@code Bootstrap}: no "can not run opensearch as root" check, no SecurityManager, no bootstrap checks.
 * Plugins are loaded from the classpath: Netty4 (HTTP/transport), analysis-common, reindex
 * ({@code _delete_by_query}), painless and k-NN (lucene engine only; no native libraries).
 *
 * <pre>
 * java -Xms512m -Xmx1g -cp CLASSPATH ki.search.KiOpenSearchNode --home DIR [--http-port 0|PORT|FROM-TO]
 *      [--transport-port 0] [--ports-file FILE] [--cluster-name NAME] [--node-name NAME]
 *      [--exit-on-stdin-eof] [-E key=value ...]
 * </pre>
 *
 * <p>Once started it writes the bound HTTP port (one line) to {@code --ports-file} (atomically) and, via
 * {@code node.portsfile=true}, {@code HOME/logs/http.ports}. SIGTERM (or stdin EOF with
 * {@code --exit-on-stdin-eof}) closes the node.
 */
public final class KiOpenSearchNode {

    static final String KNN_PLUGIN = "org.opensearch.knn.plugin.KNNPlugin";

    /** Node with an explicit list of classpath plugins. */
    static final class ClasspathPluginNode extends Node {
        ClasspathPluginNode(Environment environment, Collection<Class<? extends Plugin>> plugins) {
            super(environment, plugins, true);
        }
    }

    private KiOpenSearchNode() {}

    public static void main(String[] args) throws Exception {
        long t0 = System.nanoTime();
        String home = null;
        String httpPort = "0";
        String transportPort = "0";
        String portsFile = null;
        String clusterName = "ki-test";
        String nodeName = "ki-node-0";
        boolean exitOnStdinEof = false;
        List<String[]> extra = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--home": home = args[++i]; break;
                case "--http-port": httpPort = args[++i]; break;
                case "--transport-port": transportPort = args[++i]; break;
                case "--ports-file": portsFile = args[++i]; break;
                case "--cluster-name": clusterName = args[++i]; break;
                case "--node-name": nodeName = args[++i]; break;
                case "--exit-on-stdin-eof": exitOnStdinEof = true; break;
                case "-E": {
                    String kv = args[++i];
                    int eq = kv.indexOf('=');
                    if (eq <= 0) {
                        usage("bad -E " + kv);
                    }
                    extra.add(new String[] {kv.substring(0, eq), kv.substring(eq + 1)});
                    break;
                }
                default: usage("unknown argument " + a);
            }
        }
        if (home == null) {
            usage("--home is required");
        }
        Path homePath = Paths.get(home).toAbsolutePath();
        // PluginsService lists these directories; the node itself needs no bundles in them.
        Files.createDirectories(homePath.resolve("modules"));
        Files.createDirectories(homePath.resolve("plugins"));
        Files.createDirectories(homePath.resolve("config"));

        Settings.Builder builder = Settings.builder()
            .put("path.home", homePath.toString())
            .put("cluster.name", clusterName)
            .put("node.name", nodeName)
            .put("discovery.type", "single-node")
            .put("network.host", "127.0.0.1")
            .put("http.port", httpPort)
            .put("transport.port", transportPort)
            .put("node.portsfile", true)
            // Flood stage on a full CI disk would make indices read-only (bulk 429 cluster_block_exception).
            .put("cluster.routing.allocation.disk.threshold_enabled", false);
        for (String[] kv : extra) {
            builder.put(kv[0], kv[1]);
        }
        final String name = nodeName;
        Environment env = InternalSettingsPreparer.prepareEnvironment(
            builder.build(), Collections.emptyMap(), null, () -> name);
        Files.createDirectories(env.logsFile()); // node.portsfile writes {http,transport}.ports there

        List<Class<? extends Plugin>> plugins = new ArrayList<>();
        plugins.add(Netty4Plugin.class);
        plugins.add(CommonAnalysisPlugin.class);
        plugins.add(ReindexPlugin.class);
        plugins.add(PainlessPlugin.class);
        plugins.add(loadPlugin(KNN_PLUGIN));

        final Node node;
        try {
            node = new ClasspathPluginNode(env, plugins);
        } catch (Throwable t) {
            System.err.println("ki-opensearch-node: node construction failed");
            t.printStackTrace();
            System.exit(1);
            return;
        }
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
                node.awaitClose(20, TimeUnit.SECONDS);
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                stopped.countDown();
            }
        }, "ki-node-shutdown"));

        int port;
        try {
            node.start();
            HttpServerTransport http = node.injector().getInstance(HttpServerTransport.class);
            port = http.boundAddress().publishAddress().getPort();
            if (portsFile != null) {
                writeAtomically(Paths.get(portsFile), port + "\n");
            }
        } catch (Throwable t) {
            // Without this the node's non-daemon threads would keep a half-started JVM alive.
            System.err.println("ki-opensearch-node: start failed");
            t.printStackTrace();
            System.exit(1);
            return;
        }
        System.out.printf("ki-opensearch-node: started on http://127.0.0.1:%d in %d ms (home %s)%n",
            port, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0), homePath);
        System.out.flush();

        if (exitOnStdinEof) {
            Thread watcher = new Thread(() -> {
                try (InputStream in = System.in) {
                    byte[] buf = new byte[256];
                    while (in.read(buf) >= 0) {
                        // discard
                    }
                } catch (IOException ignored) {
                    // treat as EOF
                }
                System.out.println("ki-opensearch-node: stdin closed, stopping");
                System.exit(0);
            }, "ki-node-stdin-watch");
            watcher.setDaemon(true);
            watcher.start();
        }
        stopped.await();
    }

    @SuppressWarnings("unchecked")
    private static Class<? extends Plugin> loadPlugin(String className) {
        try {
            return (Class<? extends Plugin>) Class.forName(className);
        } catch (ClassNotFoundException e) {
            throw new IllegalStateException(className + " not on the classpath: add the jars unpacked from "
                + "org.opensearch.plugin:opensearch-knn:2.19.1.0 (zip); see .ci/install_opensearch.sh", e);
        }
    }

    private static void writeAtomically(Path target, String content) throws IOException {
        Path parent = target.toAbsolutePath().getParent();
        Files.createDirectories(parent);
        Path tmp = Files.createTempFile(parent, target.getFileName().toString(), ".tmp");
        Files.write(tmp, content.getBytes(StandardCharsets.UTF_8));
        Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    private static void usage(String message) {
        System.err.println("KiOpenSearchNode: " + message);
        System.err.println("usage: KiOpenSearchNode --home DIR [--http-port 0|PORT|FROM-TO] [--transport-port SPEC]"
            + " [--ports-file FILE] [--cluster-name NAME] [--node-name NAME] [--exit-on-stdin-eof] [-E key=value]...");
        System.exit(2);
    }
}
