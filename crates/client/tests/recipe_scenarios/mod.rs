//! The paper's recipes, each tested for its guarantee with many concurrent clients, as scenarios
//! that run against any [`Target`]: one standalone server (`tests/recipes.rs`) or a 3-server
//! ensemble with the clients spread over its members (`tests/recipes_ensemble.rs`). Every wait is
//! bounded; no assertion depends on how long anything took. A client reading what other clients
//! wrote through other members syncs first, as ZooKeeper orders reads only per session.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{connect, connect_with, within, CuttableListener};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use zoolog_client::recipes::{
    ConfigWatcher, DistributedQueue, DoubleBarrier, Group, LeaderElection, Lock, OwnedNode,
    ReadWriteLock, Rendezvous, SimpleLock,
};
use zoolog_client::{
    open_acl_unsafe, Client, ClientOptions, CreateMode, Error, ErrorCode, SessionState, WatcherType,
};

/// Where a scenario's clients connect: the client ports of one server or of an ensemble's
/// members, each new client (or relay) going to the next member in turn, all under the
/// scenario's `chroot` ("" for none) so that scenarios can share an ensemble.
pub struct Target {
    client_ports: Vec<u16>,
    chroot: String,
    next_member: AtomicUsize,
}

impl Target {
    pub fn new(client_ports: Vec<u16>, chroot: &str) -> Target {
        assert!(!client_ports.is_empty(), "a target needs a server");
        Target {
            client_ports,
            chroot: chroot.to_owned(),
            next_member: AtomicUsize::new(0),
        }
    }

    /// The client port of the next member in turn.
    fn next_port(&self) -> u16 {
        let turn = self.next_member.fetch_add(1, Ordering::SeqCst);
        self.client_ports[turn % self.client_ports.len()]
    }

    async fn connect(&self) -> Client {
        connect(&format!("127.0.0.1:{}{}", self.next_port(), self.chroot)).await
    }

    async fn connect_many(&self, count: usize) -> Vec<Client> {
        let mut clients = Vec::with_capacity(count);
        for _ in 0..count {
            clients.push(self.connect().await);
        }
        clients
    }

    /// A relay to the next member in turn.
    async fn relay(&self) -> Relay {
        Relay::start(self.next_port()).await
    }

    async fn connect_via(&self, relay: &Relay, options: ClientOptions) -> Client {
        connect_with(&format!("{}{}", relay.hosts(), self.chroot), options).await
    }
}

const TEST_TIMEOUT: Duration = Duration::from_secs(30);
const POLL_PAUSE: Duration = Duration::from_millis(10);

// ---------------------------------------------------------------------------------------------
// Locks

#[derive(Clone, Copy, Debug)]
enum LockKind {
    Simple,
    WithoutHerd,
    Write,
}

async fn acquire(kind: LockKind, client: &Client) -> OwnedNode {
    let held = match kind {
        LockKind::Simple => SimpleLock::new(client, "/locks/simple").acquire().await,
        LockKind::WithoutHerd => Lock::new(client, "/locks/line").acquire().await,
        LockKind::Write => ReadWriteLock::new(client, "/locks/rw").write().await,
    };
    held.expect("acquire")
}

/// N clients each do M increments of a counter znode by a non-atomic read-then-blind-write
/// inside the lock: any overlap of two holders loses an increment, and the ephemeral marker
/// `/holders/x` catches the overlap in the act.
async fn assert_mutual_exclusion(target: &Target, kind: LockKind) {
    const CLIENTS: usize = 8;
    const INCREMENTS_PER_CLIENT: usize = 10;
    let setup = target.connect().await;
    let acl = open_acl_unsafe();
    setup
        .create("/counter", Some(b"0"), &acl, CreateMode::Persistent)
        .await
        .unwrap();
    setup
        .create("/holders", Some(b""), &acl, CreateMode::Persistent)
        .await
        .unwrap();
    let mut workers = JoinSet::new();
    for _ in 0..CLIENTS {
        let client = target.connect().await;
        workers.spawn(async move {
            for _ in 0..INCREMENTS_PER_CLIENT {
                let held = acquire(kind, &client).await;
                increment_alone(&client).await;
                held.release().await.unwrap();
            }
            client.close().await.unwrap();
        });
    }
    within(TEST_TIMEOUT, join_all(workers)).await;
    setup.sync("/counter").await.unwrap();
    let (count, _) = setup.get_data("/counter").await.unwrap();
    assert_eq!(
        String::from_utf8(count.unwrap()).unwrap(),
        (CLIENTS * INCREMENTS_PER_CLIENT).to_string()
    );
}

