package zoolog.e2e.support;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;

/**
 * One server per test class, in its own temp directory, started through tests/zk-server. Clients opened
 * with connect() are closed after each test.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
public abstract class ZkTestBase {
    public static final long WAIT_S = 60;
    public static final int SESSION_TIMEOUT_MS = 30_000;

    protected ZkServer server;
    protected Path tempDir;
    private final List<ZooKeeper> clients = new CopyOnWriteArrayList<>();
    private static final AtomicInteger UNIQUE = new AtomicInteger();

    /** zoo.cfg key=value lines and -D system properties for this class's server. */
    protected String[] serverSettings() {
        return new String[0];
    }

    @BeforeAll
    void startServer() throws IOException {
        tempDir = Files.createTempDirectory("zoolog-java-" + getClass().getSimpleName() + "-");
        server = new ZkServer(tempDir.resolve("server")).start(serverSettings());
    }

    @AfterEach
    void closeClients() throws InterruptedException {
        for (ZooKeeper zk : clients) {
            zk.close(10_000);
        }
        clients.clear();
    }

    @AfterAll
    void stopServer() throws IOException {
        if (server != null) {
            try {
                server.stop();
            } catch (RuntimeException e) {
                server.kill();
            }
        }
        if (tempDir != null && System.getenv("ZK_KEEP_DIRS") == null) {
            try (Stream<Path> walk = Files.walk(tempDir)) {
                walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    /** A fresh, unique path under / for one test, created persistent. */
    protected String uniqueRoot(ZooKeeper zk, String name) throws Exception {
        String path = "/" + name + "-" + UNIQUE.incrementAndGet();
        zk.create(path, new byte[0], Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        return path;
    }

    protected ZooKeeper connect() throws Exception {
        return connect(server.hostPort(), SESSION_TIMEOUT_MS, null, false);
    }

    protected ZooKeeper connect(Watcher extra) throws Exception {
        return connect(server.hostPort(), SESSION_TIMEOUT_MS, extra, false);
    }

    /** Connects and waits (bounded) for SyncConnected; extra (if any) also sees every default-watcher event. */
    protected ZooKeeper connect(String connectString, int sessionTimeoutMs, Watcher extra, boolean canBeReadOnly)
            throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        List<KeeperState> states = new CopyOnWriteArrayList<>();
        Watcher w = event -> {
            if (event.getType() == Watcher.Event.EventType.None) {
                states.add(event.getState());
                if (event.getState() == KeeperState.SyncConnected || event.getState() == KeeperState.Expired
                        || event.getState() == KeeperState.AuthFailed) {
                    connected.countDown();
                }
            }
            if (extra != null) {
                extra.process(event);
            }
        };
        ZooKeeper zk = new ZooKeeper(connectString, sessionTimeoutMs, w, canBeReadOnly);
        clients.add(zk);
        if (!connected.await(WAIT_S, TimeUnit.SECONDS) || !states.contains(KeeperState.SyncConnected)) {
            fail("no SyncConnected within " + WAIT_S + " s; states seen: " + states);
        }
        return zk;
    }

    /**
     * Waits until every reply and watch event the server sent this client before answering a fresh sync has
     * been delivered to watchers and callbacks. Because the server writes a notification before any later
     * reply on the same connection, and the client's event thread runs watchers and async callbacks in
     * arrival order, this makes "no further event arrived" assertions exact without sleeping.
     */
    protected static void barrier(ZooKeeper zk) throws InterruptedException {
        CountDownLatch done = new CountDownLatch(1);
        int[] rc = {Integer.MIN_VALUE};
        zk.sync("/", (code, path, ctx) -> {
            rc[0] = code;
            done.countDown();
        }, null);
        assertTrue(done.await(WAIT_S, TimeUnit.SECONDS), "sync barrier not answered");
        assertEquals(0, rc[0], "sync barrier rc");
    }

    /** Asserts the call fails with exactly this KeeperException code. */
    protected static KeeperException expectCode(KeeperException.Code code, Executable call) {
        KeeperException e = assertThrows(KeeperException.class, call, "expected " + code);
        assertEquals(code, e.code(), "KeeperException code: " + e);
        return e;
    }

    protected void assumeServerIs39Behaviour(String why) throws IOException {
        Assumptions.assumeFalse(server.isApacheBefore39(),
                "Apache ZooKeeper " + server.version() + " predates the 3.9 behaviour checked here: " + why);
    }

    protected static List<String> sorted(List<String> in) {
        List<String> out = new ArrayList<>(in);
        out.sort(null);
        return out;
    }
}
