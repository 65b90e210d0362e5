package zoolog.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;
import org.junit.jupiter.api.Test;
import zoolog.e2e.support.Events;
import zoolog.e2e.support.ZkTestBase;

/**
 * CONTAINER and TTL nodes on a server with zookeeper.extendedTypesEnabled=true and a fast container/TTL
 * reaper (znode.container.checkIntervalMs), so reaping is observed through watches rather than waited for.
 */
class ExtendedTypesTest extends ZkTestBase {

    @Override
    protected String[] serverSettings() {
        return new String[] {"-Dzookeeper.extendedTypesEnabled=true", "-Dznode.container.checkIntervalMs=200"};
    }

    @Test
    void ttlNodesAreCreatedWithTheirStatAndReportEphemeralOwnerZero() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "ttl");
        Stat st = new Stat();
        String p = zk.create(root + "/t", new byte[] {1}, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_WITH_TTL, st,
                3_600_000);
        assertEquals(root + "/t", p);
        assertEquals(zk.exists(p, false), st);
        assertEquals(0, st.getEphemeralOwner());
        Stat st2 = new Stat();
        String s = zk.create(root + "/s-", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL,
                st2, 3_600_000);
        assertEquals(root + "/s-0000000001", s);
        assertEquals(0, st2.getEphemeralOwner());
        // TTL nodes may have children (unlike ephemerals).
        zk.create(p + "/kid", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        assertEquals(List.of("kid"), zk.getChildren(p, false));
    }

    @Test
    void ttlCreateInsideMultiIsReportedAsACreate2Result() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "ttlmulti");
        List<OpResult> results = zk.multi(List.of(
                Op.create(root + "/t", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_WITH_TTL, 3_600_000),
                Op.create(root + "/c", null, Ids.OPEN_ACL_UNSAFE, CreateMode.CONTAINER)));
        OpResult.CreateResult t = assertInstanceOf(OpResult.CreateResult.class, results.get(0));
        OpResult.CreateResult c = assertInstanceOf(OpResult.CreateResult.class, results.get(1));
        assertNotNull(t.getStat());
        assertNotNull(c.getStat());
        assertEquals(t.getStat().getCzxid(), c.getStat().getCzxid());
        assertEquals(zk.exists(root + "/t", false), t.getStat());
    }

    @Test
    void anExpiredTtlNodeWithoutChildrenIsDeletedByTheServer() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "ttlexpire");
        zk.create(root + "/short", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_WITH_TTL, new Stat(), 1);
        Events events = new Events();
        if (zk.exists(root + "/short", events) != null) {
            assertEquals("NodeDeleted " + root + "/short", Events.describe(events.next()));
        }
        assertNull(zk.exists(root + "/short", false));
    }

    @Test
    void aContainerIsDeletedByTheServerOnceItsLastChildIsGone() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "container");
        Stat st = new Stat();
        String c = zk.create(root + "/c", null, Ids.OPEN_ACL_UNSAFE, CreateMode.CONTAINER, st);
        assertEquals(0, st.getEphemeralOwner());
        zk.create(c + "/kid", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        // A container with a child is kept, however often the reaper runs.
        Events events = new Events();
        assertNotNull(zk.exists(c, events));
        zk.delete(c + "/kid", -1);
        assertEquals("NodeDeleted " + c, Events.describe(events.next()));
        assertNull(zk.exists(c, false));
        assertTrue(zk.getChildren(root, false).isEmpty());
    }

    @Test
    void aContainerWithAChildSurvivesTheReaper() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "containerkept");
        String c = zk.create(root + "/c", null, Ids.OPEN_ACL_UNSAFE, CreateMode.CONTAINER);
        zk.create(c + "/kid", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        // Another container, emptied, acts as a witness that the reaper has run since.
        String witness = zk.create(root + "/w", null, Ids.OPEN_ACL_UNSAFE, CreateMode.CONTAINER);
        zk.create(witness + "/k", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        Events events = new Events();
        zk.exists(witness, events);
        zk.delete(witness + "/k", -1);
        assertEquals("NodeDeleted " + witness, Events.describe(events.next()));
        assertNotNull(zk.exists(c, false));
    }
}