async fn increment_alone(client: &Client) {
    let marked = client
        .create(
            "/holders/x",
            Some(b""),
            &open_acl_unsafe(),
            CreateMode::Ephemeral,
        )
        .await;
    assert_eq!(marked.err(), None, "two holders at once");
    let (count, _) = client.get_data("/counter").await.unwrap();
    let count: u64 = String::from_utf8(count.unwrap()).unwrap().parse().unwrap();
    tokio::task::yield_now().await; // widen the window a second holder would need
    client
        .set_data("/counter", Some((count + 1).to_string().as_bytes()), None)
        .await
        .unwrap();
    client.delete("/holders/x", None).await.unwrap();
}

pub async fn simple_lock_excludes_under_contention(target: &Target) {
    assert_mutual_exclusion(target, LockKind::Simple).await;
}

pub async fn lock_without_herd_excludes_under_contention(target: &Target) {
    assert_mutual_exclusion(target, LockKind::WithoutHerd).await;
}

pub async fn write_lock_excludes_under_contention(target: &Target) {
    assert_mutual_exclusion(target, LockKind::Write).await;
}

/// K waiters queue behind a holder, each on its own connection through a relay that counts the
/// watch notifications the server sends it. Each release must notify exactly one connection,
/// the next in line's, and hand it the lock.
pub async fn a_release_wakes_exactly_one_waiter(target: &Target) {
    const WAITERS: usize = 5;
    let holder = target.connect().await;
    let mut held = Lock::new(&holder, "/herd").acquire().await.unwrap();
    let (acquired, mut acquisitions) = mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for index in 0..WAITERS {
        let relay = target.relay().await;
        let client = target.connect_via(&relay, ClientOptions::default()).await;
        let acquired = acquired.clone();
        let lock = Lock::new(&client, "/herd");
        tokio::spawn(async move { acquired.send((index, lock.acquire().await.unwrap())) });
        within(
            TEST_TIMEOUT,
            watching_predecessor(&client, "/herd", index + 1),
        )
        .await;
        waiters.push((relay, client));
    }
    within(TEST_TIMEOUT, async {
        for release in 0..WAITERS {
            held.release().await.unwrap();
            let (index, next) = acquisitions.recv().await.unwrap();
            assert_eq!(index, release, "served in arrival order");
            held = next;
            // A notification precedes, on its connection, the reply to any later request.
            for (_, client) in &waiters {
                client.exists("/").await.unwrap();
            }
            let notified: Vec<usize> = waiters
                .iter()
                .map(|(relay, _)| relay.notifications())
                .collect();
            let expected: Vec<usize> = (0..WAITERS)
                .map(|index| usize::from(index <= release))
                .collect();
            assert_eq!(
                notified, expected,
                "notifications per waiter after release {release}"
            );
        }
    })
    .await;
}

/// Waits until the client at `position` in the line under `dir` holds a data watch on the node
/// just ahead of it (checkWatches asks the server about this very connection).
async fn watching_predecessor(client: &Client, dir: &str, position: usize) {
    loop {
        let line = line_order(client.get_children(dir).await.unwrap());
        if line.len() > position {
            let path = format!("{dir}/{}", line[position - 1]);
            if client.check_watches(&path, WatcherType::Data).await.is_ok() {
                return;
            }
        }
        tokio::time::sleep(POLL_PAUSE).await;
    }
}

fn line_order(mut children: Vec<String>) -> Vec<String> {
    children.sort_by_key(|name| name[name.len() - 10..].to_owned());
    children
}

pub async fn the_next_in_line_gets_the_lock_when_the_holder_session_is_closed(target: &Target) {
    let holder = target.connect().await;
    let waiter = target.connect().await;
    within(TEST_TIMEOUT, async {
        let held = Lock::new(&holder, "/closing").acquire().await.unwrap();
        let lost = tokio::spawn(async move { (held.lost().await, held) });
        let lock = Lock::new(&waiter, "/closing");
        let waiting = tokio::spawn(async move { lock.acquire().await });
        children_until(&waiter, "/closing", |count| count >= 2).await;
        holder.close().await.unwrap(); // no unlock: the session's end releases
        let next = waiting.await.unwrap().unwrap();
        assert_eq!(
            waiter.get_children("/closing").await.unwrap(),
            [next.name()]
        );
        assert_eq!(lost.await.unwrap().0, Error::SessionClosed);
    })
    .await;
}

