package zoolog.e2e;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Stat;
import org.junit.jupiter.api.Test;
import zoolog.e2e.support.ZkServer;
import zoolog.e2e.support.ZkTestBase;

/** create/create2/delete/exists/getData/setData/getChildren(2)/sync and the Stat bookkeeping they expose. */
class NodeOperationsTest extends ZkTestBase {

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void createThenGetDataReturnsTheBytesAndAFreshStat() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "crud");
        String created = zk.create(root + "/n", bytes("hello"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        assertEquals(root + "/n", created);

        Stat stat = new Stat();
        assertArrayEquals(bytes("hello"), zk.getData(root + "/n", false, stat));
        assertEquals(0, stat.getVersion());
        assertEquals(0, stat.getCversion());
        assertEquals(0, stat.getAversion());
        assertEquals(5, stat.getDataLength());
        assertEquals(0, stat.getNumChildren());
        assertEquals(0, stat.getEphemeralOwner());
        assertEquals(stat.getCzxid(), stat.getMzxid());
        assertEquals(stat.getCzxid(), stat.getPzxid());
        assertEquals(stat.getCtime(), stat.getMtime());
        assertTrue(stat.getCzxid() > 0, "czxid is a real zxid");
    }

    @Test
    void create2ReturnsTheSameStatThatExistsReports() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "create2");
        Stat fromCreate = new Stat();
        String path = zk.create(root + "/n", bytes("abc"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, fromCreate);
        assertEquals(root + "/n", path);
        Stat fromExists = zk.exists(path, false);
        assertEquals(fromExists, fromCreate);
        assertEquals(3, fromCreate.getDataLength());
    }

    @Test
    void nullDataStaysNullAndEmptyDataStaysEmpty() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "nulldata");
        zk.create(root + "/null", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/empty", new byte[0], Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        Stat s1 = new Stat();
        Stat s2 = new Stat();
        assertNull(zk.getData(root + "/null", false, s1));
        assertArrayEquals(new byte[0], zk.getData(root + "/empty", false, s2));
        assertEquals(0, s1.getDataLength());
        assertEquals(0, s2.getDataLength());
    }

    @Test
    void setDataBumpsVersionAndMzxidButNotCzxid() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "setdata");
        String p = root + "/n";
        Stat created = new Stat();
        zk.create(p, bytes("v0"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, created);
        Stat s1 = zk.setData(p, bytes("v1"), 0);
        assertEquals(1, s1.getVersion());
        assertEquals(created.getCzxid(), s1.getCzxid());
        assertTrue(s1.getMzxid() > created.getMzxid());
        Stat s2 = zk.setData(p, bytes("v1"), -1);
        assertEquals(2, s2.getVersion(), "identical data still bumps the version");
        Stat read = new Stat();
        assertArrayEquals(bytes("v1"), zk.getData(p, false, read));
        assertEquals(s2, read);
        assertEquals(created.getPzxid(), read.getPzxid(), "setData does not touch pzxid");
    }

    @Test
    void deleteWithMatchingOrAnyVersionRemovesTheNode() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "delete");
        zk.create(root + "/a", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/b", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.setData(root + "/a", bytes("x"), -1);
        zk.delete(root + "/a", 1);
        zk.delete(root + "/b", -1);
        assertNull(zk.exists(root + "/a", false));
        assertNull(zk.exists(root + "/b", false));
        assertEquals(List.of(), zk.getChildren(root, false));
    }

    @Test
    void existsReturnsNullForAMissingNode() throws Exception {
        ZooKeeper zk = connect();
        assertNull(zk.exists("/definitely/not/here", false));
        assertNotNull(zk.exists("/", false));
    }

    @Test
    void childCreateAndDeleteMaintainCversionPzxidAndNumChildren() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "children");
        Stat c1 = new Stat();
        zk.create(root + "/x", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, c1);
        zk.create(root + "/y", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.setData(root + "/x", bytes("d"), -1);
        Stat parent = new Stat();
        List<String> kids = zk.getChildren(root, false, parent);
        assertEquals(List.of("x", "y"), sorted(kids));
        assertEquals(2, parent.getNumChildren());
        assertEquals(2, parent.getCversion());
        zk.delete(root + "/y", -1);
        Stat after = zk.exists(root, false);
        assertEquals(1, after.getNumChildren());
        assertEquals(3, after.getCversion(), "cversion counts creations and deletions");
        assertTrue(after.getPzxid() > parent.getPzxid(), "pzxid moves on child delete");
        assertEquals(parent.getVersion(), after.getVersion(), "child changes leave the data version alone");
        assertEquals(List.of("x"), zk.getChildren(root, false));
    }

    @Test
    void sequentialNamesUseTenDigitsFromTheParentsCreationCounter() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "seq");
        zk.create(root + "/a", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.delete(root + "/a", -1);
        String s1 = zk.create(root + "/s-", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL);
        String s2 = zk.create(root + "/s-", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL);
        String s3 = zk.create(root + "/t-", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL);
        assertEquals(root + "/s-0000000001", s1);
        assertEquals(root + "/s-0000000002", s2);
        assertEquals(root + "/t-0000000003", s3);
        assertEquals(5, zk.exists(root, false).getCversion());
    }

    @Test
    void ephemeralNodesCarryTheOwnerSessionAndAreListedByGetEphemerals() throws Exception {
        ZooKeeper zk = connect();
        ZooKeeper other = connect();
        String root = uniqueRoot(zk, "eph");
        zk.create(root + "/e1", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        zk.create(root + "/e2", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        String seq = zk.create(root + "/q", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL);
        other.create(root + "/theirs", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        zk.create(root + "/p", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);

        assertEquals(zk.getSessionId(), zk.exists(root + "/e1", false).getEphemeralOwner());
        assertEquals(other.getSessionId(), zk.exists(root + "/theirs", false).getEphemeralOwner());
        assertEquals(0, zk.exists(root + "/p", false).getEphemeralOwner());

        assertEquals(sorted(List.of(root + "/e1", root + "/e2", seq)), sorted(zk.getEphemerals()));
        assertEquals(sorted(List.of(root + "/e1", root + "/e2", seq)), sorted(zk.getEphemerals(root)));
        assertEquals(sorted(List.of(root + "/e1", root + "/e2")), sorted(zk.getEphemerals(root + "/e")));
        assertEquals(List.of(root + "/theirs"), other.getEphemerals("/"));
    }

    @Test
    void closingASessionDeletesItsEphemeralsForEveryone() throws Exception {
        ZooKeeper owner = connect();
        ZooKeeper observer = connect();
        String root = uniqueRoot(owner, "closeeph");
        owner.create(root + "/e", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        CountDownLatch deleted = new CountDownLatch(1);
        observer.exists(root + "/e", event -> {
            if (event.getType() == org.apache.zookeeper.Watcher.Event.EventType.NodeDeleted) {
                deleted.countDown();
            }
        });
        owner.close();
        assertTrue(deleted.await(WAIT_S, TimeUnit.SECONDS), "observer saw NodeDeleted for the ephemeral");
        assertNull(observer.exists(root + "/e", false));
    }

    @Test
    void getAllChildrenNumberCountsEveryDescendant() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "count");
        zk.create(root + "/a", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/a/b", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/a/b/c", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/d", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        assertEquals(4, zk.getAllChildrenNumber(root));
        assertEquals(2, zk.getAllChildrenNumber(root + "/a"));
        assertEquals(0, zk.getAllChildrenNumber(root + "/a/b/c"));
        assertTrue(zk.getAllChildrenNumber("/") >= 4 + 1 + 3, "root counts /zookeeper, quota, config too");
    }

    @Test
    void syncAnswersWithTheSamePathAndOrdersAfterEarlierWrites() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "sync");
        zk.create(root + "/n", bytes("1"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        CountDownLatch done = new CountDownLatch(1);
        String[] answered = new String[1];
        int[] rc = {Integer.MIN_VALUE};
        zk.setData(root + "/n", bytes("2"), -1, (r, p, c, s) -> { }, null);
        zk.sync(root + "/n", (r, p, c) -> {
            rc[0] = r;
            answered[0] = p;
            done.countDown();
        }, null);
        assertTrue(done.await(WAIT_S, TimeUnit.SECONDS));
        assertEquals(0, rc[0]);
        assertEquals(root + "/n", answered[0]);
        zk.sync(root + "/n");
        assertArrayEquals(bytes("2"), zk.getData(root + "/n", false, null));
    }

    @Test
    void builtInZookeeperNodesExistAndConfigIsEmptyInStandalone() throws Exception {
        ZooKeeper zk = connect();
        assertTrue(zk.getChildren("/zookeeper", false).containsAll(List.of("quota", "config")));
        Stat st = new Stat();
        byte[] config = zk.getConfig(false, st);
        if (ZkServer.isEnsemble()) {
            // An ensemble publishes its membership as zoo.cfg lists it, then the config version
            // (Apache 3.8: "server.1=127.0.0.1:Q:E:participant\n...\nversion=0").
            List<String> want = ZkServer.ensembleServerLines(server.dir());
            List<String> lines = List.of(new String(config == null ? new byte[0] : config, StandardCharsets.UTF_8).split("\n"));
            assertEquals(want, lines.subList(0, Math.max(0, lines.size() - 1)), "ensemble config: " + lines);
            assertTrue(lines.get(lines.size() - 1).matches("version=[0-9a-f]+"), "ensemble config: " + lines);
        } else {
            assertEquals(0, config == null ? 0 : config.length, "standalone config is empty");
        }
        assertNotNull(zk.exists("/zookeeper/quota", false));
    }

    @Test
    void whoAmIListsTheIpIdentityOfAnUnauthenticatedConnection() throws Exception {
        ZooKeeper zk = connect();
        List<ClientInfo> infos = zk.whoAmI();
        assertEquals(1, infos.size(), "infos: " + infos);
        assertEquals("ip", infos.get(0).getAuthScheme());
        assertEquals("127.0.0.1", infos.get(0).getUser());
    }

    @Test
    void sessionIdIsNonZeroAndTimeoutIsNegotiatedWithinTheServerBounds() throws Exception {
        ZooKeeper zk = connect(server.hostPort(), 2000, null, false);
        assertNotEquals(0, zk.getSessionId());
        assertEquals(16, zk.getSessionPasswd().length);
        // tickTime=2000 in tests/zk-server: the minimum session timeout is 2 ticks, so 2000 is raised to 4000.
        assertEquals(4000, zk.getSessionTimeout());
    }
}
