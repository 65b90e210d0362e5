"""kazoo end-to-end: the recipes kazoo users build on (Lock, Semaphore, Election, Barrier,
DoubleBarrier, Queue, LockingQueue, Counter, Party, ShallowParty), each checked for its guarantee
with several concurrent clients, every one with its own KazooClient and session."""
import queue
import threading
from concurrent.futures import ThreadPoolExecutor

from test_kazoo_support import (  # noqa: F401  (fixtures)
    WAIT_S,
    base,
    make_zk_factory,
    shared_server,
    wait_for,
    zk,
)

zk_factory = make_zk_factory("shared_server")


def run_concurrently(workers):
    """Run callables in parallel threads; re-raise the first failure; return their results."""
    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        futures = [pool.submit(w) for w in workers]
        return [f.result(timeout=120) for f in futures]


class Occupancy:
    """Tracks how many threads are inside a critical section at once."""

    def __init__(self):
        self._lock = threading.Lock()
        self.inside = 0
        self.max_inside = 0

    def __enter__(self):
        with self._lock:
            self.inside += 1
            self.max_inside = max(self.max_inside, self.inside)

    def __exit__(self, *exc):
        with self._lock:
            self.inside -= 1


# --- Lock / Semaphore --------------------------------------------------------------------------


def test_lock_gives_mutual_exclusion_to_a_non_atomic_read_modify_write(zk_factory, base):
    clients, rounds = [zk_factory() for _ in range(5)], 20
    clients[0].create(base + "/counter", b"0", makepath=True)
    occupancy = Occupancy()

    def worker(client):
        lock = client.Lock(base + "/lock", identifier=str(client.client_id[0]))
        for _ in range(rounds):
            with lock, occupancy:
                value = int(client.get(base + "/counter")[0])
                client.set(base + "/counter", str(value + 1).encode())  # version -1: no CAS

    run_concurrently([lambda c=c: worker(c) for c in clients])
    assert int(clients[0].get(base + "/counter")[0]) == len(clients) * rounds
    assert occupancy.max_inside == 1


def test_lock_is_refused_without_blocking_while_held_and_freed_when_the_holder_session_ends(zk_factory, base):
    holder, contender = zk_factory(), zk_factory()
    assert holder.Lock(base, "holder").acquire(timeout=WAIT_S)
    contender_lock = contender.Lock(base, "contender")
    assert contender_lock.acquire(blocking=False) is False
    assert contender_lock.contenders() == ["holder"]
    acquired = threading.Event()

    def wait_for_lock():
        if contender_lock.acquire(timeout=WAIT_S):
            acquired.set()

    waiter = threading.Thread(target=wait_for_lock)
    waiter.start()
    wait_for(lambda: contender_lock.contenders() == ["holder", "contender"])
    assert not acquired.is_set()
    holder.stop()  # the holder's ephemeral lock node goes with its session
    assert acquired.wait(WAIT_S)
    waiter.join(WAIT_S)
    assert contender_lock.contenders() == ["contender"]


def test_semaphore_admits_at_most_max_leases_holders(zk_factory, base):
    clients = [zk_factory() for _ in range(4)]
    occupancy = Occupancy()
    both_inside = threading.Barrier(2, timeout=WAIT_S)
    entries = []

    def worker(client):
        semaphore = client.Semaphore(base, max_leases=2)
        for _ in range(3):
            with semaphore, occupancy:
                entries.append(client.client_id[0])
                assert len(semaphore.lease_holders()) <= 2

    # first show that two leases really can be held at once
    first = [clients[0].Semaphore(base, max_leases=2), clients[1].Semaphore(base, max_leases=2)]

    def hold(semaphore):
        with semaphore:
            both_inside.wait()

    run_concurrently([lambda s=s: hold(s) for s in first])
    run_concurrently([lambda c=c: worker(c) for c in clients])
    assert occupancy.max_inside <= 2
    assert len(entries) == 12


# --- Election ----------------------------------------------------------------------------------


