package zoolog.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.Closeable;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.barriers.DistributedBarrier;
import org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.nodes.GroupMember;
import org.apache.curator.framework.recipes.queue.SimpleDistributedQueue;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.SharedCountListener;
import org.apache.curator.framework.recipes.shared.SharedCountReader;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;
import org.apache.curator.utils.Compatibility;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import zoolog.e2e.support.ZkTestBase;

/**
 * The ZooKeeper paper's coordination recipes as Apache Curator (a real third-party client on top of the
 * suite's zookeeper 3.9.3 client) implements them: locks, semaphores, leader election, barriers, queues,
 * group membership, a subtree cache and counters. Every recipe runs across several CuratorFramework
 * clients, each with its own session, with real concurrency; outcomes are checked both in the JVM
 * (overlap detectors) and on the server (read-modify-write counters that lose updates if exclusion breaks).
 * Waits are bounded: recipe timeouts, latches, futures and watch-driven waits of {@link ZkTestBase#WAIT_S}.
 */
class CuratorRecipesTest extends ZkTestBase {
    private static final int CLIENTS = 4;

    private final List<CuratorFramework> curators = new CopyOnWriteArrayList<>();
    private final List<Closeable> recipes = new CopyOnWriteArrayList<>();
    private ExecutorService pool;

    @BeforeEach
    void startPool() {
        pool = Executors.newCachedThreadPool();
    }

    @AfterEach
    void closeCurators() throws InterruptedException {
        List<Closeable> r = new ArrayList<>(recipes);
        recipes.clear();
        Collections.reverse(r);
        r.forEach(CuratorRecipesTest::closeQuietly); // a recipe a test already closed may throw
        pool.shutdownNow();
        pool.awaitTermination(WAIT_S, TimeUnit.SECONDS);
        List<CuratorFramework> c = new ArrayList<>(curators);
        curators.clear();
        c.forEach(CuratorRecipesTest::closeQuietly);
    }

    private static void closeQuietly(Closeable c) {
        try {
            c.close();
        } catch (Exception e) {
            // already closed, or its client is
        }
    }

    /**
     * A started Curator client with its own session, connected (bounded wait). The ensemble tracker is off
     * so Curator never rewrites the connect string from /zookeeper/config: under ZK_TOPOLOGY=ensemble every
     * client stays on the member tests/zk-server picked.
     */
    private CuratorFramework curator() throws InterruptedException {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(server.hostPort())
                .sessionTimeoutMs(SESSION_TIMEOUT_MS)
                .connectionTimeoutMs(15_000)
                .retryPolicy(new ExponentialBackoffRetry(100, 5))
                .ensembleTracker(false)
                .build();
        curators.add(c);
        c.start();
        assertTrue(c.blockUntilConnected((int) WAIT_S, TimeUnit.SECONDS), "Curator client not connected");
        return c;
    }

    private <T extends Closeable> T closeLater(T recipe) {
        recipes.add(recipe);
        return recipe;
    }

    private static ZooKeeper zk(CuratorFramework c) throws Exception {
        return c.getZookeeperClient().getZooKeeper();
    }

    private static long sessionId(CuratorFramework c) throws Exception {
        return zk(c).getSessionId();
    }

    private String root(CuratorFramework admin, String name) throws Exception {
        return uniqueRoot(zk(admin), "curator-" + name);
    }

    private static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    private <T> Future<T> spawn(Callable<T> task) {
        return pool.submit(task);
    }

    /** The task's result within WAIT_S; its exception or assertion failure is rethrown as is. */
    private static <T> T result(Future<T> f) throws Exception {
        try {
            return f.get(WAIT_S, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof Exception) {
                throw (Exception) cause;
            }
            if (cause instanceof Error) {
                throw (Error) cause;
            }
            throw e;
        } catch (TimeoutException e) {
            throw new AssertionError("task did not finish within " + WAIT_S + " s", e);
        }
    }

    private static void resultsOf(List<? extends Future<?>> futures) throws Exception {
        for (Future<?> f : futures) {
            result(f);
        }
    }

