package zoolog.e2e;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.junit.jupiter.api.Test;
import zoolog.e2e.support.Events;
import zoolog.e2e.support.StallableProxy;
import zoolog.e2e.support.ZkTestBase;

/**
 * Sessions survive a server restart; the Java client re-sends auth and its watches (SetWatches /
 * SetWatches2 with persistent watches) on the new connection, and changes it missed fire once.
 */
class ReconnectTest extends ZkTestBase {

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Session-state events of one client, to wait for Disconnected / SyncConnected transitions. */
    private static final class States {
        final LinkedBlockingQueue<KeeperState> queue = new LinkedBlockingQueue<>();

        void await(KeeperState wanted) throws InterruptedException {
            List<KeeperState> seen = new ArrayList<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
            while (true) {
                KeeperState s = queue.poll(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                if (s == null) {
                    throw new AssertionError("no " + wanted + " within " + WAIT_S + " s; saw " + seen);
                }
                seen.add(s);
                if (s == wanted) {
                    return;
                }
                if (s == KeeperState.Expired) {
                    throw new AssertionError("session expired while waiting for " + wanted);
                }
            }
        }
    }

    @Test
    void watchesAndAuthAreRestoredAfterARestartAndMissedChangesFireOnce() throws Exception {
        ZooKeeper writer0 = connect();
        String r = uniqueRoot(writer0, "rewatch");
        for (String n : List.of("d", "p", "del", "quiet", "pp", "rec")) {
            writer0.create(r + "/" + n, null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        }
        writer0.close();

        try (StallableProxy proxy = new StallableProxy(server.port())) {
            States states = new States();
            Events events = new Events();
            ZooKeeper a = connect(proxy.hostPort(), SESSION_TIMEOUT_MS, e -> {
                if (e.getType() == EventType.None) {
                    states.queue.add(e.getState());
                }
            }, false);
            long session = a.getSessionId();
            a.addAuthInfo("digest", bytes("ann:pw"));
            a.create(r + "/secret", bytes("s"), Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT);
            a.getData(r + "/d", events, null);
            a.exists(r + "/new", events);
            a.getChildren(r + "/p", events);
            a.getData(r + "/del", events, null);
            a.getData(r + "/quiet", events, null);
            a.addWatch(r + "/pp", events, AddWatchMode.PERSISTENT);
            a.addWatch(r + "/rec", events, AddWatchMode.PERSISTENT_RECURSIVE);
            states.queue.clear();

            // Cut the client off, restart the server, and change things while the client cannot see.
            proxy.stall();
            proxy.sever();
            states.await(KeeperState.Disconnected);
            server.stop();
            server.restart();
            ZooKeeper writer = connect();
            writer.setData(r + "/d", bytes("changed"), -1);
            writer.create(r + "/new", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            writer.create(r + "/p/kid", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            writer.delete(r + "/del", -1);
            writer.setData(r + "/pp", bytes("missed"), -1); // persistent watches get no catch-up event

            proxy.resume();
            states.await(KeeperState.SyncConnected);
            assertEquals(session, a.getSessionId(), "the same session was resumed");
            barrier(a);
            List<String> catchUp = sorted(events.drainNodeEvents());
            assertEquals(sorted(List.of(
                    "NodeDataChanged " + r + "/d",
                    "NodeCreated " + r + "/new",
                    "NodeChildrenChanged " + r + "/p",
                    "NodeDeleted " + r + "/del")), catchUp);

            // Auth was re-sent on the new connection.
            assertArrayEquals(bytes("s"), a.getData(r + "/secret", false, null));

            // The untouched one-shot watch and both persistent watches are live on the new connection.
            writer.setData(r + "/quiet", bytes("now"), -1);
            writer.setData(r + "/pp", bytes("after"), -1);
            writer.create(r + "/rec/x", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            writer.setData(r + "/d", bytes("again"), -1); // its one-shot watch was consumed by the catch-up
            barrier(a);
            assertEquals(List.of(
                    "NodeDataChanged " + r + "/quiet",
                    "NodeDataChanged " + r + "/pp",
                    "NodeCreated " + r + "/rec/x"), events.drainNodeEvents());
        }
    }

    @Test
    void aSessionAndItsEphemeralsSurviveAServerCrashAndRestart() throws Exception {
        States states = new States();
        ZooKeeper zk = connect(server.hostPort(), SESSION_TIMEOUT_MS, e -> {
            if (e.getType() == EventType.None) {
                states.queue.add(e.getState());
            }
        }, false);
        String r = uniqueRoot(zk, "crash");
        zk.create(r + "/eph", bytes("e"), Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        Events events = new Events();
        zk.getData(r + "/eph", events, null);
        long session = zk.getSessionId();
        states.queue.clear();

        server.kill();
        states.await(KeeperState.Disconnected);
        server.restart();
        states.await(KeeperState.SyncConnected);
        assertEquals(session, zk.getSessionId());
        assertNotNull(zk.exists(r + "/eph", false));
        assertEquals(session, zk.exists(r + "/eph", false).getEphemeralOwner());

        ZooKeeper other = connect();
        other.setData(r + "/eph", bytes("x"), -1);
        assertEquals("NodeDataChanged " + r + "/eph", Events.describe(events.nextNodeEvent()));
        assertTrue(zk.getEphemerals().contains(r + "/eph"));
    }
}