/// The holder's network goes away for longer than its session timeout: the server expires the
/// session and the waiter gets the lock; when the holder reconnects it learns the hold was lost.
pub async fn a_lock_lost_to_session_expiry_passes_on_and_is_reported(target: &Target) {
    let relay = target.relay().await;
    let options = ClientOptions {
        session_timeout_ms: 4_000, // the server's floor with the test config
        ..ClientOptions::default()
    };
    let holder = target.connect_via(&relay, options).await;
    let waiter = target.connect().await;
    within(TEST_TIMEOUT, async {
        let held = Lock::new(&holder, "/expiring").acquire().await.unwrap();
        let lock = Lock::new(&waiter, "/expiring");
        let waiting = tokio::spawn(async move { lock.acquire().await });
        children_until(&waiter, "/expiring", |count| count >= 2).await;
        relay.cut().await;
        let next = waiting.await.unwrap().unwrap();
        assert_eq!(
            waiter.get_children("/expiring").await.unwrap(),
            [next.name()]
        );
        relay.heal();
        assert_eq!(held.lost().await, Error::SessionExpired);
        assert_eq!(holder.state(), SessionState::Expired);
    })
    .await;
}

/// Clients mixing reads and writes of one read/write lock: every holder marks itself with an
/// ephemeral under `/rw-holders` while it holds, and checks the marks of the others; a writer must
/// find no other mark, a reader no writer's. Holders release only after removing their mark, so
/// the next holder's server has applied that removal before it can be granted the lock.
pub async fn read_write_lock_excludes_writers_from_readers_under_contention(target: &Target) {
    const CLIENTS: usize = 6;
    const ROUNDS: usize = 6;
    let setup = target.connect().await;
    let acl = open_acl_unsafe();
    setup
        .create("/rw-holders", Some(b""), &acl, CreateMode::Persistent)
        .await
        .unwrap();
    let mut workers = JoinSet::new();
    for (index, client) in target.connect_many(CLIENTS).await.into_iter().enumerate() {
        workers.spawn(async move {
            let lock = ReadWriteLock::new(&client, "/rw-mixed");
            for round in 0..ROUNDS {
                let writing = (index + round) % 3 == 0;
                let held = if writing {
                    lock.write().await.unwrap()
                } else {
                    lock.read().await.unwrap()
                };
                let label = if writing { "writer" } else { "reader" };
                let mark = client
                    .create(
                        &format!("/rw-holders/{label}-"),
                        Some(b""),
                        &open_acl_unsafe(),
                        CreateMode::EphemeralSequential,
                    )
                    .await
                    .unwrap();
                tokio::task::yield_now().await; // widen the window an overlap would need
                let others: Vec<String> = client
                    .get_children("/rw-holders")
                    .await
                    .unwrap()
                    .into_iter()
                    .filter(|name| !mark.ends_with(name.as_str()))
                    .collect();
                let conflicting = others
                    .iter()
                    .any(|name| writing || name.starts_with("writer"));
                assert!(!conflicting, "{label} held alongside {others:?}");
                client.delete(&mark, None).await.unwrap();
                held.release().await.unwrap();
            }
            client.close().await.unwrap();
        });
    }
    within(TEST_TIMEOUT, join_all(workers)).await;
}

/// Readers share, a writer waits for the readers ahead of it, and a reader arriving after a
/// waiting writer does not overtake it.
pub async fn read_write_lock_shares_reads_excludes_writes_and_does_not_starve_writers(
    target: &Target,
) {
    let clients = target.connect_many(4).await;
    let lock = |index: usize| ReadWriteLock::new(&clients[index], "/rw");
    within(TEST_TIMEOUT, async {
        // Two readers hold the lock at the same time.
        let first_reader = lock(0).read().await.unwrap();
        let second_reader = lock(1).read().await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let readers_released = Arc::new(AtomicUsize::new(0));
        let writer = tokio::spawn({
            let (lock, order, readers_released) =
                (lock(2), order.clone(), readers_released.clone());
            async move {
                let writing = lock.write().await.unwrap();
                let released = readers_released.load(Ordering::SeqCst);
                order.lock().unwrap().push("writer");
                writing.release().await.unwrap();
                released
            }
        });
        children_until(&clients[0], "/rw", |count| count >= 3).await;
        let late_reader = tokio::spawn({
            let (lock, order) = (lock(3), order.clone());
            async move {
                let reading = lock.read().await.unwrap();
                order.lock().unwrap().push("late reader");
                reading.release().await.unwrap();
            }
        });
        children_until(&clients[0], "/rw", |count| count >= 4).await;
        for reader in [first_reader, second_reader] {
            readers_released.fetch_add(1, Ordering::SeqCst);
            reader.release().await.unwrap();
        }
        assert_eq!(
            writer.await.unwrap(),
            2,
            "the writer waited for both readers"
        );
        late_reader.await.unwrap();
        assert_eq!(*order.lock().unwrap(), ["writer", "late reader"]);
    })
    .await;
}