    /**
     * Waits, driven by child watches (no polling), until the children of path satisfy done; returns them
     * sorted. A path not created yet (recipes create their parents in the background) waits on an exists
     * watch instead.
     */
    private static List<String> awaitChildren(CuratorFramework c, String path, Predicate<List<String>> done,
            String what) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (true) {
            LinkedBlockingQueue<WatchedEvent> fired = new LinkedBlockingQueue<>();
            List<String> kids = childrenOrAwaitCreation(c, path, fired::add);
            if (kids == null) {
                continue;
            }
            if (done.test(kids)) {
                return kids;
            }
            long left = deadline - System.nanoTime();
            if (left <= 0 || fired.poll(left, TimeUnit.NANOSECONDS) == null) {
                fail(what + ": children of " + path + " still " + kids + " after " + WAIT_S + " s");
            }
        }
    }

    /**
     * The sorted children of path, each change reported to watcher; or, when path does not exist yet, an
     * empty list with watcher set to report its creation; or null when it was created in between.
     */
    private static List<String> childrenOrAwaitCreation(CuratorFramework c, String path, Watcher watcher)
            throws Exception {
        try {
            return sorted(c.getChildren().usingWatcher(watcher).forPath(path));
        } catch (KeeperException.NoNodeException e) {
            return c.checkExists().usingWatcher(watcher).forPath(path) == null ? List.of() : null;
        }
    }

    /** Waits, driven by exists watches, until the node's Stat (null when absent) satisfies done. */
    private static Stat awaitNode(CuratorFramework c, String path, Predicate<Stat> done, String what)
            throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (true) {
            LinkedBlockingQueue<WatchedEvent> fired = new LinkedBlockingQueue<>();
            Stat st = c.checkExists().usingWatcher((Watcher) fired::add).forPath(path);
            if (done.test(st)) {
                return st;
            }
            long left = deadline - System.nanoTime();
            if (left <= 0 || fired.poll(left, TimeUnit.NANOSECONDS) == null) {
                fail(what + ": " + path + " still " + st + " after " + WAIT_S + " s");
            }
        }
    }

    /**
     * Reads a counter node and writes it back incremented with an unconditional setData: two holders
     * overlapping inside a critical section lose an update, which the final value shows.
     */
    private static void unguardedIncrement(CuratorFramework c, String path) throws Exception {
        int v = Integer.parseInt(str(c.getData().forPath(path)));
        c.setData().forPath(path, bytes(Integer.toString(v + 1)));
    }

    /** Records the largest number of concurrent holders seen. */
    private static final class Overlap {
        private final AtomicInteger inside = new AtomicInteger();
        private final AtomicInteger max = new AtomicInteger();

        void enter() {
            int n = inside.incrementAndGet();
            max.accumulateAndGet(n, Math::max);
        }

        void exit() {
            inside.decrementAndGet();
        }

        int max() {
            return max.get();
        }
    }

    // ---------------------------------------------------------------- locks

    @Test
    void interProcessMutexExcludesAcrossSessions() throws Exception {
        CuratorFramework admin = curator();
        String root = root(admin, "mutex");
        String lockPath = root + "/lock";
        String counter = root + "/counter";
        admin.create().forPath(counter, bytes("0"));
        int rounds = 8;
        Overlap overlap = new Overlap();
        List<Future<?>> work = new ArrayList<>();
        for (int i = 0; i < CLIENTS; i++) {
            CuratorFramework c = curator();
            InterProcessMutex mutex = new InterProcessMutex(c, lockPath);
            work.add(spawn(() -> {
                for (int r = 0; r < rounds; r++) {
                    assertTrue(mutex.acquire(WAIT_S, TimeUnit.SECONDS), "mutex not acquired");
                    try {
                        assertTrue(mutex.isOwnedByCurrentThread());
                        overlap.enter();
                        unguardedIncrement(c, counter);
                        overlap.exit();
                    } finally {
                        mutex.release();
                    }
                }
                return null;
            }));
        }
        resultsOf(work);
        assertEquals(1, overlap.max(), "two sessions held the mutex at once");
        assertEquals(Integer.toString(CLIENTS * rounds), str(admin.getData().forPath(counter)),
                "lost updates inside the mutex");
        assertEquals(List.of(), admin.getChildren().forPath(lockPath), "lock nodes left behind");
    }

    @Test
    void closingTheMutexHoldersSessionHandsTheLockToTheWaiter() throws Exception {
        CuratorFramework admin = curator();
        String lockPath = root(admin, "mutexclose") + "/lock";
        CuratorFramework holderClient = curator();
        InterProcessMutex holder = new InterProcessMutex(holderClient, lockPath);
        assertTrue(holder.acquire(WAIT_S, TimeUnit.SECONDS));
        String holderNode = awaitChildren(admin, lockPath, k -> k.size() == 1, "holder's lock node").get(0);

        CuratorFramework waiterClient = curator();
        InterProcessMutex waiter = new InterProcessMutex(waiterClient, lockPath);
        CountDownLatch acquired = new CountDownLatch(1);
        CountDownLatch releaseNow = new CountDownLatch(1);
        Future<?> waiting = spawn(() -> {
            assertTrue(waiter.acquire(WAIT_S, TimeUnit.SECONDS), "waiter never got the lock");
            acquired.countDown();
            assertTrue(releaseNow.await(WAIT_S, TimeUnit.SECONDS));
            waiter.release();
            return null;
        });
        List<String> queued = awaitChildren(admin, lockPath, k -> k.size() == 2, "waiter's lock node");
        assertEquals(holderNode, queued.stream().min((a, b) -> a.substring(a.lastIndexOf('-'))
                .compareTo(b.substring(b.lastIndexOf('-')))).get(), "holder's node is first in line");
        assertEquals(1, acquired.getCount(), "waiter got the lock while the holder's session is open");

        // The holder never releases: its session ends, the server deletes its ephemeral lock node, and
        // the waiter's watch on that node hands it the lock.
        holderClient.close();
        assertTrue(acquired.await(WAIT_S, TimeUnit.SECONDS), "lock not handed over after the holder's session closed");
        List<String> now = admin.getChildren().forPath(lockPath);
        assertEquals(1, now.size(), "lock nodes: " + now);
        assertFalse(now.contains(holderNode), "closed session's lock node still there");
        assertEquals(sessionId(waiterClient),
                admin.checkExists().forPath(lockPath + "/" + now.get(0)).getEphemeralOwner());
        releaseNow.countDown();
        result(waiting);
        assertEquals(List.of(), admin.getChildren().forPath(lockPath));
    }

    @Test
    void semaphoreNeverHandsOutMoreThanMaxLeases() throws Exception {
        CuratorFramework admin = curator();
        String root = root(admin, "semaphore");
        String semPath = root + "/sem";
        int maxLeases = 2;
        int rounds = 5;
        Overlap overlap = new Overlap();
        List<Future<?>> work = new ArrayList<>();
        List<InterProcessSemaphoreV2> sems = new ArrayList<>();
        for (int i = 0; i < CLIENTS; i++) {
            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(curator(), semPath, maxLeases);
            sems.add(sem);
            work.add(spawn(() -> {
                for (int r = 0; r < rounds; r++) {
                    Lease lease = sem.acquire(WAIT_S, TimeUnit.SECONDS);
                    assertNotNull(lease, "no lease");
                    overlap.enter();
                    overlap.exit();
                    sem.returnLease(lease);
                }
                return null;
            }));
        }
        resultsOf(work);
        assertTrue(overlap.max() <= maxLeases, "leases held at once: " + overlap.max());

        // Deterministically: two holders at once are allowed, a third waits until one returns its lease.
        Lease a = sems.get(0).acquire(WAIT_S, TimeUnit.SECONDS);
        Lease b = sems.get(1).acquire(WAIT_S, TimeUnit.SECONDS);
        assertNotNull(a);
        assertNotNull(b);
        CountDownLatch thirdIn = new CountDownLatch(1);
        Future<Lease> third = spawn(() -> {
            Lease l = sems.get(2).acquire(WAIT_S, TimeUnit.SECONDS);
            thirdIn.countDown();
            return l;
        });
        awaitChildren(admin, semPath + "/leases", k -> k.size() == 3, "third lease node");
        assertEquals(1, thirdIn.getCount(), "a third lease was granted with max " + maxLeases);
        sems.get(0).returnLease(a);
        Lease c = result(third);
        assertNotNull(c, "third never got a lease after one was returned");
        assertEquals(2, sems.get(3).getParticipantNodes().size());
        sems.get(1).returnLease(b);
        sems.get(2).returnLease(c);
        assertEquals(List.of(), admin.getChildren().forPath(semPath + "/leases"));
    }

    @Test
    void readWriteLockSharesReadersAndExcludesWriters() throws Exception {
        CuratorFramework admin = curator();
        String lockPath = root(admin, "rwlock") + "/lock";
        InterProcessReadWriteLock r1 = new InterProcessReadWriteLock(curator(), lockPath);
        InterProcessReadWriteLock r2 = new InterProcessReadWriteLock(curator(), lockPath);
        InterProcessReadWriteLock w = new InterProcessReadWriteLock(curator(), lockPath);

        // Two readers in different sessions hold the read lock together (same thread is fine: the read
        // locks are separate InterProcessMutex instances).
        assertTrue(r1.readLock().acquire(WAIT_S, TimeUnit.SECONDS));
        assertTrue(r2.readLock().acquire(WAIT_S, TimeUnit.SECONDS), "second reader blocked by the first");

        CountDownLatch writerIn = new CountDownLatch(1);
        CountDownLatch writerRelease = new CountDownLatch(1);
        Future<?> writer = spawn(() -> {
            assertTrue(w.writeLock().acquire(WAIT_S, TimeUnit.SECONDS), "writer never got the lock");
            writerIn.countDown();
            assertTrue(writerRelease.await(WAIT_S, TimeUnit.SECONDS));
            w.writeLock().release();
            return null;
        });
        awaitChildren(admin, lockPath, k -> k.size() == 3, "writer queued behind two readers");
        assertEquals(1, writerIn.getCount(), "writer got the lock while readers hold it");
        r1.readLock().release();
        awaitChildren(admin, lockPath, k -> k.size() == 2, "first reader gone");
        assertEquals(1, writerIn.getCount(), "writer got the lock while a reader holds it");
        r2.readLock().release();
        assertTrue(writerIn.await(WAIT_S, TimeUnit.SECONDS), "writer not admitted after the readers left");

        // A reader now waits for the writer.
        CountDownLatch readerIn = new CountDownLatch(1);
        Future<?> reader = spawn(() -> {
            assertTrue(r1.readLock().acquire(WAIT_S, TimeUnit.SECONDS), "reader never got the lock");
            readerIn.countDown();
            r1.readLock().release();
            return null;
        });
        awaitChildren(admin, lockPath, k -> k.size() == 2, "reader queued behind the writer");
        assertEquals(1, readerIn.getCount(), "reader got the lock while the writer holds it");
        writerRelease.countDown();
        result(writer);
        result(reader);
        assertEquals(List.of(), admin.getChildren().forPath(lockPath));
    }

    // ---------------------------------------------------------------- leader election

    @Test
    void leaderLatchHasOneLeaderAndFailsOverWhenTheLeaderGoes() throws Exception {
        CuratorFramework admin = curator();
        String path = root(admin, "latch") + "/election";
        int n = 3;
        LinkedBlockingQueue<String> elected = new LinkedBlockingQueue<>();
        Map<String, LeaderLatch> open = new HashMap<>();
        Map<String, CuratorFramework> clientOf = new HashMap<>();
        for (int i = 0; i < n; i++) {
            String id = "p" + i;
            CuratorFramework c = curator();
            LeaderLatch latch = closeLater(new LeaderLatch(c, path, id, LeaderLatch.CloseMode.NOTIFY_LEADER));
            latch.addListener(new LeaderLatchListener() {
                @Override
                public void isLeader() {
                    elected.add(id);
                }

                @Override
                public void notLeader() {
                }
            });
            open.put(id, latch);
            clientOf.put(id, c);
        }
        for (LeaderLatch l : open.values()) {
            l.start();
        }
        String leader = nextLeader(elected);
        awaitChildren(admin, path, k -> k.size() == n, "all participants");
        assertExactlyOneLeader(open, leader);

        // The leader's session closes: its ephemeral node goes and another participant is elected.
        clientOf.get(leader).close();
        open.remove(leader);
        String second = nextLeader(elected);
        assertNotEquals(leader, second);
        assertExactlyOneLeader(open, second);

        // The new leader closes its latch: the last one is elected.
        open.remove(second).close();
        String third = nextLeader(elected);
        assertFalse(List.of(leader, second).contains(third));
        assertExactlyOneLeader(open, third);
        assertTrue(elected.isEmpty(), "extra elections: " + elected);
    }

    /** The queue's next element within WAIT_S, or a failure that says what did not come. */
    private static String next(LinkedBlockingQueue<String> queue, String what) throws InterruptedException {
        String element = queue.poll(WAIT_S, TimeUnit.SECONDS);
        assertNotNull(element, "no " + what + " within " + WAIT_S + " s");
        return element;
    }

    private static String nextLeader(LinkedBlockingQueue<String> elected) throws InterruptedException {
        return next(elected, "leader elected");
    }

    private static void assertExactlyOneLeader(Map<String, LeaderLatch> open, String leader) throws Exception {
        List<String> believers = new ArrayList<>();
        for (Map.Entry<String, LeaderLatch> e : open.entrySet()) {
            if (e.getValue().hasLeadership()) {
                believers.add(e.getKey());
            }
        }
        assertEquals(List.of(leader), believers, "participants that think they lead");
        for (LeaderLatch l : open.values()) {
            assertEquals(leader, l.getLeader().getId(), "leader as " + l.getId() + " reads it from the server");
            assertEquals(open.size(), l.getParticipants().size());
        }
    }

    @Test
    void leaderSelectorTermsNeverOverlap() throws Exception {
        CuratorFramework admin = curator();
        String root = root(admin, "selector");
        String counter = root + "/terms";
        admin.create().forPath(counter, bytes("0"));
        int totalTerms = 9;
        Overlap overlap = new Overlap();
        AtomicInteger terms = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(totalTerms);
        for (int i = 0; i < 3; i++) {
            CuratorFramework c = curator();
            LeaderSelector selector = closeLater(new LeaderSelector(c, root + "/election",
                    new LeaderSelectorListenerAdapter() {
                        @Override
                        public void takeLeadership(CuratorFramework client) throws Exception {
                            if (terms.get() >= totalTerms) {
                                return; // enough terms: give leadership straight back
                            }
                            overlap.enter();
                            unguardedIncrement(client, counter);
                            terms.incrementAndGet();
                            overlap.exit();
                            done.countDown();
                        }
                    }));
            selector.setId("s" + i);
            selector.autoRequeue();
            selector.start();
        }
        assertTrue(done.await(WAIT_S, TimeUnit.SECONDS), "only " + terms.get() + " leadership terms");
        assertEquals(1, overlap.max(), "two leaders at once");
        assertEquals(Integer.toString(totalTerms), str(admin.getData().forPath(counter)),
                "lost updates made by leaders");
    }

    // ---------------------------------------------------------------- barriers

    @Test
    void doubleBarrierAdmitsNoOneUntilAllEnterAndReleasesNoOneUntilAllLeave() throws Exception {
        CuratorFramework admin = curator();
        String path = root(admin, "doublebarrier") + "/barrier";
        AtomicInteger arrived = new AtomicInteger();
        AtomicInteger leaving = new AtomicInteger();
        List<Future<?>> work = new ArrayList<>();
        for (int i = 0; i < CLIENTS; i++) {
            DistributedDoubleBarrier barrier = new DistributedDoubleBarrier(curator(), path, CLIENTS);
            work.add(spawn(() -> {
                arrived.incrementAndGet();
                assertTrue(barrier.enter(WAIT_S, TimeUnit.SECONDS), "enter timed out");
                assertEquals(CLIENTS, arrived.get(), "entered before everyone arrived");
                leaving.incrementAndGet();
                assertTrue(barrier.leave(WAIT_S, TimeUnit.SECONDS), "leave timed out");
                assertEquals(CLIENTS, leaving.get(), "left before everyone was leaving");
                return null;
            }));
        }
        resultsOf(work);
        List<String> left = new ArrayList<>(admin.getChildren().forPath(path));
        left.remove("ready");
        assertEquals(List.of(), left, "members still in the barrier");
    }

    @Test
    void barrierHoldsWaitersUntilRemoved() throws Exception {
        CuratorFramework admin = curator();
        String path = root(admin, "barrier") + "/barrier";
        DistributedBarrier control = new DistributedBarrier(curator(), path);
        control.setBarrier();
        AtomicInteger removed = new AtomicInteger();
        List<Future<?>> waiters = new ArrayList<>();
        List<Thread> waiterThreads = new CopyOnWriteArrayList<>();
        for (int i = 0; i < 3; i++) {
            DistributedBarrier barrier = new DistributedBarrier(curator(), path);
            waiters.add(spawn(() -> {
                waiterThreads.add(Thread.currentThread());
                assertTrue(barrier.waitOnBarrier(WAIT_S, TimeUnit.SECONDS), "barrier wait timed out");
                assertEquals(1, removed.get(), "released before the barrier was removed");
                return null;
            }));
        }
        // Every waiter has seen the barrier node (exists with a watch) and is parked in waitOnBarrier's
        // timed wait, so the release below really goes through the NodeDeleted watch.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (waiterThreads.size() < 3 || !waiterThreads.stream().allMatch(CuratorRecipesTest::parkedAtBarrier)) {
            assertTrue(System.nanoTime() < deadline, "waiters never blocked on the barrier");
            Thread.yield();
        }
        removed.set(1);
        control.removeBarrier();
        resultsOf(waiters);
        assertNull(admin.checkExists().forPath(path));
    }

    /** True when t is in DistributedBarrier.waitOnBarrier's Object.wait(timeout), i.e. past its exists call. */
    private static boolean parkedAtBarrier(Thread t) {
        if (t.getState() != Thread.State.TIMED_WAITING) {
            return false;
        }
        StackTraceElement[] stack = t.getStackTrace();
        for (int i = 0; i < Math.min(stack.length, 4); i++) {
            if (stack[i].getClassName().equals(DistributedBarrier.class.getName())
                    && stack[i].getMethodName().equals("waitOnBarrier")) {
                return true;
            }
        }
        return false;
    }

    // ---------------------------------------------------------------- queue

    @Test
    void simpleQueueIsFifoAndDeliversEachItemOnce() throws Exception {
        CuratorFramework admin = curator();
        String root = root(admin, "queue");

        // One producer, one consumer (another session): exact FIFO.
        SimpleDistributedQueue producer = new SimpleDistributedQueue(curator(), root + "/fifo");
        SimpleDistributedQueue consumer = new SimpleDistributedQueue(curator(), root + "/fifo");
        Future<List<String>> consumed = spawn(() -> {
            List<String> got = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                byte[] item = consumer.poll(WAIT_S, TimeUnit.SECONDS);
                assertNotNull(item, "queue item " + i + " never arrived");
                got.add(str(item));
            }
            return got;
        });
        List<String> produced = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            produced.add("item-" + i);
            assertTrue(producer.offer(bytes("item-" + i)));
        }
        assertEquals(produced, result(consumed));
        assertNull(consumer.poll(), "queue not empty");

        // Two producers, two consumers: every item exactly once, each producer's items in order (a consumer
        // always takes the lowest sequence number it sees, and a producer's later item has a higher one).
        String shared = root + "/shared";
        int perProducer = 15;
        List<Future<?>> producers = new ArrayList<>();
        for (String p : List.of("a", "b")) {
            SimpleDistributedQueue q = new SimpleDistributedQueue(curator(), shared);
            producers.add(spawn(() -> {
                for (int i = 0; i < perProducer; i++) {
                    assertTrue(q.offer(bytes(p + "-" + i)));
                }
                return null;
            }));
        }
        List<Future<List<String>>> consumers = new ArrayList<>();
        for (int c = 0; c < 2; c++) {
            SimpleDistributedQueue q = new SimpleDistributedQueue(curator(), shared);
            consumers.add(spawn(() -> {
                List<String> got = new ArrayList<>();
                while (true) {
                    byte[] item = q.poll(WAIT_S, TimeUnit.SECONDS);
                    assertNotNull(item, "queue ran dry before a stop marker; got " + got);
                    if (str(item).equals("stop")) {
                        return got;
                    }
                    got.add(str(item));
                }
            }));
        }
        resultsOf(producers);
        // Offered after every item, so each consumer's stop marker comes after all items in queue order.
        SimpleDistributedQueue stopper = new SimpleDistributedQueue(admin, shared);
        assertTrue(stopper.offer(bytes("stop")));
        assertTrue(stopper.offer(bytes("stop")));
        List<String> all = new ArrayList<>();
        for (Future<List<String>> c : consumers) {
            List<String> got = result(c);
            assertPerProducerOrder(got);
            all.addAll(got);
        }
        Set<String> want = new TreeSet<>();
        for (String p : List.of("a", "b")) {
            for (int i = 0; i < perProducer; i++) {
                want.add(p + "-" + i);
            }
        }
        assertEquals(want.size(), all.size(), "items delivered: " + all);
        assertEquals(want, new TreeSet<>(all), "items delivered");
        assertEquals(List.of(), admin.getChildren().forPath(shared), "queue not empty");
    }

    private static void assertPerProducerOrder(List<String> got) {
        Map<String, Integer> last = new HashMap<>();
        for (String item : got) {
            String[] parts = item.split("-");
            int i = Integer.parseInt(parts[1]);
            Integer prev = last.put(parts[0], i);
            assertTrue(prev == null || prev < i, "producer " + parts[0] + "'s items out of order: " + got);
        }
    }

    // ---------------------------------------------------------------- group membership

    @Test
    void groupMembersAreEphemeralAndComeBackIfDeleted() throws Exception {
        CuratorFramework admin = curator();
        String group = root(admin, "group") + "/members";
        List<CuratorFramework> clients = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            CuratorFramework c = curator();
            clients.add(c);
            closeLater(new GroupMember(c, group, "m" + i, bytes("payload-" + i))).start();
        }
        awaitChildren(admin, group, k -> k.equals(List.of("m0", "m1", "m2")), "all members joined");
        for (int i = 0; i < 3; i++) {
            Stat st = new Stat();
            assertEquals("payload-" + i, str(admin.getData().storingStatIn(st).forPath(group + "/m" + i)));
            assertEquals(sessionId(clients.get(i)), st.getEphemeralOwner(), "m" + i + " owned by its session");
        }

        // A member's session closes: it leaves the group. (Closing a client under a live GroupMember makes
        // Curator 5.9.0's PersistentNode retry its create on the stopped client until a StackOverflowError,
        // logged by the ZooKeeper event thread and harmless; the same happens against Apache 3.9.3.)
        clients.get(1).close();
        awaitChildren(admin, group, k -> k.equals(List.of("m0", "m2")), "m1 left when its session closed");

        // Someone deletes a live member's node: its PersistentNode recreates it.
        Stat before = admin.checkExists().forPath(group + "/m0");
        admin.delete().forPath(group + "/m0");
        Stat after = awaitNode(admin, group + "/m0", st -> st != null && st.getCzxid() != before.getCzxid(),
                "m0 recreated");
        assertEquals(sessionId(clients.get(0)), after.getEphemeralOwner());
        assertEquals("payload-0", str(admin.getData().forPath(group + "/m0")));
        assertEquals(List.of("m0", "m2"), sorted(admin.getChildren().forPath(group)));
    }

    // ---------------------------------------------------------------- cache

    @Test
    void curatorCacheSeesCreatesUpdatesAndDeletesOfASubtree() throws Exception {
        assertTrue(Compatibility.hasPersistentWatchers(), "Curator should use persistent recursive watches");
        CuratorFramework writer = curator();
        String root = root(writer, "cache");
        String tree = root + "/tree";
        writer.create().forPath(tree, bytes("t"));
        writer.create().forPath(tree + "/old", bytes("o"));
        writer.create().forPath(tree + "/old/kid", bytes("k"));

        CuratorFramework cacheClient = curator();
        LinkedBlockingQueue<String> events = new LinkedBlockingQueue<>();
        CountDownLatch initialized = new CountDownLatch(1);
        CuratorCache cache = closeLater(CuratorCache.build(cacheClient, tree));
        cache.listenable().addListener(new CuratorCacheListener() {
            @Override
            public void event(Type type, ChildData oldData, ChildData data) {
                ChildData d = data != null ? data : oldData;
                String path = d.getPath().equals(tree) ? "." : d.getPath().substring(tree.length() + 1);
                String was = type == Type.NODE_CHANGED ? " was " + str(oldData.getData()) : "";
                events.add(type + " " + path + "=" + str(d.getData()) + was);
            }

            @Override
            public void initialized() {
                initialized.countDown();
            }
        });
        cache.start();
        assertTrue(initialized.await(WAIT_S, TimeUnit.SECONDS), "cache not initialized");
        Set<String> initial = new TreeSet<>();
        events.drainTo(initial);
        assertEquals(new TreeSet<>(List.of("NODE_CREATED .=t", "NODE_CREATED old=o", "NODE_CREATED old/kid=k")),
                initial);

        // A deep create (parents created one by one, with empty data): one event per node, top-down.
        writer.create().creatingParentsIfNeeded().forPath(tree + "/x/y/z", bytes("z1"));
        assertEquals("NODE_CREATED x=", nextEvent(events));
        assertEquals("NODE_CREATED x/y=", nextEvent(events));
        assertEquals("NODE_CREATED x/y/z=z1", nextEvent(events));
        writer.setData().forPath(tree + "/x/y/z", bytes("z2"));
        assertEquals("NODE_CHANGED x/y/z=z2 was z1", nextEvent(events));
        writer.setData().forPath(tree, bytes("t2"));
        assertEquals("NODE_CHANGED .=t2 was t", nextEvent(events));
        writer.delete().deletingChildrenIfNeeded().forPath(tree + "/x");
        assertEquals("NODE_DELETED x/y/z=z2", nextEvent(events));
        assertEquals("NODE_DELETED x/y=", nextEvent(events));
        assertEquals("NODE_DELETED x=", nextEvent(events));
        writer.delete().forPath(tree + "/old/kid");
        assertEquals("NODE_DELETED old/kid=k", nextEvent(events));

        // Nothing else: the cache's callbacks run on its client's event thread, ahead of a later sync reply.
        barrier(zk(cacheClient));
        assertEquals(List.of(), new ArrayList<>(events), "unexpected cache events");
        Map<String, String> contents = new HashMap<>();
        cache.stream().forEach(d -> contents.put(d.getPath(), str(d.getData())));
        assertEquals(Map.of(tree, "t2", tree + "/old", "o"), contents, "cache contents");
    }

    private static String nextEvent(LinkedBlockingQueue<String> events) throws InterruptedException {
        return next(events, "cache event");
    }

    // ---------------------------------------------------------------- counters

    @Test
    void distributedAtomicLongCountsEveryConcurrentIncrementOnce() throws Exception {
        CuratorFramework admin = curator();
        String path = root(admin, "atomiclong") + "/counter";
        int perClient = 25;
        Set<Long> postValues = ConcurrentHashMap.newKeySet();
        List<Future<?>> work = new ArrayList<>();
        for (int i = 0; i < CLIENTS; i++) {
            DistributedAtomicLong counter = new DistributedAtomicLong(curator(), path, new RetryNTimes(0, 0));
            work.add(spawn(() -> {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
                for (int n = 0; n < perClient; n++) {
                    AtomicValue<Long> v;
                    do {
                        assertTrue(System.nanoTime() < deadline, "increments starved");
                        v = counter.increment();
                    } while (!v.succeeded());
                    assertEquals(v.preValue() + 1, (long) v.postValue());
                    assertTrue(postValues.add(v.postValue()), "two increments both produced " + v.postValue());
                }
                return null;
            }));
        }
        resultsOf(work);
        long total = (long) CLIENTS * perClient;
        assertEquals(total, postValues.size());
        assertEquals(total, (long) new DistributedAtomicLong(admin, path, new RetryNTimes(0, 0)).get().postValue());
        assertEquals(total, ByteBuffer.wrap(admin.getData().forPath(path)).getLong());
    }

    @Test
    void sharedCountCompareAndSetReachesTheExactTotalAndEveryReaderSeesIt() throws Exception {
        CuratorFramework admin = curator();
        String path = root(admin, "sharedcount") + "/count";
        int perClient = 25;
        int total = CLIENTS * perClient;
        Set<Integer> written = ConcurrentHashMap.newKeySet();
        List<Future<?>> work = new ArrayList<>();
        List<CountDownLatch> sawTotal = new ArrayList<>();
        List<SharedCount> counts = new ArrayList<>();
        for (int i = 0; i < CLIENTS; i++) {
            SharedCount count = closeLater(new SharedCount(curator(), path, 0));
            counts.add(count);
            CountDownLatch seen = new CountDownLatch(1);
            sawTotal.add(seen);
            count.addListener(new SharedCountListener() {
                @Override
                public void countHasChanged(SharedCountReader reader, int newCount) {
                    if (newCount == total) {
                        seen.countDown();
                    }
                }

                @Override
                public void stateChanged(CuratorFramework client, ConnectionState newState) {
                }
            });
            count.start();
            work.add(spawn(() -> {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
                for (int n = 0; n < perClient; n++) {
                    while (true) {
                        assertTrue(System.nanoTime() < deadline, "compare-and-set starved");
                        VersionedValue<Integer> seenValue = count.getVersionedValue();
                        if (count.trySetCount(seenValue, seenValue.getValue() + 1)) {
                            assertTrue(written.add(seenValue.getValue() + 1),
                                    "two compare-and-sets both wrote " + (seenValue.getValue() + 1));
                            break;
                        }
                    }
                }
                return null;
            }));
        }
        resultsOf(work);
        assertEquals(total, written.size());
        assertEquals(total, ByteBuffer.wrap(admin.getData().forPath(path)).getInt());
        for (int i = 0; i < CLIENTS; i++) {
            // The writer of the last value may have seen it through its own cache before the watch fired.
            SharedCount count = counts.get(i);
            if (count.getCount() != total) {
                assertTrue(sawTotal.get(i).await(WAIT_S, TimeUnit.SECONDS), "reader " + i + " never saw " + total);
            }
            assertEquals(total, count.getCount());
        }
    }
}
