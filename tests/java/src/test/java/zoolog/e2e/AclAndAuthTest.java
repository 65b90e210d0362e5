package zoolog.e2e;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException.Code;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooDefs.Perms;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.data.Stat;
import org.apache.zookeeper.server.auth.DigestAuthenticationProvider;
import org.junit.jupiter.api.Test;
import zoolog.e2e.support.Events;
import zoolog.e2e.support.ZkTestBase;

/** digest auth (addAuthInfo), ACL enforcement per permission bit, getACL/setACL and redaction. */
class AclAndAuthTest extends ZkTestBase {

    private static byte[] auth(String userPass) {
        return userPass.getBytes(StandardCharsets.UTF_8);
    }

    private static Id digestId(String userPass) throws Exception {
        return new Id("digest", DigestAuthenticationProvider.generateDigest(userPass));
    }

    @Test
    void authSchemeAclExpandsToTheDigestIdentityAndLocksOutOthers() throws Exception {
        ZooKeeper alice = connect();
        alice.addAuthInfo("digest", auth("alice:secret"));
        ZooKeeper anon = connect();
        ZooKeeper wrongPw = connect();
        wrongPw.addAuthInfo("digest", auth("alice:wrong"));
        String root = uniqueRoot(alice, "authacl");
        String p = root + "/private";
        alice.create(p, auth("data"), Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT);

        Stat st = new Stat();
        List<ACL> acl = alice.getACL(p, st);
        assertEquals(List.of(new ACL(Perms.ALL, digestId("alice:secret"))), acl);
        assertEquals(0, st.getAversion());
        assertArrayEquals(auth("data"), alice.getData(p, false, null));

        for (ZooKeeper zk : List.of(anon, wrongPw)) {
            expectCode(Code.NOAUTH, () -> zk.getData(p, false, null));
            expectCode(Code.NOAUTH, () -> zk.setData(p, auth("x"), -1));
            expectCode(Code.NOAUTH, () -> zk.getChildren(p, false));
            expectCode(Code.NOAUTH, () -> zk.create(p + "/c", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
            expectCode(Code.NOAUTH, () -> zk.setACL(p, Ids.OPEN_ACL_UNSAFE, -1));
            expectCode(Code.NOAUTH, () -> zk.getACL(p, new Stat()));
        }
        assertArrayEquals(auth("data"), alice.getData(p, false, null), "denied writes changed nothing");
    }

    @Test
    void eachPermissionBitGuardsItsOwnOperation() throws Exception {
        ZooKeeper owner = connect();
        owner.addAuthInfo("digest", auth("owner:pw"));
        ZooKeeper user = connect();
        String root = uniqueRoot(owner, "perms");
        Id ownerId = digestId("owner:pw");
        // world gets READ|CREATE only; owner gets everything.
        List<ACL> acl = Arrays.asList(new ACL(Perms.READ | Perms.CREATE, Ids.ANYONE_ID_UNSAFE), new ACL(Perms.ALL, ownerId));
        String p = root + "/guarded";
        owner.create(p, auth("v"), acl, CreateMode.PERSISTENT);

        assertArrayEquals(auth("v"), user.getData(p, false, null));
        user.create(p + "/child", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        expectCode(Code.NOAUTH, () -> user.setData(p, auth("w"), -1));
        expectCode(Code.NOAUTH, () -> user.delete(p + "/child", -1)); // DELETE on the parent
        expectCode(Code.NOAUTH, () -> user.setACL(p, Ids.OPEN_ACL_UNSAFE, -1));

        owner.delete(p + "/child", -1);
        owner.setData(p, auth("w"), -1);
        Stat st = owner.setACL(p, Ids.OPEN_ACL_UNSAFE, 0);
        assertEquals(1, st.getAversion());
        assertEquals(1, st.getVersion(), "setACL leaves the data version alone");
        user.setData(p, auth("now open"), -1);
    }

    @Test
    void getAclRedactsDigestHashesForCallersWithoutAdmin() throws Exception {
        ZooKeeper owner = connect();
        owner.addAuthInfo("digest", auth("bob:pw"));
        ZooKeeper reader = connect();
        String root = uniqueRoot(owner, "redact");
        Id bob = digestId("bob:pw");
        String p = root + "/n";
        owner.create(p, null, Arrays.asList(new ACL(Perms.ALL, bob), new ACL(Perms.READ, Ids.ANYONE_ID_UNSAFE)),
                CreateMode.PERSISTENT);

        List<ACL> full = owner.getACL(p, new Stat());
        assertTrue(full.contains(new ACL(Perms.ALL, bob)), "admin sees the hash: " + full);

        List<ACL> redacted = reader.getACL(p, new Stat());
        assertEquals(2, redacted.size());
        assertTrue(redacted.contains(new ACL(Perms.ALL, new Id("digest", "bob:x"))), "redacted: " + redacted);
        assertTrue(redacted.contains(new ACL(Perms.READ, Ids.ANYONE_ID_UNSAFE)));
    }

    @Test
    void whoAmIReportsTheDigestUserAfterAddAuthInfo() throws Exception {
        ZooKeeper zk = connect();
        zk.addAuthInfo("digest", auth("carol:pw"));
        Set<String> seen = new HashSet<>();
        for (ClientInfo ci : zk.whoAmI()) {
            seen.add(ci.getAuthScheme() + ":" + ci.getUser());
        }
        assertEquals(Set.of("ip:127.0.0.1", "digest:carol"), seen);
    }

    @Test
    void aclsAreCheckedInsideMultiToo() throws Exception {
        ZooKeeper owner = connect();
        owner.addAuthInfo("digest", auth("erin:pw"));
        ZooKeeper other = connect();
        String root = uniqueRoot(owner, "multiacl");
        owner.create(root + "/locked", null, Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT);
        expectCode(Code.NOAUTH, () -> other.multi(List.of(
                Op.create(root + "/ok", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                Op.setData(root + "/locked", auth("x"), -1))));
        assertNull(other.exists(root + "/ok", false), "the multi was rolled back");
    }

    @Test
    void existsRequiresReadPermissionOnAnExistingNode() throws Exception {
        assumeServerIs39Behaviour("exists checks READ since 3.8.4/3.9.2 (ZOOKEEPER-2590)");
        ZooKeeper owner = connect();
        owner.addAuthInfo("digest", auth("frank:pw"));
        ZooKeeper other = connect();
        String root = uniqueRoot(owner, "existsacl");
        owner.create(root + "/secret", null, Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT);
        expectCode(Code.NOAUTH, () -> other.exists(root + "/secret", false));
        assertNull(other.exists(root + "/nothing", false), "missing nodes still give null");
    }

    @Test
    void watchEventsAreNotDeliveredForNodesTheWatcherCannotRead() throws Exception {
        assumeServerIs39Behaviour("events are ACL-filtered since 3.8.4/3.9.2 (CVE-2024-23944)");
        ZooKeeper owner = connect();
        owner.addAuthInfo("digest", auth("gina:pw"));
        ZooKeeper other = connect();
        String root = uniqueRoot(owner, "eventacl");
        Events events = new Events();
        other.exists(root + "/hidden", events);
        other.exists(root + "/visible", events);
        owner.create(root + "/hidden", null, Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT);
        owner.create(root + "/visible", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        assertEquals("NodeCreated " + root + "/visible", Events.describe(events.next()));
        barrier(other);
        assertEquals(List.of(), events.drainNodeEvents());
    }
}
