package zoolog.e2e;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException.Code;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;
import org.junit.jupiter.api.Test;
import zoolog.e2e.support.Events;
import zoolog.e2e.support.StallableProxy;
import zoolog.e2e.support.ZkTestBase;

/** Session lifetime (real expiry), chroot, pipelined async requests, and the read-only connect flag. */
class SessionTest extends ZkTestBase {

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void aSessionWhoseTrafficStopsExpiresItsEphemeralsVanishAndTheClientSeesExpired() throws Exception {
        ZooKeeper observer = connect();
        String root = uniqueRoot(observer, "expiry");
        try (StallableProxy proxy = new StallableProxy(server.port())) {
            List<KeeperState> states = new CopyOnWriteArrayList<>();
            CountDownLatch expired = new CountDownLatch(1);
            CountDownLatch disconnected = new CountDownLatch(1);
            // 4000 ms requested = the server minimum (2 x tickTime).
            ZooKeeper victim = connect(proxy.hostPort(), 4000, event -> {
                if (event.getType() == EventType.None) {
                    states.add(event.getState());
                    if (event.getState() == KeeperState.Disconnected) {
                        disconnected.countDown();
                    }
                    if (event.getState() == KeeperState.Expired) {
                        expired.countDown();
                    }
                }
            }, false);
            victim.create(root + "/eph", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
            victim.create(root + "/eph-seq-", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL);
            Events gone = new Events();
            assertNotNull(observer.exists(root + "/eph", gone));
            Events kids = new Events();
            observer.getChildren(root, kids);

            // Partition the client: no pings reach the server, so the server expires the session.
            proxy.stall();
            assertEquals("NodeDeleted " + root + "/eph", Events.describe(gone.next()));
            assertEquals("NodeChildrenChanged " + root, Events.describe(kids.next()));
            assertEquals(List.of(), observer.getChildren(root, false), "every ephemeral of the session is gone");
            assertTrue(disconnected.await(WAIT_S, TimeUnit.SECONDS), "client noticed the silence: " + states);

            // Heal the partition: the client reconnects, presents its old session and learns it expired.
            proxy.resume();
            assertTrue(expired.await(WAIT_S, TimeUnit.SECONDS), "client saw Expired; states: " + states);
            assertEquals(ZooKeeper.States.CLOSED, victim.getState());
            expectCode(Code.SESSIONEXPIRED, () -> victim.exists("/", false));
        }
    }

    @Test
    void resumingAnExpiredSessionIdIsRefusedWithExpired() throws Exception {
        ZooKeeper first = connect();
        long id = first.getSessionId();
        byte[] pw = first.getSessionPasswd();
        first.close();
        CountDownLatch expired = new CountDownLatch(1);
        ZooKeeper again = new ZooKeeper(server.hostPort(), SESSION_TIMEOUT_MS, e -> {
            if (e.getState() == KeeperState.Expired) {
                expired.countDown();
            }
        }, id, pw);
        try {
            assertTrue(expired.await(WAIT_S, TimeUnit.SECONDS));
        } finally {
            again.close();
        }
    }

    @Test
    void resumingALiveSessionKeepsItsIdAndEphemerals() throws Exception {
        try (StallableProxy proxy = new StallableProxy(server.port())) {
            ZooKeeper first = connect(proxy.hostPort(), SESSION_TIMEOUT_MS, null, false);
            String root = uniqueRoot(first, "resume");
            first.create(root + "/mine", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
            // The first client's connection stays open (the second takes the session over from
            // it), but its reconnects go nowhere: let through, one would take the session back.
            proxy.stall();
            CountDownLatch connected = new CountDownLatch(1);
            ZooKeeper second = new ZooKeeper(server.hostPort(), SESSION_TIMEOUT_MS, e -> {
                if (e.getState() == KeeperState.SyncConnected) {
                    connected.countDown();
                }
            }, first.getSessionId(), first.getSessionPasswd());
            try {
                assertTrue(connected.await(WAIT_S, TimeUnit.SECONDS));
                assertEquals(first.getSessionId(), second.getSessionId());
                assertEquals(List.of(root + "/mine"), second.getEphemerals(root));
                assertEquals(second.getSessionId(), second.exists(root + "/mine", false).getEphemeralOwner());
            } finally {
                second.close(); // ends the shared session
            }
            assertNull(connect().exists(root + "/mine", false));
        }
    }

    @Test
    void chrootedClientsSeeAndWritePathsRelativeToTheirRoot() throws Exception {
        ZooKeeper plain = connect();
        String base = uniqueRoot(plain, "chroot");
        plain.create(base + "/app", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        ZooKeeper chrooted = connect(server.hostPort() + base + "/app", SESSION_TIMEOUT_MS, null, false);

        assertEquals("/x", chrooted.create("/x", bytes("1"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        assertArrayEquals(bytes("1"), plain.getData(base + "/app/x", false, null));
        String seq = chrooted.create("/s-", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL);
        assertTrue(seq.startsWith("/s-"), seq);
        assertEquals(List.of("s-0000000001", "x"), sorted(chrooted.getChildren("/", false)));
        // The 3.9 Java client does not strip the chroot from getEphemerals results: server paths come back.
        assertEquals(List.of(base + "/app" + seq), chrooted.getEphemerals());
        Stat st = new Stat();
        assertEquals("/y", chrooted.create("/y", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, st));
        assertEquals(plain.exists(base + "/app/y", false), st);

        Events events = new Events();
        chrooted.getData("/x", events, null);
        chrooted.addWatch("/", events, org.apache.zookeeper.AddWatchMode.PERSISTENT_RECURSIVE);
        plain.setData(base + "/app/x", bytes("2"), -1);
        barrier(chrooted);
        assertEquals(List.of("NodeDataChanged /x"), events.drainNodeEvents(),
                "event paths are chroot-relative, one event per watcher-path pair");
        // getConfig reads /zookeeper/config, never chroot-prefixed.
        assertNotNull(chrooted.getConfig(false, new Stat()));
        chrooted.delete("/x", -1);
        assertNull(plain.exists(base + "/app/x", false));
    }

    @Test
    void manyOutstandingAsyncRequestsOnOneSessionCompleteInIssueOrder() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "fifo");
        zk.create(root + "/v", bytes("-1"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        int n = 600;
        List<Integer> completions = new CopyOnWriteArrayList<>();
        List<String> problems = new CopyOnWriteArrayList<>();
        CountDownLatch done = new CountDownLatch(n);
        for (int i = 0; i < n; i++) {
            final int seq = i;
            switch (i % 3) {
                case 0 -> zk.setData(root + "/v", bytes(Integer.toString(i)), -1, (rc, p, c, s) -> {
                    if (rc != 0) {
                        problems.add("setData " + seq + " rc " + rc);
                    }
                    completions.add(seq);
                    done.countDown();
                }, null);
                case 1 -> zk.getData(root + "/v", false, (rc, p, c, data, s) -> {
                    // Per-session FIFO: this read was issued right after setData(seq - 1).
                    if (rc != 0 || !Integer.toString(seq - 1).equals(new String(data, StandardCharsets.UTF_8))) {
                        problems.add("getData " + seq + " saw rc " + rc);
                    }
                    completions.add(seq);
                    done.countDown();
                }, null);
                default -> zk.create(root + "/c-", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL,
                        (rc, p, c, name) -> {
                            if (rc != 0) {
                                problems.add("create " + seq + " rc " + rc);
                            }
                            completions.add(seq);
                            done.countDown();
                        }, null);
            }
        }
        assertTrue(done.await(WAIT_S, TimeUnit.SECONDS), "all async requests answered");
        List<Integer> expected = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            expected.add(i);
        }
        assertEquals(expected, completions, "callbacks in issue order");
        assertEquals(List.of(), problems);
        Stat st = zk.exists(root + "/v", false);
        assertEquals(n / 3, st.getVersion());
        List<String> kids = sorted(zk.getChildren(root, false));
        assertEquals(n / 3 + 1, kids.size());
        assertEquals("c-0000000001", kids.get(0), "sequence numbers follow issue order");
    }

    @Test
    void canBeReadOnlyClientsConnectNormallyToAHealthyServer() throws Exception {
        List<WatchedEvent> sessionEvents = new CopyOnWriteArrayList<>();
        ZooKeeper zk = connect(server.hostPort(), SESSION_TIMEOUT_MS, sessionEvents::add, true);
        assertEquals(ZooKeeper.States.CONNECTED, zk.getState());
        for (WatchedEvent e : sessionEvents) {
            assertTrue(e.getState() != KeeperState.ConnectedReadOnly, "not a read-only session: " + sessionEvents);
        }
        String root = uniqueRoot(zk, "rwclient");
        zk.setData(root, bytes("writes work"), -1);
        assertArrayEquals(bytes("writes work"), zk.getData(root, false, null));
    }
}