def test_election_has_one_leader_and_the_next_contender_takes_over_when_it_leaves(zk_factory, base):
    clients = {name: zk_factory() for name in ("a", "b", "c")}
    leaders = queue.Queue()
    occupancy = Occupancy()
    release = {name: threading.Event() for name in clients}

    def campaign(name):
        def lead():
            with occupancy:
                leaders.put(name)
                release[name].wait(WAIT_S * 2)

        try:
            clients[name].Election(base, name).run(lead)
        except Exception:  # the deposed leader's client is stopped under it
            pass

    threads = []
    for name in clients:
        thread = threading.Thread(target=campaign, args=(name,), daemon=True)
        thread.start()
        threads.append(thread)
    observer = zk_factory().Election(base)
    wait_for(lambda: len(observer.contenders()) == 3)
    first = leaders.get(timeout=WAIT_S)
    order = observer.contenders()
    assert order[0] == first and sorted(order) == ["a", "b", "c"]
    assert occupancy.inside == 1

    clients[first].stop()  # the leader's session ends; its func is still running locally
    second = leaders.get(timeout=WAIT_S)
    assert second == order[1]
    assert observer.contenders() == order[1:]
    release[first].set()

    release[second].set()  # a leader that returns gives up leadership
    third = leaders.get(timeout=WAIT_S)
    assert third == order[2]
    release[third].set()
    for thread in threads:
        thread.join(WAIT_S)
    assert occupancy.max_inside <= 2  # only the deposed leader's local func overlapped


# --- Barriers ----------------------------------------------------------------------------------


def test_barrier_holds_every_waiter_until_it_is_removed(shared_server, zk_factory, base):
    coordinator = zk_factory()
    barrier = coordinator.Barrier(base)
    barrier.create()
    waiters = [zk_factory() for _ in range(3)]
    passed = queue.Queue()

    def wait(client):
        passed.put(client.Barrier(base).wait(timeout=WAIT_S * 2))

    threads = [threading.Thread(target=wait, args=(c,), daemon=True) for c in waiters]
    for thread in threads:
        thread.start()
    # all three are blocked once the server holds their exists-watches on the barrier node
    wait_for(lambda: watchers_of(shared_server, base) == 3)
    assert passed.empty()
    assert barrier.remove()
    assert [passed.get(timeout=WAIT_S) for _ in waiters] == [True, True, True]


def watchers_of(server, path):
    """Number of sessions the server lists under path in `wchp`."""
    count, current = 0, None
    for line in server.four_letter("wchp").splitlines():
        if not line.startswith("\t"):
            current = line.strip()
        elif current == path:
            count += 1
    return count


def test_barrier_wait_passes_at_once_when_no_barrier_exists(zk, base):
    assert zk.Barrier(base).wait(timeout=WAIT_S) is True


def test_double_barrier_releases_nobody_before_the_threshold_enters_or_leaves(shared_server, zk_factory, base):
    size = 3
    clients = [zk_factory() for _ in range(size)]
    lock = threading.Lock()
    arrived, departing = [0], [0]
    seen_on_enter, seen_on_leave = [], []

    def member(client, index):
        barrier = client.DoubleBarrier(base, size, identifier=f"m{index}")
        with lock:
            arrived[0] += 1
        barrier.enter()
        with lock:
            seen_on_enter.append(arrived[0])
            departing[0] += 1
        barrier.leave()
        with lock:
            seen_on_leave.append(departing[0])

    # two members first: they must stay blocked in enter()
    threads = [threading.Thread(target=member, args=(clients[i], i), daemon=True) for i in range(size)]
    for thread in threads[:2]:
        thread.start()
    # blocked once the server holds both exists-watches on the ready node: a member whose watch
    # came after the third had entered and left would miss the ready node and wait forever
    wait_for(lambda: watchers_of(shared_server, base + "/ready") == 2)
    assert seen_on_enter == []
    threads[2].start()
    for thread in threads:
        thread.join(WAIT_S * 2)
    assert seen_on_enter == [size] * size  # every member passed enter only after all arrived
    assert seen_on_leave == [size] * size  # and left only after all had started leaving
    assert [c for c in clients[0].get_children(base) if not c.startswith("ready")] == []


