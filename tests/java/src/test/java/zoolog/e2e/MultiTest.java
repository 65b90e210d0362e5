package zoolog.e2e;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.KeeperException.Code;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.ZooDefs.Ids;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;
import org.junit.jupiter.api.Test;
import zoolog.e2e.support.Events;
import zoolog.e2e.support.ZkTestBase;

/** multi (transactions of create/delete/setData/check) and multi with read ops (multiRead). */
class MultiTest extends ZkTestBase {

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void successfulMultiReturnsOneTypedResultPerOpAndAppliesAtOneZxid() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "multi");
        zk.create(root + "/old", bytes("o"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/gone", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        List<OpResult> results = zk.multi(List.of(
                Op.check(root + "/old", 0),
                Op.create(root + "/new", bytes("n"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                Op.create(root + "/seq-", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL),
                Op.setData(root + "/new", bytes("n2"), 0),
                Op.setData(root + "/old", bytes("o2"), -1),
                Op.delete(root + "/gone", 0)));
        assertEquals(6, results.size());
        assertInstanceOf(OpResult.CheckResult.class, results.get(0));
        OpResult.CreateResult c1 = assertInstanceOf(OpResult.CreateResult.class, results.get(1));
        assertEquals(root + "/new", c1.getPath());
        OpResult.CreateResult c2 = assertInstanceOf(OpResult.CreateResult.class, results.get(2));
        assertEquals(root + "/seq-0000000003", c2.getPath(), "sequence uses the parent counter (3 creates before)");
        OpResult.SetDataResult s1 = assertInstanceOf(OpResult.SetDataResult.class, results.get(3));
        assertEquals(1, s1.getStat().getVersion(), "ops see the effects of earlier ops in the same multi");
        OpResult.SetDataResult s2 = assertInstanceOf(OpResult.SetDataResult.class, results.get(4));
        assertInstanceOf(OpResult.DeleteResult.class, results.get(5));
        for (OpResult r : results) {
            assertEquals(r.getType(), r.getType()); // every result has a real op type, none is an error
            assertTrue(!(r instanceof OpResult.ErrorResult), "no error results: " + results);
        }

        Stat created = zk.exists(root + "/new", false);
        assertEquals(s1.getStat(), created);
        assertEquals(created.getCzxid(), s2.getStat().getMzxid(), "all ops share one zxid");
        assertArrayEquals(bytes("o2"), zk.getData(root + "/old", false, null));
        assertNull(zk.exists(root + "/gone", false));
    }

    @Test
    void create2InsideMultiReportsTheStatOfTheNewNode() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "multi2");
        // Op.create with a CONTAINER mode is sent as createContainer and answered as a create2 result.
        List<OpResult> results = zk.multi(List.of(
                Op.create(root + "/c", bytes("x"), Ids.OPEN_ACL_UNSAFE, CreateMode.CONTAINER)));
        OpResult.CreateResult r = assertInstanceOf(OpResult.CreateResult.class, results.get(0));
        assertEquals(root + "/c", r.getPath());
        assertNotNull(r.getStat(), "create2-style result carries a Stat");
        assertEquals(zk.exists(root + "/c", false), r.getStat());
        assertEquals(0, r.getStat().getEphemeralOwner(), "containers report ephemeralOwner 0");
    }

    @Test
    void failedMultiReportsOkThenTheRealCodeThenRuntimeInconsistencyAndChangesNothing() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "multifail");
        zk.create(root + "/x", bytes("x0"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        Events events = new Events();
        zk.getData(root + "/x", events, null);
        zk.exists(root + "/a", events);
        List<Op> ops = List.of(
                Op.create(root + "/a", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                Op.delete(root + "/missing", -1),
                Op.setData(root + "/x", bytes("x1"), -1));
        KeeperException e = expectCode(Code.NONODE, () -> zk.multi(ops));
        List<OpResult> results = e.getResults();
        assertEquals(3, results.size());
        int[] expected = {Code.OK.intValue(), Code.NONODE.intValue(), Code.RUNTIMEINCONSISTENCY.intValue()};
        for (int i = 0; i < 3; i++) {
            OpResult.ErrorResult er = assertInstanceOf(OpResult.ErrorResult.class, results.get(i));
            assertEquals(expected[i], er.getErr(), "result " + i);
        }
        assertNull(zk.exists(root + "/a", false));
        assertArrayEquals(bytes("x0"), zk.getData(root + "/x", false, null));
        barrier(zk);
        assertEquals(List.of(), events.drainNodeEvents(), "a rolled-back multi fires no watches");
    }

    @Test
    void failedCheckVersionAbortsTheWholeMulti() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "multicheck");
        zk.create(root + "/v", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        KeeperException e = expectCode(Code.BADVERSION, () -> zk.multi(List.of(
                Op.setData(root + "/v", bytes("1"), -1),
                Op.check(root + "/v", 0), // version is 1 by now
                Op.create(root + "/w", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT))));
        assertEquals(List.of(0, Code.BADVERSION.intValue(), Code.RUNTIMEINCONSISTENCY.intValue()),
                errCodes(e.getResults()));
        expectCode(Code.NONODE, () -> zk.multi(List.of(Op.check(root + "/nope", -1))));
        expectCode(Code.NODEEXISTS, () -> zk.multi(List.of(
                Op.create(root + "/dup", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                Op.create(root + "/dup", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT))));
        expectCode(Code.NOTEMPTY, () -> zk.multi(List.of(
                Op.create(root + "/v/kid", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                Op.delete(root + "/v", -1))));
        assertEquals(0, zk.exists(root + "/v", false).getVersion());
        assertEquals(List.of("v"), zk.getChildren(root, false));
    }

    private static List<Integer> errCodes(List<OpResult> results) {
        List<Integer> out = new ArrayList<>();
        for (OpResult r : results) {
            out.add(((OpResult.ErrorResult) r).getErr());
        }
        return out;
    }

    @Test
    void asyncMultiDeliversTheFirstErrorCodeAndPerOpResults() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "multiasync");
        CountDownLatch done = new CountDownLatch(2);
        int[] rcs = new int[2];
        List<List<OpResult>> got = new ArrayList<>(List.of(List.of(), List.of()));
        zk.multi(List.of(Op.create(root + "/ok", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)),
                (rc, path, ctx, results) -> {
                    rcs[0] = rc;
                    got.set(0, results);
                    done.countDown();
                }, null);
        zk.multi(List.of(
                        Op.setData(root + "/ok", null, -1),
                        Op.create(root + "/ok", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                        Op.delete(root + "/ok", -1)),
                (rc, path, ctx, results) -> {
                    rcs[1] = rc;
                    got.set(1, results);
                    done.countDown();
                }, null);
        assertTrue(done.await(WAIT_S, TimeUnit.SECONDS));
        assertEquals(0, rcs[0]);
        assertInstanceOf(OpResult.CreateResult.class, got.get(0).get(0));
        assertEquals(Code.NODEEXISTS.intValue(), rcs[1]);
        assertEquals(List.of(0, Code.NODEEXISTS.intValue(), Code.RUNTIMEINCONSISTENCY.intValue()),
                errCodes(got.get(1)));
        assertEquals(0, zk.exists(root + "/ok", false).getVersion());
    }

    @Test
    void multiWithReadOpsReturnsDataChildrenAndPerOpErrorsWithoutThrowing() throws Exception {
        ZooKeeper zk = connect();
        String root = uniqueRoot(zk, "multiread");
        zk.create(root + "/d", bytes("payload"), Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/d/k1", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        zk.create(root + "/d/k2", null, Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        List<OpResult> results = zk.multi(List.of(
                Op.getData(root + "/d"),
                Op.getChildren(root + "/d"),
                Op.getData(root + "/missing"),
                Op.getChildren(root + "/missing")));
        assertEquals(4, results.size());
        OpResult.GetDataResult data = assertInstanceOf(OpResult.GetDataResult.class, results.get(0));
        assertArrayEquals(bytes("payload"), data.getData());
        assertEquals(zk.exists(root + "/d", false), data.getStat());
        OpResult.GetChildrenResult kids = assertInstanceOf(OpResult.GetChildrenResult.class, results.get(1));
        assertEquals(List.of("k1", "k2"), sorted(kids.getChildren()));
        assertEquals(Code.NONODE.intValue(), assertInstanceOf(OpResult.ErrorResult.class, results.get(2)).getErr());
        assertEquals(Code.NONODE.intValue(), assertInstanceOf(OpResult.ErrorResult.class, results.get(3)).getErr());
    }

    @Test
    void emptyMultiSucceedsWithNoResults() throws Exception {
        ZooKeeper zk = connect();
        assertEquals(List.of(), zk.multi(List.of()));
    }
}