/// A protected create whose reply is lost (the relay swallows it and cuts the connection) must
/// adopt the node the server did create, not make a second one.
pub async fn a_create_whose_reply_is_lost_leaves_exactly_one_node(target: &Target) {
    let observer = target.connect().await;
    let relay = target.relay().await;
    let client = target.connect_via(&relay, ClientOptions::default()).await;
    let acl = open_acl_unsafe();
    for dir in ["/protected", "/protected/line", "/protected/queue"] {
        observer
            .create(dir, Some(b""), &acl, CreateMode::Persistent)
            .await
            .unwrap();
    }
    within(TEST_TIMEOUT, async {
        relay.lose_next(&CREATE_OPCODES, Loss::Reply);
        let held = Lock::new(&client, "/protected/line")
            .acquire()
            .await
            .unwrap();
        assert!(relay.lost());
        assert_eq!(
            synced_children(&observer, "/protected/line").await,
            [held.name()]
        );

        relay.lose_next(&CREATE_OPCODES, Loss::Reply);
        let simple = SimpleLock::new(&client, "/protected/simple")
            .acquire()
            .await
            .unwrap();
        assert!(relay.lost());
        assert_eq!(simple.path(), "/protected/simple");

        relay.lose_next(&CREATE_OPCODES, Loss::Reply);
        DistributedQueue::new(&client, "/protected/queue")
            .put(b"once")
            .await
            .unwrap();
        assert!(relay.lost());
        assert_eq!(
            synced_children(&observer, "/protected/queue").await.len(),
            1
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Double barrier and election

/// Processes arrive one after another; none may pass `enter` before the last has arrived, and
/// none may pass `leave` before the last has started leaving.
pub async fn double_barrier_holds_everyone_at_both_ends(target: &Target) {
    const PROCESSES: usize = 5;
    let observer = target.connect().await;
    let arrived = Arc::new(AtomicUsize::new(0));
    let leaving = Arc::new(AtomicUsize::new(0));
    let (go_leave, _) = tokio::sync::broadcast::channel::<usize>(PROCESSES);
    let mut processes = JoinSet::new();
    within(TEST_TIMEOUT, async {
        for index in 0..PROCESSES {
            let client = target.connect().await;
            let (arrived, leaving) = (arrived.clone(), leaving.clone());
            let mut told_to_leave = go_leave.subscribe();
            processes.spawn(async move {
                let mut barrier = DoubleBarrier::new(&client, "/barrier", PROCESSES);
                arrived.fetch_add(1, Ordering::SeqCst);
                barrier.enter().await.unwrap();
                let arrived_at_entry = arrived.load(Ordering::SeqCst);
                while told_to_leave.recv().await.unwrap() != index {}
                leaving.fetch_add(1, Ordering::SeqCst);
                barrier.leave().await.unwrap();
                (arrived_at_entry, leaving.load(Ordering::SeqCst))
            });
            children_until(&observer, "/barrier", |count| count > index).await;
        }
        // Let them go one by one, each only once its predecessor has begun leaving.
        for index in 0..PROCESSES {
            go_leave.send(index).unwrap();
            while leaving.load(Ordering::SeqCst) <= index {
                tokio::time::sleep(POLL_PAUSE).await;
            }
        }
        while let Some(outcome) = processes.join_next().await {
            let (arrived_at_entry, leaving_at_exit) = outcome.unwrap();
            assert_eq!(arrived_at_entry, PROCESSES, "passed enter early");
            assert_eq!(leaving_at_exit, PROCESSES, "passed leave early");
        }
        let left_behind = line_nodes(synced_children(&observer, "/barrier").await);
        assert!(left_behind.is_empty(), "{left_behind:?}");
    })
    .await;
}

fn line_nodes(children: Vec<String>) -> Vec<String> {
    children
        .into_iter()
        .filter(|name| name != "ready")
        .collect()
}

/// Candidates stand one after another; each leader checks it is alone, that `leader()` names it,
/// then closes its session; leadership must pass down the line in order.
pub async fn election_has_one_leader_at_a_time_and_fails_over_in_line(target: &Target) {
    const CANDIDATES: usize = 5;
    let observer = target.connect().await;
    let leaders_now = Arc::new(AtomicUsize::new(0));
    let (led, mut leadership_order) = mpsc::unbounded_channel();
    let (all_lined_up, lined_up) = tokio::sync::watch::channel(false);
    within(TEST_TIMEOUT, async {
        for index in 0..CANDIDATES {
            let client = target.connect().await;
            let (leaders_now, led) = (leaders_now.clone(), led.clone());
            let mut lined_up = lined_up.clone();
            tokio::spawn(async move {
                let identity = format!("candidate {index}");
                let election = LeaderElection::new(&client, "/election");
                let leadership = election.campaign(identity.as_bytes()).await.unwrap();
                assert_eq!(leaders_now.fetch_add(1, Ordering::SeqCst), 0, "two leaders");
                let named = election.leader().await.unwrap();
                // The first leader holds on until the whole line has formed behind it.
                lined_up.wait_for(|all| *all).await.unwrap();
                leaders_now.fetch_sub(1, Ordering::SeqCst);
                led.send((index, named)).unwrap();
                client.close().await.unwrap(); // the session's end hands leadership on
                drop(leadership);
            });
            children_until(&observer, "/election", |count| count > index).await;
        }
        all_lined_up.send_replace(true);
        for expected in 0..CANDIDATES {
            let (index, named) = leadership_order.recv().await.unwrap();
            assert_eq!(index, expected, "leadership passes in line order");
            assert_eq!(named, Some(format!("candidate {index}").into_bytes()));
        }
        children_until(&observer, "/election", |count| count == 0).await;
        let election = LeaderElection::new(&observer, "/election");
        assert_eq!(election.leader().await.unwrap(), None);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Queue

pub async fn queue_is_fifo_across_producers_taking_turns(target: &Target) {
    let producers = target.connect_many(3).await;
    let consumer = target.connect().await;
    within(TEST_TIMEOUT, async {
        let mut put = Vec::new();
        for round in 0..4 {
            for (index, producer) in producers.iter().enumerate() {
                let item = format!("round {round} producer {index}").into_bytes();
                DistributedQueue::new(producer, "/fifo")
                    .put(&item)
                    .await
                    .unwrap();
                put.push(item);
            }
        }
        let queue = DistributedQueue::new(&consumer, "/fifo");
        let mut taken = Vec::new();
        for _ in 0..put.len() {
            taken.push(queue.take().await.unwrap());
        }
        assert_eq!(taken, put);
    })
    .await;
}

/// Producers and consumers run at once; every item is consumed once, none twice, none lost, and
/// each consumer takes its items in queue order.
pub async fn queue_delivers_each_item_to_exactly_one_of_many_consumers(target: &Target) {
    const PRODUCERS: usize = 3;
    const ITEMS_PER_PRODUCER: usize = 20;
    const CONSUMERS: usize = 4;
    let taken = Arc::new(Mutex::new(Vec::new()));
    let remaining = Arc::new(AtomicI64::new((PRODUCERS * ITEMS_PER_PRODUCER) as i64));
    let mut tasks = JoinSet::new();
    for consumer in target.connect_many(CONSUMERS).await {
        let (taken, remaining) = (taken.clone(), remaining.clone());
        tasks.spawn(async move {
            let queue = DistributedQueue::new(&consumer, "/work");
            let mut mine: Vec<(usize, usize)> = Vec::new();
            while remaining.fetch_sub(1, Ordering::SeqCst) > 0 {
                let item = String::from_utf8(queue.take().await.unwrap()).unwrap();
                let (producer, sequence) = item.split_once(':').unwrap();
                mine.push((producer.parse().unwrap(), sequence.parse().unwrap()));
            }
            for producer in 0..PRODUCERS {
                let own: Vec<usize> = mine
                    .iter()
                    .filter(|item| item.0 == producer)
                    .map(|item| item.1)
                    .collect();
                assert!(
                    own.windows(2).all(|pair| pair[0] < pair[1]),
                    "out of order: {own:?}"
                );
            }
            taken.lock().unwrap().extend(mine);
        });
    }
    for (index, producer) in target.connect_many(PRODUCERS).await.into_iter().enumerate() {
        tasks.spawn(async move {
            let queue = DistributedQueue::new(&producer, "/work");
            for sequence in 0..ITEMS_PER_PRODUCER {
                queue
                    .put(format!("{index}:{sequence}").as_bytes())
                    .await
                    .unwrap();
            }
        });
    }
    within(TEST_TIMEOUT, join_all(tasks)).await;
    let mut taken = taken.lock().unwrap().clone();
    taken.sort_unstable();
    let everything: Vec<(usize, usize)> = (0..PRODUCERS)
        .flat_map(|producer| (0..ITEMS_PER_PRODUCER).map(move |sequence| (producer, sequence)))
        .collect();
    assert_eq!(taken, everything);
}

/// A take whose multi, or the multi's answer, is lost with the connection still takes the item
/// exactly once: the consumer gets it, and no other consumer ever does.
pub async fn queue_take_is_exactly_once_when_the_connection_drops(target: &Target) {
    let producer = target.connect().await;
    let relay = target.relay().await;
    let consumer = target.connect_via(&relay, ClientOptions::default()).await;
    let other_consumer = target.connect().await;
    within(TEST_TIMEOUT, async {
        let items = [&b"first"[..], b"second", b"third"];
        for item in items {
            DistributedQueue::new(&producer, "/once")
                .put(item)
                .await
                .unwrap();
        }
        let queue = DistributedQueue::new(&consumer, "/once");
        for (loss, item) in [Loss::Request, Loss::Reply].into_iter().zip(items) {
            relay.lose_next(&[MULTI_OPCODE], loss);
            assert_eq!(queue.take().await.unwrap(), item, "after a lost {loss:?}");
            assert!(relay.lost(), "the {loss:?} was lost");
        }
        assert_eq!(
            DistributedQueue::new(&other_consumer, "/once")
                .take()
                .await
                .unwrap(),
            items[2]
        );
        let left = synced_children(&producer, "/once").await;
        assert_eq!(left, ["claims"], "no item and no stray node left");
        assert!(synced_children(&producer, "/once/claims").await.is_empty());
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Group membership, configuration, rendezvous

pub async fn group_membership_changes_are_observed_as_made(target: &Target) {
    let clients = target.connect_many(3).await;
    let group = |index: usize| Group::new(&clients[index], "/group");
    within(TEST_TIMEOUT, async {
        let mut watcher = group(0).watch_members().await.unwrap();
        assert!(watcher.next().await.unwrap().is_empty());
        let ann = group(1).join("ann", b"10.0.0.1").await.unwrap();
        assert_eq!(watcher.next().await.unwrap(), ["ann"]);
        let _bob = group(2).join("bob", b"10.0.0.2").await.unwrap();
        assert_eq!(watcher.next().await.unwrap(), ["ann", "bob"]);
        assert_eq!(
            group(0).join("bob", b"").await.err(),
            Some(Error::Server(ErrorCode::NodeExists)),
            "names are unique"
        );
        ann.release().await.unwrap();
        assert_eq!(watcher.next().await.unwrap(), ["bob"]);
        clients[2].close().await.unwrap(); // a member's session ends: it leaves by itself
        assert!(watcher.next().await.unwrap().is_empty());
        assert!(group(0).members().await.unwrap().is_empty());
    })
    .await;
}

pub async fn config_watcher_sees_each_change_in_order_and_always_the_last(target: &Target) {
    let writer = target.connect().await;
    let reader = target.connect().await;
    let acl = open_acl_unsafe();
    within(TEST_TIMEOUT, async {
        let mut config = ConfigWatcher::new(&reader, "/config");
        assert_eq!(config.next().await.unwrap(), None);
        writer
            .create("/config", Some(b"v0"), &acl, CreateMode::Persistent)
            .await
            .unwrap();
        // One change at a time: each is seen, in order.
        assert_eq!(config.next().await.unwrap().unwrap().data.unwrap(), b"v0");
        for version in 1..=3 {
            let data = format!("v{version}");
            writer
                .set_data("/config", Some(data.as_bytes()), None)
                .await
                .unwrap();
            let seen = config.next().await.unwrap().unwrap();
            assert_eq!(
                (seen.data, seen.version),
                (Some(data.into_bytes()), version)
            );
        }
        // A burst: versions may be skipped, never reordered, and the last one always arrives.
        const LAST_VERSION: i32 = 40;
        for version in 4..=LAST_VERSION {
            writer
                .set_data("/config", Some(format!("v{version}").as_bytes()), None)
                .await
                .unwrap();
        }
        let mut previous = (3, 0);
        loop {
            let seen = config.next().await.unwrap().unwrap();
            assert!(
                (seen.version, seen.modified_zxid) > previous,
                "went back to {seen:?}"
            );
            assert_eq!(seen.data, Some(format!("v{}", seen.version).into_bytes()));
            previous = (seen.version, seen.modified_zxid);
            if seen.version == LAST_VERSION {
                break;
            }
        }
        writer.delete("/config", None).await.unwrap();
        assert_eq!(config.next().await.unwrap(), None);
    })
    .await;
}

pub async fn rendezvous_waits_for_the_master_to_fill_it_in(target: &Target) {
    let (starter, master, worker) = (
        target.connect().await,
        target.connect().await,
        target.connect().await,
    );
    within(TEST_TIMEOUT, async {
        // A worker that starts before the node even exists waits for it too.
        let early = tokio::spawn({
            let rendezvous = Rendezvous::new(&worker, "/jobs/42");
            async move { rendezvous.wait_filled().await }
        });
        Rendezvous::new(&starter, "/jobs/42")
            .create()
            .await
            .unwrap();
        let on_time = tokio::spawn({
            let rendezvous = Rendezvous::new(&worker, "/jobs/42");
            async move { rendezvous.wait_filled().await }
        });
        // Both are still waiting: the node is empty.
        let (data, _) = starter.get_data("/jobs/42").await.unwrap();
        assert!(data == Some(vec![]) && !early.is_finished() && !on_time.is_finished());
        Rendezvous::new(&master, "/jobs/42")
            .fill(b"10.0.0.7:7000")
            .await
            .unwrap();
        assert_eq!(early.await.unwrap().unwrap(), b"10.0.0.7:7000");
        assert_eq!(on_time.await.unwrap().unwrap(), b"10.0.0.7:7000");
        assert_eq!(
            Rendezvous::new(&worker, "/jobs/42")
                .wait_filled()
                .await
                .unwrap(),
            b"10.0.0.7:7000",
            "a late worker reads it at once"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// The children of `path` once the client's server has caught up with every write before.
async fn synced_children(client: &Client, path: &str) -> Vec<String> {
    client.sync(path).await.unwrap();
    client.get_children(path).await.unwrap()
}

async fn join_all(mut tasks: JoinSet<()>) {
    while let Some(outcome) = tasks.join_next().await {
        outcome.unwrap();
    }
}

/// Waits until the number of children of `dir` satisfies `wanted`, watching rather than polling.
async fn children_until(client: &Client, dir: &str, wanted: impl Fn(usize) -> bool) {
    loop {
        match client.get_children_w(dir).await {
            Ok((children, _)) if wanted(children.len()) => return,
            Ok((_, changed)) => drop(changed.await.unwrap()),
            Err(Error::Server(ErrorCode::NoNode)) => {
                let (exists, created) = client.exists_w(dir).await.unwrap();
                if exists.is_none() {
                    created.await.unwrap();
                }
            }
            Err(error) => panic!("listing {dir}: {error}"),
        }
    }
}

/// A TCP relay between one client and the server that reads the frames as they pass: it counts
/// the watch notifications sent to the client, can cut the connection at the next request of
/// some kinds, either before passing it on (the request never happened) or after swallowing its
/// successful reply (it happened but the client cannot know), and can cut the network.
struct Relay {
    listener: CuttableListener,
    shared: Arc<RelayShared>,
}

#[derive(Default)]
struct RelayShared {
    notifications: AtomicUsize,
    /// The opcodes of the next request to lose, and how; empty when nothing is to be lost.
    lose_next: Mutex<(Vec<i32>, Option<Loss>)>,
    losses: AtomicUsize,
}

impl RelayShared {
    /// Counts the loss `lose_next` asked for, and disarms it.
    fn lost(&self) {
        *self.lose_next.lock().unwrap() = Default::default();
        self.losses.fetch_add(1, Ordering::SeqCst);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loss {
    Request,
    Reply,
}

/// The xid of a notification frame.
const NOTIFICATION_XID: i32 = -1;
/// Where a reply frame (length prefix included) holds its error code, after xid and zxid.
const REPLY_ERROR_OFFSET: usize = 16;
/// create and create2.
const CREATE_OPCODES: [i32; 2] = [1, 15];
const MULTI_OPCODE: i32 = 14;

impl Relay {
    async fn start(server_port: u16) -> Relay {
        let shared = Arc::new(RelayShared::default());
        let carried = shared.clone();
        let listener = CuttableListener::start(move |client| {
            relay_connection(client, server_port, carried.clone())
        })
        .await;
        Relay { listener, shared }
    }

    fn hosts(&self) -> String {
        self.listener.hosts()
    }

    fn notifications(&self) -> usize {
        self.shared.notifications.load(Ordering::SeqCst)
    }

    /// Loses the next request with one of `opcodes`, or for `Loss::Reply` the reply to the next
    /// one that succeeds, and cuts the connection there.
    fn lose_next(&self, opcodes: &[i32], loss: Loss) {
        *self.shared.lose_next.lock().unwrap() = (opcodes.to_vec(), Some(loss));
    }

    /// True once, after the loss `lose_next` asked for has happened.
    fn lost(&self) -> bool {
        self.shared.losses.swap(0, Ordering::SeqCst) == 1
    }

    async fn cut(&self) {
        self.listener.cut().await;
    }

    fn heal(&self) {
        self.listener.heal();
    }
}

async fn relay_connection(client: TcpStream, server_port: u16, shared: Arc<RelayShared>) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", server_port)).await else {
        return;
    };
    let (client_reader, client_writer) = client.into_split();
    let (server_reader, server_writer) = server.into_split();
    let doomed_reply_xid = AtomicI64::new(i64::MIN);
    // Either direction ending drops both sockets: the connection is cut.
    tokio::select! {
        _ = relay_requests(client_reader, server_writer, &shared, &doomed_reply_xid) => {}
        _ = relay_replies(server_reader, client_writer, &shared, &doomed_reply_xid) => {}
    }
}

/// Client to server; the first frame is the handshake, each later one starts with xid and opcode.
async fn relay_requests(
    from: OwnedReadHalf,
    to: OwnedWriteHalf,
    shared: &RelayShared,
    doomed_reply_xid: &AtomicI64,
) -> std::io::Result<()> {
    relay_frames(from, to, |frame| {
        let (xid, opcode) = (frame_i32(frame, 4), frame_i32(frame, 8));
        let loss = {
            let lose_next = shared.lose_next.lock().unwrap();
            lose_next.1.filter(|_| lose_next.0.contains(&opcode))
        };
        match loss {
            Some(Loss::Request) => {
                shared.lost();
                return false;
            }
            Some(Loss::Reply) => doomed_reply_xid.store(i64::from(xid), Ordering::SeqCst),
            None => {}
        }
        true
    })
    .await
}

/// Server to client; the first frame is the handshake, each later one starts with its xid.
async fn relay_replies(
    from: OwnedReadHalf,
    to: OwnedWriteHalf,
    shared: &RelayShared,
    doomed_reply_xid: &AtomicI64,
) -> std::io::Result<()> {
    relay_frames(from, to, |frame| {
        let xid = frame_i32(frame, 4);
        if xid == NOTIFICATION_XID {
            shared.notifications.fetch_add(1, Ordering::SeqCst);
        }
        // A failed request (ensure_path meeting an existing node) is passed on: what is lost is
        // the reply to one that took effect.
        let took_effect = frame_i32(frame, REPLY_ERROR_OFFSET) == 0;
        if i64::from(xid) == doomed_reply_xid.load(Ordering::SeqCst) && took_effect {
            shared.lost();
            return false;
        }
        true
    })
    .await
}

/// Passes the handshake frame on, then every frame `pass` lets through; the first it stops
/// ends the relay (and so cuts the connection).
async fn relay_frames(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut pass: impl FnMut(&[u8]) -> bool,
) -> std::io::Result<()> {
    let handshake = read_frame(&mut from).await?;
    to.write_all(&handshake).await?;
    loop {
        let frame = read_frame(&mut from).await?;
        if !pass(&frame) {
            return Ok(());
        }
        to.write_all(&frame).await?;
    }
}

/// One length-prefixed frame, prefix included.
async fn read_frame(from: &mut OwnedReadHalf) -> std::io::Result<Vec<u8>> {
    let length = from.read_u32().await?;
    let mut frame = length.to_be_bytes().to_vec();
    frame.resize(4 + length as usize, 0);
    from.read_exact(&mut frame[4..]).await?;
    Ok(frame)
}

fn frame_i32(frame: &[u8], offset: usize) -> i32 {
    i32::from_be_bytes(frame[offset..offset + 4].try_into().unwrap())
}

/// Calls `$run!` with the name of every scenario, so that each test target runs them all.
macro_rules! every_scenario {
    ($run:ident) => {
        $run!(
            simple_lock_excludes_under_contention,
            lock_without_herd_excludes_under_contention,
            write_lock_excludes_under_contention,
            a_release_wakes_exactly_one_waiter,
            the_next_in_line_gets_the_lock_when_the_holder_session_is_closed,
            a_lock_lost_to_session_expiry_passes_on_and_is_reported,
            read_write_lock_shares_reads_excludes_writes_and_does_not_starve_writers,
            read_write_lock_excludes_writers_from_readers_under_contention,
            a_create_whose_reply_is_lost_leaves_exactly_one_node,
            double_barrier_holds_everyone_at_both_ends,
            election_has_one_leader_at_a_time_and_fails_over_in_line,
            queue_is_fifo_across_producers_taking_turns,
            queue_delivers_each_item_to_exactly_one_of_many_consumers,
            queue_take_is_exactly_once_when_the_connection_drops,
            group_membership_changes_are_observed_as_made,
            config_watcher_sees_each_change_in_order_and_always_the_last,
            rendezvous_waits_for_the_master_to_fill_it_in
        );
    };
}