# --- Queues ------------------------------------------------------------------------------------


def test_queue_is_fifo_and_honours_priority(zk, base):
    q = zk.Queue(base)
    for i in range(5):
        q.put(f"item-{i}".encode())
    q.put(b"urgent", priority=1)
    assert len(q) == 6
    assert q.get() == b"urgent"
    assert [q.get() for _ in range(5)] == [f"item-{i}".encode() for i in range(5)]
    assert q.get() is None


def test_queue_delivers_each_item_exactly_once_to_competing_consumers(zk_factory, base):
    producer = zk_factory()
    q = producer.Queue(base)
    items = [f"job-{i}".encode() for i in range(30)]
    for item in items:
        q.put(item)
    consumers = [zk_factory() for _ in range(3)]

    def drain(client):
        mine, cq = [], client.Queue(base)
        while (item := cq.get()) is not None:
            mine.append(item)
        return mine

    results = run_concurrently([lambda c=c: drain(c) for c in consumers])
    taken = [item for mine in results for item in mine]
    assert sorted(taken) == sorted(items)
    for mine in results:  # each consumer saw its share in queue order
        assert mine == sorted(mine, key=items.index)


def test_locking_queue_gives_each_item_to_one_consumer_and_requeues_it_if_the_consumer_dies(
    zk_factory, base
):
    producer = zk_factory()
    producer.LockingQueue(base).put_all([b"a", b"b"])
    doomed, survivor = zk_factory(), zk_factory()
    doomed_q, survivor_q = doomed.LockingQueue(base), survivor.LockingQueue(base)
    assert doomed_q.get(timeout=WAIT_S) == b"a"
    assert survivor_q.get(timeout=WAIT_S) == b"b"  # "a" is locked by the other consumer
    assert survivor_q.consume()
    doomed.stop()  # dies without consuming: its lock goes, the item stays
    assert survivor_q.get(timeout=WAIT_S) == b"a"
    assert survivor_q.consume()
    assert len(survivor_q) == 0


# --- Counter -----------------------------------------------------------------------------------


def test_counter_counts_every_concurrent_increment(zk_factory, base):
    clients, increments = [zk_factory() for _ in range(4)], 15

    def worker(client):
        counter = client.Counter(base)
        for _ in range(increments):
            counter += 1

    run_concurrently([lambda c=c: worker(c) for c in clients])
    assert clients[0].Counter(base).value == len(clients) * increments


def test_counter_supports_decrements_and_float_values(zk, base):
    counter = zk.Counter(base, default=0.0)
    counter += 2.5
    counter -= 1.0
    assert counter.value == 1.5
    assert counter.pre_value == 2.5 and counter.post_value == 1.5


# --- Party -------------------------------------------------------------------------------------


def test_party_membership_follows_member_sessions(zk_factory, base):
    observer = zk_factory()
    members = {name: zk_factory() for name in ("ann", "bob", "cid")}
    for name, client in members.items():
        client.Party(base, name).join()
    party = observer.Party(base)
    assert sorted(party) == ["ann", "bob", "cid"]
    assert len(party) == 3
    members["bob"].stop()  # session closed: the member's ephemeral node goes at once
    assert sorted(party) == ["ann", "cid"]
    ann = members["ann"].Party(base, "ann-again")
    ann.join()
    assert sorted(party) == ["ann", "ann-again", "cid"]
    ann.leave()
    assert sorted(party) == ["ann", "cid"]


def test_shallow_party_membership_follows_member_sessions(zk_factory, base):
    observer = zk_factory()
    members = [zk_factory() for _ in range(3)]
    for index, client in enumerate(members):
        client.ShallowParty(base, f"m{index}").join()
    party = observer.ShallowParty(base)
    assert sorted(party) == ["m0", "m1", "m2"]
    members[0].stop()
    assert sorted(party) == ["m1", "m2"]
