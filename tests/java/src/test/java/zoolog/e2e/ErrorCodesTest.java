package zoolog.e2e;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.Arrays;
import java.util.List;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException.Code;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.admin.ZooKeeperAdmin;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.data.Stat;
import org.junit.jupiter.api.Test;
import zoolog.e2e.support.ZkTestBase;

/** Every KeeperException code a Java user meets on a healthy standalone server, and that nothing changed. */
class ErrorCodesTest extends ZkTestBase {

    @Test
    void operationsOnAMissingNodeFailWithNoNode() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "nonode");
        String missing = root + "/missing";
        expectCode(Code.NONODE, () -> zk.getData(missing, false, null));
        expectCode(Code.NONODE, () -> zk.setData(missing, new byte[1], -1));
        expectCode(Code.NONODE, () -> zk.delete(missing, -1));
        expectCode(Code.NONODE, () -> zk.getChildren(missing, false));
        expectCode(Code.NONODE, () -> zk.getChildren(missing, false, new Stat()));
        expectCode(Code.NONODE, () -> zk.getACL(missing, new Stat()));
        expectCode(Code.NONODE, () -> zk.setACL(missing, Ids.OPEN_ACL_UNSAFE, -1));
        expectCode(Code.NONODE, () -> zk.getAllChildrenNumber(missing));
        expectCode(Code.NONODE, () -> zk.create(missing + "/child", null, Ids.OPEN_ACL_UNSAFE,
                CreateMode.PERSISTENT));
    }

    @Test
    void creatingAnExistingNodeFailsWithNodeExistsAndKeepsTheOriginal() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "exists");
        zk.create(root + "/n", new byte[] {1}, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        expectCode(Code.NODEEXISTS, () -> zk.create(root + "/n", new byte[] {2}, Ids.OPEN_ACL_UNSAFE,
                CreateMode.EPHEMERAL));
        expectCode(Code.NODEEXISTS, () -> zk.create(root + "/n", null, Ids.OPEN_ACL_UNSAFE,
                CreateMode.PERSISTENT, new Stat()));
        Stat st = new Stat();
        assertArrayEquals(new byte[] {1}, zk.getData(root + "/n", false, st));
        assertNull(zk.exists(root + "/n", false).getEphemeralOwner() == 0 ? null : "ephemeral");
    }

    @Test
    void wrongVersionsFailWithBadVersionOnSetDataDeleteAndSetAcl() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "badversion");
        String p = root + "/n";
        zk.create(p, new byte[] {1}, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        expectCode(Code.BADVERSION, () -> zk.setData(p, new byte[] {2}, 5));
        expectCode(Code.BADVERSION, () -> zk.delete(p, 1));
        zk.setData(p, new byte[] {3}, 0);
        // setACL compares against aversion (0), not the data version (now 1).
        expectCode(Code.BADVERSION, () -> zk.setACL(p, Ids.OPEN_ACL_UNSAFE, 1));
        zk.setACL(p, Ids.OPEN_ACL_UNSAFE, 0);
        assertArrayEquals(new byte[] {3}, zk.getData(p, false, null));
        assertNotNull(zk.exists(p, false));
    }

    @Test
    void deletingANodeWithChildrenFailsWithNotEmpty() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "notempty");
        zk.create(root + "/c", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        expectCode(Code.NOTEMPTY, () -> zk.delete(root, -1));
        assertNotNull(zk.exists(root + "/c", false));
    }

    @Test
    void ephemeralNodesCannotHaveChildren() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "ephchild");
        zk.create(root + "/e", null, Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        expectCode(Code.NOCHILDRENFOREPHEMERALS, () -> zk.create(root + "/e/c", null, Ids.OPEN_ACL_UNSAFE,
                CreateMode.PERSISTENT));
        expectCode(Code.NOCHILDRENFOREPHEMERALS, () -> zk.create(root + "/e/s", null, Ids.OPEN_ACL_UNSAFE,
                CreateMode.EPHEMERAL_SEQUENTIAL));
    }

    @Test
    void deletingTheBuiltInZookeeperNodesFailsWithBadArguments() throws Exception {
        ZooKeeper zk = connect();
        expectCode(Code.BADARGUMENTS, () -> zk.delete("/zookeeper", -1));
        expectCode(Code.BADARGUMENTS, () -> zk.delete("/zookeeper/quota", -1));
        expectCode(Code.BADARGUMENTS, () -> zk.delete("/zookeeper/config", -1));
        assertNotNull(zk.exists("/zookeeper/config", false));
    }

    @Test
    void malformedOrUnauthenticatedAclsFailWithInvalidAcl() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "invalidacl");
        // "auth" ids need an authenticated identity; this connection has only its ip.
        expectCode(Code.INVALIDACL, () -> zk.create(root + "/a", null, Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT));
        List<ACL> badIp = Arrays.asList(new ACL(ZooDefs.Perms.ALL, new Id("ip", "not-an-ip")));
        expectCode(Code.INVALIDACL, () -> zk.create(root + "/b", null, badIp, CreateMode.PERSISTENT));
        List<ACL> badScheme = Arrays.asList(new ACL(ZooDefs.Perms.ALL, new Id("nosuchscheme", "x")));
        expectCode(Code.INVALIDACL, () -> zk.create(root + "/c", null, badScheme, CreateMode.PERSISTENT));
        List<ACL> badWorld = Arrays.asList(new ACL(ZooDefs.Perms.ALL, new Id("world", "someone")));
        expectCode(Code.INVALIDACL, () -> zk.setACL(root, badWorld, -1));
        expectCode(Code.INVALIDACL, () -> zk.setACL(root, Ids.CREATOR_ALL_ACL, -1));
        assertNull(zk.exists(root + "/a", false));
        assertNull(zk.exists(root + "/b", false));
        assertNull(zk.exists(root + "/c", false));
    }

    @Test
    void ttlNodesAreUnimplementedWhenExtendedTypesAreOff() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "ttloff");
        expectCode(Code.UNIMPLEMENTED, () -> zk.create(root + "/t", null, Ids.OPEN_ACL_UNSAFE,
                CreateMode.PERSISTENT_WITH_TTL, new Stat(), 10_000));
        expectCode(Code.UNIMPLEMENTED, () -> zk.create(root + "/t", null, Ids.OPEN_ACL_UNSAFE,
                CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL, new Stat(), 10_000));
        // The session survives the error: the server keeps talking to us.
        assertNull(zk.exists(root + "/t", false));
    }

    @Test
    void reconfigOnADefaultStandaloneServerFailsWithReconfigDisabled() throws Exception {
        try (ZooKeeperAdmin admin = new ZooKeeperAdmin(server.hostPort(), SESSION_TIMEOUT_MS, e -> { })) {
            expectCode(Code.RECONFIGDISABLED, () -> admin.reconfigure(null, "1", null, -1, new Stat()));
            expectCode(Code.RECONFIGDISABLED, () -> admin.reconfigure(
                    "server.5=127.0.0.1:12345:12346;127.0.0.1:12347", null, null, -1, new Stat()));
        }
    }
}
