package zoolog.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.Watcher.WatcherType;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;
import org.junit.jupiter.api.Test;
import zoolog.e2e.support.Events;
import zoolog.e2e.support.ZkTestBase;

/** One-shot and persistent watches: which events fire, exactly once, in which order. */
class WatchTest extends ZkTestBase {

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static void create(ZooKeeper zk, String path) throws Exception {
        zk.create(path, null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
    }

    @Test
    void dataWatchFiresNodeDataChangedOnceThenIsGone() throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "datawatch");
        create(writer, root + "/n");
        Events events = new Events();
        watcher.getData(root + "/n", events, null);
        writer.setData(root + "/n", bytes("1"), -1);
        WatchedEvent e = events.next();
        assertEquals(EventType.NodeDataChanged, e.getType());
        assertEquals(KeeperState.SyncConnected, e.getState());
        assertEquals(root + "/n", e.getPath());
        writer.setData(root + "/n", bytes("2"), -1);
        writer.delete(root + "/n", -1);
        barrier(watcher);
        assertEquals(List.of(), events.drainNodeEvents(), "one-shot watch fired only once");
    }

    @Test
    void existsWatchOnAMissingNodeFiresNodeCreated() throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "existswatch");
        Events events = new Events();
        assertEquals(null, watcher.exists(root + "/later", events));
        writer.create(root + "/later", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        assertEquals("NodeCreated " + root + "/later", Events.describe(events.next()));
        Events second = new Events();
        watcher.exists(root + "/later", second);
        writer.delete(root + "/later", -1);
        assertEquals("NodeDeleted " + root + "/later", Events.describe(second.next()));
    }

    @Test
    void childWatchFiresNodeChildrenChangedOnTheParentOnly() throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "childwatch");
        create(writer, root + "/p");
        create(writer, root + "/p/c");
        Events kids = new Events();
        watcher.getChildren(root + "/p", kids, new Stat());
        writer.setData(root + "/p/c", bytes("x"), -1); // child data change: no child event
        writer.setData(root + "/p", bytes("x"), -1); // parent data change: not a child event either
        writer.create(root + "/p/d", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        assertEquals("NodeChildrenChanged " + root + "/p", Events.describe(kids.next()));
        barrier(watcher);
        assertEquals(List.of(), kids.drainNodeEvents());

        Events kids2 = new Events();
        watcher.getChildren(root + "/p", kids2);
        writer.delete(root + "/p/d", -1);
        assertEquals("NodeChildrenChanged " + root + "/p", Events.describe(kids2.next()));
    }

    @Test
    void deletingAWatchedNodeGivesDataAndChildWatchersOneNodeDeletedAndTheParentNodeChildrenChanged()
            throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "deletewatch");
        create(writer, root + "/n");
        Events all = new Events();
        watcher.getData(root + "/n", all, null);
        watcher.getChildren(root + "/n", all);
        watcher.getChildren(root, all);
        writer.delete(root + "/n", -1);
        barrier(watcher);
        // The client fans the single NodeDeleted out to both the data and the child registration of
        // the same watcher object, so it is delivered once (watchers are deduplicated per event).
        assertEquals(List.of("NodeDeleted " + root + "/n", "NodeChildrenChanged " + root),
                all.drainNodeEvents());
    }

    @Test
    void eventsArriveInTransactionOrder() throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "order");
        Events events = new Events();
        for (int i = 0; i < 10; i++) {
            create(writer, root + "/n" + i);
            watcher.getData(root + "/n" + i, events, null);
        }
        for (int i = 9; i >= 0; i--) {
            writer.setData(root + "/n" + i, bytes("x"), -1);
        }
        barrier(watcher);
        List<String> got = events.drainNodeEvents();
        assertEquals(10, got.size(), "got " + got);
        for (int i = 0; i < 10; i++) {
            assertEquals("NodeDataChanged " + root + "/n" + (9 - i), got.get(i));
        }
    }

    @Test
    void aWriterThatWatchesGetsTheEventBeforeItsOwnReply() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "selfwrite");
        create(zk, root + "/n");
        List<String> order = new CopyOnWriteArrayList<>();
        CountDownLatch replied = new CountDownLatch(3);
        zk.getData(root + "/n", e -> order.add("event " + e.getType()), null);
        zk.getChildren(root + "/n", e -> order.add("child event " + e.getType()));
        zk.exists(root + "/new", e -> order.add("exists event " + e.getType()));
        zk.setData(root + "/n", bytes("1"), -1, (rc, p, c, s) -> {
            order.add("setData reply " + rc);
            replied.countDown();
        }, null);
        zk.create(root + "/n/kid", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, (rc, p, c, name) -> {
            order.add("create kid reply " + rc);
            replied.countDown();
        }, null);
        zk.create(root + "/new", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, (rc, p, c, name) -> {
            order.add("create new reply " + rc);
            replied.countDown();
        }, null);
        assertTrue(replied.await(WAIT_S, TimeUnit.SECONDS));
        assertEquals(List.of(
                "event NodeDataChanged", "setData reply 0",
                "child event NodeChildrenChanged", "create kid reply 0",
                "exists event NodeCreated", "create new reply 0"), order);
    }

    @Test
    void aWatcherThatWritesFromItsCallbackSeesTheNextEventBeforeThatWritesReply() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "watcherwrites");
        create(zk, root + "/a");
        create(zk, root + "/b");
        List<String> order = new CopyOnWriteArrayList<>();
        CountDownLatch done = new CountDownLatch(1);
        zk.getData(root + "/b", e -> order.add("b " + e.getType()), null);
        zk.getData(root + "/a", e -> {
            order.add("a " + e.getType());
            // From inside the watcher: write /b, which this same session watches.
            zk.setData(root + "/b", bytes("from watcher"), -1, (rc, p, c, s) -> {
                order.add("b reply " + rc);
                done.countDown();
            }, null);
        }, null);
        zk.setData(root + "/a", bytes("go"), -1);
        assertTrue(done.await(WAIT_S, TimeUnit.SECONDS));
        assertEquals(List.of("a NodeDataChanged", "b NodeDataChanged", "b reply 0"), order);
    }

    @Test
    void multiFiresEachOpsWatchesInOpOrder() throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "multiwatch");
        create(writer, root + "/x");
        Events events = new Events();
        watcher.exists(root + "/y", events);
        watcher.getData(root + "/x", events, null);
        watcher.getChildren(root, events);
        writer.multi(List.of(
                Op.create(root + "/y", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                Op.setData(root + "/x", bytes("1"), -1)));
        barrier(watcher);
        assertEquals(List.of("NodeCreated " + root + "/y", "NodeChildrenChanged " + root,
                "NodeDataChanged " + root + "/x"), events.drainNodeEvents());
    }

    @Test
    void setAclFiresNoWatches() throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "setaclwatch");
        create(writer, root + "/n");
        Events events = new Events();
        watcher.getData(root + "/n", events, null);
        writer.setACL(root + "/n", Ids.READ_ACL_UNSAFE, -1);
        barrier(watcher);
        assertEquals(List.of(), events.drainNodeEvents());
    }

    @Test
    void notificationsCarryTheZxidOfTheTriggeringTransaction() throws Exception {
        assumeServerIs39Behaviour("notifications carry the txn zxid since 3.9.0 (-1 before)");
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "eventzxid");
        create(writer, root + "/n");
        Events events = new Events();
        watcher.getData(root + "/n", events, null);
        Stat st = writer.setData(root + "/n", bytes("1"), -1);
        WatchedEvent e = events.next();
        assertEquals(st.getMzxid(), e.getZxid());
    }

    @Test
    void persistentWatchSeesTheNodesOwnChangesAndChildListChangesButNothingAboutGrandchildren()
            throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "persistent");
        String p = root + "/p";
        Events events = new Events();
        watcher.addWatch(p, events, AddWatchMode.PERSISTENT);
        create(writer, p);
        create(writer, p + "/c");
        writer.setData(p + "/c", bytes("x"), -1);
        create(writer, p + "/c/g");
        writer.setData(p, bytes("1"), -1);
        writer.setData(p, bytes("2"), -1);
        writer.delete(p + "/c/g", -1);
        writer.delete(p + "/c", -1);
        writer.delete(p, -1);
        create(writer, p);
        barrier(watcher);
        assertEquals(List.of(
                "NodeCreated " + p,
                "NodeChildrenChanged " + p,
                "NodeDataChanged " + p,
                "NodeDataChanged " + p,
                "NodeChildrenChanged " + p,
                "NodeDeleted " + p,
                "NodeCreated " + p), events.drainNodeEvents());
    }

    @Test
    void persistentRecursiveWatchSeesEveryDescendantButNeverNodeChildrenChanged() throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "recursive");
        String r = root + "/r";
        create(writer, r);
        Events events = new Events();
        watcher.addWatch(r, events, AddWatchMode.PERSISTENT_RECURSIVE);
        create(writer, r + "/a");
        create(writer, r + "/a/b");
        writer.setData(r + "/a/b", bytes("x"), -1);
        writer.setData(r, bytes("y"), -1);
        create(writer, root + "/rr"); // sibling with the watched path as a string prefix: not included
        writer.delete(r + "/a/b", -1);
        writer.multi(List.of(
                Op.create(r + "/m", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                Op.delete(r + "/m", -1)));
        barrier(watcher);
        assertEquals(List.of(
                "NodeCreated " + r + "/a",
                "NodeCreated " + r + "/a/b",
                "NodeDataChanged " + r + "/a/b",
                "NodeDataChanged " + r,
                "NodeDeleted " + r + "/a/b",
                "NodeCreated " + r + "/m",
                "NodeDeleted " + r + "/m"), events.drainNodeEvents());
    }

    @Test
    void removeWatchesOfOneWatcherDeliversDataWatchRemovedAndStopsItsEvents() throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "removewatch");
        create(writer, root + "/n");
        Events removed = new Events();
        Events kept = new Events();
        watcher.getData(root + "/n", removed, null);
        watcher.getData(root + "/n", kept, null);
        watcher.removeWatches(root + "/n", removed, WatcherType.Data, false);
        assertEquals("DataWatchRemoved " + root + "/n", Events.describe(removed.next()));
        writer.setData(root + "/n", bytes("x"), -1);
        assertEquals("NodeDataChanged " + root + "/n", Events.describe(kept.next()));
        barrier(watcher);
        assertEquals(List.of(), removed.drainNodeEvents());
    }

    @Test
    void removeAllWatchesClearsServerSideWatchesAndReportsChildWatchRemoved() throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "removeall");
        create(writer, root + "/n");
        Events events = new Events();
        watcher.getChildren(root + "/n", events);
        watcher.removeAllWatches(root + "/n", WatcherType.Children, false);
        assertEquals("ChildWatchRemoved " + root + "/n", Events.describe(events.next()));
        // Nothing is left on the server either: the server now answers NOWATCHER.
        KeeperException e = assertThrows(KeeperException.class,
                () -> watcher.removeAllWatches(root + "/n", WatcherType.Children, false));
        assertEquals(KeeperException.Code.NOWATCHER, e.code());
        create(writer, root + "/n/kid");
        barrier(watcher);
        assertEquals(List.of(), events.drainNodeEvents());
    }

    @Test
    void removingAWatchThatDoesNotExistFailsWithNoWatcher() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "nowatcher");
        Events events = new Events();
        expectCode(KeeperException.Code.NOWATCHER,
                () -> zk.removeWatches(root, events, WatcherType.Data, false));
        expectCode(KeeperException.Code.NOWATCHER,
                () -> zk.removeAllWatches(root, WatcherType.Any, false));
        zk.getData(root, events, null);
        // A data watch exists, but no child watch.
        expectCode(KeeperException.Code.NOWATCHER,
                () -> zk.removeWatches(root, events, WatcherType.Children, false));
    }

    @Test
    void removingAPersistentWatchReportsPersistentWatchRemovedAndStopsIt() throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        assumeServerIs39Behaviour("3.8.0 answers checkWatches with WatcherType.Persistent by MARSHALLINGERROR");
        String root = uniqueRoot(writer, "removepersistent");
        create(writer, root + "/n");
        Events persistent = new Events();
        Events recursive = new Events();
        watcher.addWatch(root + "/n", persistent, AddWatchMode.PERSISTENT);
        watcher.addWatch(root, recursive, AddWatchMode.PERSISTENT_RECURSIVE);
        writer.setData(root + "/n", bytes("1"), -1);
        assertEquals("NodeDataChanged " + root + "/n", Events.describe(persistent.next()));
        assertEquals("NodeDataChanged " + root + "/n", Events.describe(recursive.next()));

        watcher.removeWatches(root + "/n", persistent, WatcherType.Persistent, false);
        assertEquals("PersistentWatchRemoved " + root + "/n", Events.describe(persistent.next()));
        watcher.removeAllWatches(root, WatcherType.Any, false);
        assertEquals("PersistentWatchRemoved " + root, Events.describe(recursive.next()));

        writer.setData(root + "/n", bytes("2"), -1);
        create(writer, root + "/n/kid");
        barrier(watcher);
        assertEquals(List.of(), persistent.drainNodeEvents());
        assertEquals(List.of(), recursive.drainNodeEvents());
    }

    @Test
    void removeAllWatchesOfAnyTypeRemovesARecursiveWatch() throws Exception {
        ZooKeeper watcher = connect();
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "removerecursive");
        Events recursive = new Events();
        watcher.addWatch(root, recursive, AddWatchMode.PERSISTENT_RECURSIVE);
        create(writer, root + "/a");
        assertEquals("NodeCreated " + root + "/a", Events.describe(recursive.next()));
        watcher.removeAllWatches(root, WatcherType.Any, false);
        assertEquals("PersistentWatchRemoved " + root, Events.describe(recursive.next()));
        create(writer, root + "/b");
        barrier(watcher);
        assertEquals(List.of(), recursive.drainNodeEvents());
    }

    @Test
    void defaultWatcherReceivesEventsForBooleanWatchFlags() throws Exception {
        Events defaults = new Events();
        ZooKeeper zk = connect(defaults);
        ZooKeeper writer = connect();
        String root = uniqueRoot(writer, "defaultwatcher");
        create(writer, root + "/n");
        defaults.drain();
        zk.getData(root + "/n", true, null);
        writer.setData(root + "/n", bytes("1"), -1);
        assertEquals("NodeDataChanged " + root + "/n", Events.describe(defaults.next()));
    }
}
