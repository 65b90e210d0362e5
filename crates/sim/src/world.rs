//! One simulated run: the event loop, the driver of each server's [`Zab`] (exactly the
//! contract in `zoolog_zab`'s docs), the clients, the fault schedule and the liveness phase.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;

use zoolog_zab::{
    Action, AppendCapacity, Config, Entry, EntryRange, Epochs, Input, Lane, MemberRole, Message,
    ServerId, ServingRole, Status, Zab,
};

use crate::checker::{decode_payload, encode_payload, Checker, CommandState};
use crate::client::{Client, Connection};
use crate::disk::{Disk, SavedSnapshot};
use crate::network::{NetConfig, Network};
use crate::node::{LeaderSync, Node, StateMachine};
use crate::queue::EventQueue;
use crate::rng::Rng;
use crate::{Mode, Options, Report};

mod zk;

/// A run that needs more events than this is stuck in a storm of messages or timers.
const EVENTS_MAX: u64 = 3_000_000;
/// The random stream of the Zab-mode clients' lanes (the read-only choices take stream 1).
const LANE_STREAM: u64 = 2;

enum Event {
    Tick {
        node: usize,
        life: u64,
    },
    Arrive {
        from: usize,
        to: usize,
        message: Message,
    },
    Fsync {
        node: usize,
        life: u64,
    },
    /// A leader's sync delay may have ended, or a commit stalled (see `LeaderSync`).
    OwnSyncTimer {
        node: usize,
        life: u64,
    },
    SnapshotRead {
        node: usize,
        life: u64,
    },
    Disconnected {
        node: usize,
        life: u64,
        peer: ServerId,
    },
    ClientStep {
        client: usize,
    },
    Fault,
    Restart {
        node: usize,
    },
    EndFaults,
    Check,
    /// The end of a server's pause (the `pause`-th of the run), unless it ended otherwise.
    Resume {
        node: usize,
        pause: u64,
    },
    /// Core mode: the front end's timer.
    CoreTick {
        node: usize,
        life: u64,
    },
    /// Core mode: a frame (or, with none, the end of the stream) on a client connection.
    ZkToServer {
        conn: u64,
        frame: Option<Vec<u8>>,
    },
    ZkToClient {
        conn: u64,
        frame: Option<Vec<u8>>,
    },
}

impl Event {
    fn code(&self) -> (u64, u64) {
        match self {
            Event::Tick { node, .. } => (1, *node as u64),
            Event::Arrive { from, to, .. } => (2, (*from as u64) << 8 | *to as u64),
            Event::Fsync { node, .. } => (3, *node as u64),
            Event::SnapshotRead { node, .. } => (4, *node as u64),
            Event::Disconnected { node, .. } => (5, *node as u64),
            Event::ClientStep { client } => (6, *client as u64),
            Event::Fault => (7, 0),
            Event::Restart { node } => (8, *node as u64),
            Event::EndFaults => (9, 0),
            Event::Check => (10, 0),
            Event::CoreTick { node, .. } => (11, *node as u64),
            Event::ZkToServer { conn, frame } => (12, conn << 1 | frame.is_some() as u64),
            Event::ZkToClient { conn, frame } => (13, conn << 1 | frame.is_some() as u64),
            Event::Resume { node, .. } => (14, *node as u64),
            Event::OwnSyncTimer { node, .. } => (15, *node as u64),
        }
    }
}

/// A stopped server process: inputs wait in its sockets and timers until it resumes.
struct Paused {
    pause: u64,
    held: VecDeque<Event>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Faults,
    Liveness,
}

pub(crate) struct World {
    seed: u64,
    trace: bool,
    rng: Rng,
    now: u64,
    queue: EventQueue<Event>,
    nodes: Vec<Node>,
    net: Network,
    clients: Vec<Client>,
    pub(crate) checker: Checker,
    phase: Phase,
    benign: bool,
    tick_us: (u64, u64),
    fsync_us: (u64, u64),
    fault_gap_us: (u64, u64),
    snapshot_every: u64,
    purge_p: f64,
    mid_batch_crash_p: f64,
    next_connection: u64,
    quiesce: bool,
    faults_end: u64,
    liveness_us: u64,
    /// A participant the liveness phase leaves crashed (some seeds, zab mode): the others
    /// must converge without it, as an ensemble that lost a member for good does.
    left_down: Option<usize>,
    /// Clients go on until then before they quiesce (some seeds, core mode): sessions that
    /// live on their servers' reports alone must outlive a few timeouts of calm.
    calm_until: u64,
    deadline: u64,
    post_heal_acked: u64,
    crashes: u64,
    /// Pauses so far; the last one numbers the newest.
    pauses: u64,
    /// The servers whose process is stopped, and the inputs that came for them meanwhile.
    paused: BTreeMap<usize, Paused>,
    events: u64,
    trace_hash: u64,
    done: bool,
    /// Core mode: the real front end on every server, ZooKeeper clients.
    zk: Option<Box<zk::ZkState>>,
    pumping: bool,
}

/// How often a snapshot read fails while faults are injected.
const SNAPSHOT_READ_FAILURE_P: f64 = 0.2;

fn fnv(hash: u64, value: u64) -> u64 {
    let mut h = hash;
    for byte in value.to_le_bytes() {
        h ^= byte as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

impl World {
    pub(crate) fn new(seed: u64, options: &Options) -> World {
        let mut rng = Rng::new(seed);
        let participants = rng.range(3, 7);
        let observers = rng.range(0, 2);
        let benign = rng.chance(0.15);
        let mut members = BTreeMap::new();
        for id in 1..=participants {
            members.insert(id, MemberRole::Participant);
        }
        for id in participants + 1..=participants + observers {
            members.insert(id, MemberRole::Observer);
        }
        let tick_ms = rng.range(10, 40);
        let mut base = Config::new(1, members.clone(), tick_ms);
        base.election_retry_ms = rng.range(10, 50);
        base.election_finalize_ms = rng.range(1, 10);
        base.proposals_in_flight_max = *rng.pick(&[2, 8, 64, 4096]).unwrap();
        base.forwards_in_flight_max = *rng.pick(&[2, 8, 64, 4096]).unwrap();
        base.message_entries_max = *rng.pick(&[1, 3, 16, 512]).unwrap();
        // Payloads are 16 bytes (a few hundred in the ZooKeeper world): from one entry per
        // message and in flight to no limit worth the name.
        base.in_flight_bytes_max = *rng.pick(&[1, 40, 1000, 64 << 20]).unwrap();
        let nodes = members
            .iter()
            .map(|(id, role)| Node {
                id: *id,
                observer: *role == MemberRole::Observer,
                config: Config {
                    me: *id,
                    ..base.clone()
                },
                zab: None,
                life: 0,
                disk: Disk::default(),
                machine: StateMachine {
                    applied: 0,
                    hash: 0,
                },
                last_snapshot: 0,
                status: Status::Looking,
                serving_since_us: None,
                fsync_at: 0,
                leader_sync: LeaderSync::new(0),
                restart_at: None,
                front: None,
            })
            .collect::<Vec<_>>();
        let net_config = if benign {
            NetConfig::benign(&mut rng)
        } else {
            NetConfig::random(&mut rng)
        };
        let net = Network::new(net_config, nodes.len());
        let client_count = rng.range(1, 5);
        // Drawn from a stream of their own: the urgent lane changed no other choice.
        let mut lane_rng = rng.fork(LANE_STREAM);
        let mut clients = Vec::new();
        for id in 1..=client_count {
            clients.push(Client {
                id,
                connection: None,
                next_seq: 1,
                in_flight: Default::default(),
                lane: match lane_rng.chance(0.25) {
                    true => Lane::Urgent,
                    false => Lane::Commands,
                },
                max_in_flight: rng.range(1, 8) as usize,
                step_us: (200, rng.range(1_000, 20_000)),
                reconnect_at: 0,
            });
        }
        let faults_ms = options.faults_ms.unwrap_or_else(|| rng.range(1_000, 3_000));
        let mode = options.mode.unwrap_or_else(|| Mode::for_seed(seed));
        let zk = (mode == Mode::Core).then(|| {
            clients.clear();
            let members: Vec<(u64, bool)> = nodes.iter().map(|n| (n.id, n.observer)).collect();
            Box::new(zk::ZkState::new(&mut rng, &members, tick_ms))
        });
        World {
            seed,
            trace: options.trace,
            tick_us: (1_000, rng.range(1_500, 3_000)),
            fsync_us: (50, rng.range(200, 4_000)),
            fault_gap_us: (rng.range(5_000, 50_000), rng.range(100_000, 600_000)),
            snapshot_every: rng.range(3, 50),
            purge_p: *rng.pick(&[0.0, 0.5, 1.0]).unwrap(),
            mid_batch_crash_p: if benign {
                0.0
            } else {
                *rng.pick(&[0.0, 0.0005, 0.002]).unwrap()
            },
            rng,
            now: 0,
            queue: EventQueue::default(),
            nodes,
            net,
            clients,
            checker: Checker {
                opaque: zk.is_some(),
                ..Checker::new()
            },
            phase: Phase::Faults,
            benign,
            next_connection: 1,
            quiesce: false,
            faults_end: faults_ms * 1_000,
            liveness_us: options.liveness_ms * 1_000,
            left_down: None,
            calm_until: 0,
            deadline: u64::MAX,
            post_heal_acked: 0,
            crashes: 0,
            pauses: 0,
            paused: BTreeMap::new(),
            events: 0,
            trace_hash: 0xCBF2_9CE4_8422_2325,
            done: false,
            zk,
            pumping: false,
        }
    }

    fn at(&mut self, delay_us: u64, event: Event) {
        self.queue.push(self.now + delay_us, event);
    }

    fn log(&self, node: Option<usize>, text: impl FnOnce() -> String) {
        if self.trace {
            let who = node.map_or("sim".to_string(), |i| format!("n{}", self.nodes[i].id));
            println!(
                "{:>6}.{:03} {who:>4} {}",
                self.now / 1000,
                self.now % 1000,
                text()
            );
        }
    }

    pub(crate) fn run(&mut self) -> Result<(), String> {
        self.log(None, || {
            format!(
                "seed {}: {} participants, {} observers, {} clients, benign {}, config {:?}, net {:?}",
                self.seed,
                self.nodes.iter().filter(|n| !n.observer).count(),
                self.nodes.iter().filter(|n| n.observer).count(),
                self.clients.len(),
                self.benign,
                self.nodes[0].config,
                self.net.config
            )
        });
        for idx in 0..self.nodes.len() {
            self.start(idx)?;
        }
        let client_count = match &self.zk {
            Some(zk) => zk.clients.len(),
            None => self.clients.len(),
        };
        for client in 0..client_count {
            let delay = self.rng.range(0, 10_000);
            self.at(delay, Event::ClientStep { client });
        }
        if !self.benign {
            let delay = self.rng.range(self.fault_gap_us.0, self.fault_gap_us.1);
            self.at(delay, Event::Fault);
        }
        self.queue.push(self.faults_end, Event::EndFaults);
        while let Some((time, seq, event)) = self.queue.pop() {
            self.now = time;
            self.events += 1;
            let (kind, who) = event.code();
            self.trace_hash = fnv(fnv(fnv(fnv(self.trace_hash, time), seq), kind), who);
            self.dispatch(event)?;
            if self.events > EVENTS_MAX {
                return Err(format!(
                    "runaway: more than {EVENTS_MAX} events (a message storm?), {} queued\n{}",
                    self.queue.len(),
                    self.describe_state()
                ));
            }
            if self.done {
                break;
            }
        }
        self.checker.finish()?;
        let len = self.checker.sequence.len() as u64;
        for node in self.running_to_the_end() {
            if node.machine.applied != len || node.machine.hash != self.checker.hashes[len as usize]
            {
                return Err(format!(
                    "server {} ends with state at {} (hash {:x}), not the common state at {len}",
                    node.id, node.machine.applied, node.machine.hash
                ));
            }
        }
        if self.zk.is_some() {
            self.zk_finish()?;
        }
        Ok(())
    }

    pub(crate) fn report(&self) -> Report {
        let zk = self.zk.as_ref().map(|zk| &zk.checker);
        Report {
            seed: self.seed,
            mode: if self.zk.is_some() {
                Mode::Core
            } else {
                Mode::Zab
            },
            write_acks: zk.map_or(0, |c| c.write_acks),
            reads_checked: zk.map_or(0, |c| c.reads_checked),
            synced_reads: zk.map_or(0, |c| c.synced_reads),
            sessions_created: zk.map_or(0, |c| c.sessions_created),
            sessions_expired: zk.map_or(0, |c| c.sessions_expired),
            watches_set: zk.map_or(0, |c| c.watches_set),
            watches_fired: zk.map_or(0, |c| c.watches_fired),
            read_only_sessions: zk.map_or(0, |c| c.read_only_sessions),
            writes_refused: zk.map_or(0, |c| c.refused.len() as u64),
            persistent_events: zk.map_or(0, |c| c.persistent_events),
            reaped: zk.map_or(0, |c| c.reaped),
            multis_applied: zk.map_or(0, |c| c.multis_applied),
            multis_failed: zk.map_or(0, |c| c.multis_failed),
            sessions_abandoned: self.zk.as_ref().map_or(0, |zk| zk.sessions_abandoned()),
            knocks_refused: self.zk.as_ref().map_or(0, |zk| zk.knocks_refused()),
            participants: self.nodes.iter().filter(|n| !n.observer).count(),
            observers: self.nodes.iter().filter(|n| n.observer).count(),
            benign: self.benign,
            events: self.events,
            end_ms: self.now / 1000,
            committed: self.checker.sequence.len() as u64,
            acked: self.checker.acked,
            unknown: self.checker.unknown_total(),
            unknown_committed: self.checker.unknown_committed(),
            crashes: self.crashes,
            pauses: self.pauses,
            epoch: self
                .nodes
                .iter()
                .map(|n| n.disk.epochs.current)
                .max()
                .unwrap_or(0),
            trace_hash: self.trace_hash,
        }
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.now / 1000
    }

    fn dispatch(&mut self, event: Event) -> Result<(), String> {
        if let Some(node) = self.input_of(&event) {
            if let Some(paused) = self.paused.get_mut(&node) {
                paused.held.push_back(event);
                return Ok(());
            }
        }
        match event {
            Event::Tick { node, life } => {
                if self.nodes[node].is_up() && self.nodes[node].life == life {
                    let delay = self.rng.range(self.tick_us.0, self.tick_us.1);
                    self.at(delay, Event::Tick { node, life });
                    self.feed(node, Input::Tick)?;
                }
            }
            Event::Arrive { from, to, message } => {
                if self.nodes[to].is_up() && self.net.connected(from, to) {
                    let from = self.nodes[from].id;
                    self.feed(to, Input::Message { from, message })?;
                }
            }
            Event::Fsync { node, life } => {
                if self.nodes[node].is_up() && self.nodes[node].life == life {
                    let disk = &mut self.nodes[node].disk;
                    let Some(mut done) = disk.pending.pop_front() else {
                        return Ok(());
                    };
                    disk.sync();
                    while !disk.pending.is_empty() && self.rng.chance(0.3) {
                        done = disk.pending.pop_front().unwrap();
                    }
                    self.feed(
                        node,
                        Input::Logged {
                            position: done.0,
                            epoch: done.1,
                        },
                    )?;
                }
            }
            Event::OwnSyncTimer { node, life } => {
                if self.nodes[node].is_up() && self.nodes[node].life == life {
                    let delay_ends_at = self.nodes[node].leader_sync.delay_ends_at;
                    if delay_ends_at.is_some_and(|at| at <= self.now) {
                        self.start_held_fsyncs(node);
                    }
                    self.follow_own_sync(node);
                }
            }
            Event::SnapshotRead { node, life } => {
                if self.nodes[node].is_up() && self.nodes[node].life == life {
                    // A read error, as a real disk may give, during the faults.
                    let read_fails = self.phase == Phase::Faults
                        && !self.benign
                        && self.rng.chance(SNAPSHOT_READ_FAILURE_P);
                    let input = match &self.nodes[node].disk.snapshot {
                        Some(s) if !read_fails => Input::SnapshotLoaded {
                            position: s.position,
                            payload: s.payload.clone(),
                        },
                        _ => Input::SnapshotUnavailable,
                    };
                    self.feed(node, input)?;
                }
            }
            Event::Disconnected { node, life, peer } => {
                if self.nodes[node].is_up() && self.nodes[node].life == life {
                    self.feed(node, Input::PeerDisconnected { peer })?;
                }
            }
            Event::ClientStep { client } if self.zk.is_some() => self.zk_client_step(client)?,
            Event::ClientStep { client } => self.client_step(client)?,
            Event::CoreTick { node, life } => {
                if self.nodes[node].front.is_some() && self.nodes[node].life == life {
                    let tick = self.zk.as_ref().unwrap().core_tick_us();
                    let delay = self.rng.range(tick.0, tick.1);
                    self.at(delay, Event::CoreTick { node, life });
                    self.core_input(node, zoolog_server::core::Input::Tick)?;
                    self.pump(node)?;
                }
            }
            Event::ZkToServer { conn, frame } => self.zk_to_server(conn, frame)?,
            Event::ZkToClient { conn, frame } => self.zk_to_client(conn, frame)?,
            Event::Fault => self.fault()?,
            Event::Restart { node } => {
                if !self.nodes[node].is_up() && self.nodes[node].restart_at == Some(self.now) {
                    self.start(node)?;
                }
            }
            Event::Resume { node, pause } => {
                if self
                    .paused
                    .get(&node)
                    .is_some_and(|paused| paused.pause == pause)
                {
                    self.resume(node)?;
                }
            }
            Event::EndFaults => self.end_faults()?,
            Event::Check => self.check_liveness()?,
        }
        Ok(())
    }

    fn is_paused(&self, idx: usize) -> bool {
        self.paused.contains_key(&idx)
    }

    /// The server whose process takes `event` as an input, if any.
    fn input_of(&self, event: &Event) -> Option<usize> {
        match event {
            Event::Tick { node, .. }
            | Event::Fsync { node, .. }
            | Event::OwnSyncTimer { node, .. }
            | Event::SnapshotRead { node, .. }
            | Event::Disconnected { node, .. }
            | Event::CoreTick { node, .. } => Some(*node),
            Event::Arrive { to, .. } => Some(*to),
            Event::ZkToServer { conn, .. } => self.zk.as_ref().and_then(|zk| zk.server_of(*conn)),
            Event::ClientStep { .. }
            | Event::ZkToClient { .. }
            | Event::Fault
            | Event::Restart { .. }
            | Event::Resume { .. }
            | Event::EndFaults
            | Event::Check => None,
        }
    }

    // ----- servers ----------------------------------------------------------------------

    fn start(&mut self, idx: usize) -> Result<(), String> {
        let now_ms = self.now_ms();
        let node = &mut self.nodes[idx];
        let config = Config {
            incarnation: node.life,
            ..node.config.clone()
        };
        let snapshot_position = node.disk.snapshot_position();
        node.disk.continue_after(snapshot_position);
        node.machine = match &node.disk.snapshot {
            Some(s) => StateMachine::from_snapshot(&s.payload).ok_or("bad saved snapshot")?,
            None => StateMachine {
                applied: 0,
                hash: 0,
            },
        };
        node.last_snapshot = snapshot_position;
        node.set_status(Status::Looking, self.now);
        node.restart_at = None;
        node.fsync_at = self.now;
        node.leader_sync = LeaderSync::new(self.now);
        let recovered = node.disk.recover();
        let life = node.life;
        self.log(Some(idx), || {
            format!(
                "start: epochs {:?}, snapshot {:?}, {} entries {:?}",
                recovered.epochs,
                (recovered.snapshot_position, recovered.snapshot_epoch),
                recovered.entries.len(),
                recovered
                    .entries
                    .first()
                    .map(|e| e.position)
                    .zip(recovered.entries.last().map(|e| e.position))
            )
        });
        let (zab, actions) = Zab::new(config, recovered, now_ms);
        self.nodes[idx].zab = Some(zab);
        if self.zk.is_some() {
            self.start_front(idx)?;
        }
        let delay = self.rng.range(self.tick_us.0, self.tick_us.1);
        self.at(delay, Event::Tick { node: idx, life });
        self.execute(idx, actions)?;
        self.maybe_snapshot(idx)
    }

    fn crash(&mut self, idx: usize) {
        if !self.nodes[idx].is_up() {
            return;
        }
        // What a stopped process had not read dies with it.
        self.paused.remove(&idx);
        let lost = {
            let node = &mut self.nodes[idx];
            node.zab = None;
            node.life += 1;
            node.set_status(Status::Looking, self.now);
            node.disk.crash(&mut self.rng)
        };
        self.log(Some(idx), || {
            format!("CRASH (lost {lost} unsynced entries)")
        });
        self.crashes += 1;
        self.end_connections(idx);
        if self.zk.is_some() {
            self.crash_front(idx);
        }
        if self.net.config.notify_disconnect {
            let id = self.nodes[idx].id;
            for other in 0..self.nodes.len() {
                if other != idx && self.nodes[other].is_up() {
                    let life = self.nodes[other].life;
                    let delay = self.rng.range(100, 5_000);
                    self.at(
                        delay,
                        Event::Disconnected {
                            node: other,
                            life,
                            peer: id,
                        },
                    );
                }
            }
        }
        let delay = if self.phase == Phase::Faults {
            self.rng.range(1_000, 800_000)
        } else {
            self.rng.range(1_000, 20_000)
        };
        self.nodes[idx].restart_at = Some(self.now + delay);
        self.at(delay, Event::Restart { node: idx });
    }

    fn feed(&mut self, idx: usize, input: Input) -> Result<(), String> {
        if !self.nodes[idx].is_up() {
            return Ok(());
        }
        self.log(Some(idx), || format!("<- {}", describe_input(&input)));
        let now_ms = self.now_ms();
        let zab = self.nodes[idx].zab.as_mut().unwrap();
        let actions = zab.handle(input, now_ms);
        self.trace_hash = fnv(self.trace_hash, actions.len() as u64);
        self.execute(idx, actions)?;
        self.follow_own_sync(idx);
        self.maybe_snapshot(idx)?;
        if self.zk.is_some() {
            self.pump(idx)?;
        }
        Ok(())
    }

    /// What the real driver does after each input: follows the leader's own sync, which may
    /// set or lift the sync delay, start held fsyncs, or arm the stall timer.
    fn follow_own_sync(&mut self, idx: usize) {
        let now = self.now;
        let node = &mut self.nodes[idx];
        let Some(zab) = node.zab.as_ref() else {
            return;
        };
        let sync = &mut node.leader_sync;
        let armed = sync.own_sync.stall_deadline_us();
        let steps = sync.own_sync.follow_zab(zab, now);
        if let Some(delay_us) = steps.delay_us {
            sync.delay_us = delay_us;
        }
        let stall = sync
            .own_sync
            .stall_deadline_us()
            .filter(|d| armed != Some(*d));
        let life = node.life;
        if steps.sync_now {
            if node.leader_sync.held > 0 {
                self.start_held_fsyncs(idx);
            } else {
                node.leader_sync.sync_now_pending = true;
            }
        }
        if let Some(deadline) = stall {
            self.queue
                .push(deadline, Event::OwnSyncTimer { node: idx, life });
        }
    }

    /// Logs `entries` and starts their fsync, or holds it while the leader delays its syncs.
    fn write_entries(&mut self, idx: usize, entries: &[Entry]) -> Result<(), String> {
        let id = self.nodes[idx].id;
        let node = &mut self.nodes[idx];
        node.disk
            .append(entries)
            .map_err(|e| format!("server {id}: {e}"))?;
        let sync = &mut node.leader_sync;
        if sync.delay_us == 0 || std::mem::take(&mut sync.sync_now_pending) {
            self.start_fsync(idx);
            return Ok(());
        }
        sync.held += 1;
        if sync.delay_ends_at.is_none() {
            let at = self.now + sync.delay_us;
            sync.delay_ends_at = Some(at);
            let life = node.life;
            self.queue.push(at, Event::OwnSyncTimer { node: idx, life });
        }
        Ok(())
    }

    fn start_held_fsyncs(&mut self, idx: usize) {
        let sync = &mut self.nodes[idx].leader_sync;
        let held = std::mem::take(&mut sync.held);
        sync.delay_ends_at = None;
        for _ in 0..held {
            self.start_fsync(idx);
        }
    }

    /// Schedules the completion of one append's fsync; completions stay in append order.
    fn start_fsync(&mut self, idx: usize) {
        let life = self.nodes[idx].life;
        let at = (self.now + self.rng.range(self.fsync_us.0, self.fsync_us.1))
            .max(self.nodes[idx].fsync_at);
        self.nodes[idx].fsync_at = at;
        self.queue.push(at, Event::Fsync { node: idx, life });
    }

    fn execute(&mut self, idx: usize, actions: Vec<Action>) -> Result<(), String> {
        let id = self.nodes[idx].id;
        for action in actions {
            if !self.nodes[idx].is_up() {
                break;
            }
            if self.phase == Phase::Faults && self.rng.chance(self.mid_batch_crash_p) {
                self.log(Some(idx), || {
                    "crash in the middle of a batch of actions".into()
                });
                self.crash(idx);
                break;
            }
            self.log(Some(idx), || format!("-> {}", describe_action(&action)));
            match action {
                Action::Send { to, message } => {
                    let Some(to) = self.nodes.iter().position(|n| n.id == to) else {
                        return Err(format!("server {id} sent to unknown server {to}"));
                    };
                    for delay in self.net.delays(&mut self.rng, idx, to) {
                        self.at(
                            delay,
                            Event::Arrive {
                                from: idx,
                                to,
                                message: message.clone(),
                            },
                        );
                    }
                }
                Action::PersistEpochs(epochs) => {
                    let old = self.nodes[idx].disk.epochs;
                    check_epochs(id, old, epochs)?;
                    self.nodes[idx].disk.epochs = epochs;
                }
                Action::Truncate { after } => {
                    if after < self.nodes[idx].machine.applied {
                        return Err(format!(
                            "server {id} truncates after {after}, below its applied position {}",
                            self.nodes[idx].machine.applied
                        ));
                    }
                    self.nodes[idx].disk.truncate(after);
                }
                Action::Append { entries } => self.write_entries(idx, &entries)?,
                Action::InstallSnapshot {
                    position,
                    epoch,
                    payload,
                } => {
                    let machine = StateMachine::from_snapshot(&payload)
                        .ok_or_else(|| format!("server {id} installs a malformed snapshot"))?;
                    let len = self.checker.sequence.len() as u64;
                    if machine.applied != position
                        || position > len
                        || self.checker.hashes[position as usize] != machine.hash
                    {
                        return Err(format!(
                            "server {id} installs a snapshot at {position} that is not the common state there (snapshot says {}, common sequence ends at {len})",
                            machine.applied
                        ));
                    }
                    if position < self.nodes[idx].machine.applied {
                        return Err(format!(
                            "server {id} installs a snapshot at {position}, behind its applied position {}",
                            self.nodes[idx].machine.applied
                        ));
                    }
                    let tree_bytes = self.zk.is_some().then(|| payload.slice(16..));
                    let node = &mut self.nodes[idx];
                    node.disk.install(position, epoch, payload);
                    node.machine = machine;
                    node.last_snapshot = position;
                    if let Some(front) = &node.front {
                        front
                            .layer
                            .committed
                            .store(position, std::sync::atomic::Ordering::Release);
                    }
                    if let Some(tree_bytes) = tree_bytes {
                        self.core_input(
                            idx,
                            zoolog_server::core::Input::InstallSnapshot { tree_bytes },
                        )?;
                    }
                }
                Action::LoadSnapshot { .. } => {
                    let life = self.nodes[idx].life;
                    let delay = self.rng.range(self.fsync_us.0, self.fsync_us.1);
                    self.at(delay, Event::SnapshotRead { node: idx, life });
                }
                Action::Deliver { entries } => {
                    for (position, payload) in entries {
                        self.nodes[idx]
                            .machine
                            .apply(position, &payload)
                            .map_err(|e| format!("server {id}: {e}"))?;
                        let new = self.checker.delivered(id, position, &payload)?;
                        if self.zk.is_none() {
                            self.acknowledge(idx, position, &payload)?;
                            continue;
                        }
                        if new {
                            self.zk_committed(position, &payload)?;
                        }
                        if let Some(front) = &self.nodes[idx].front {
                            front
                                .layer
                                .committed
                                .store(position, std::sync::atomic::Ordering::Release);
                        }
                        self.core_input(
                            idx,
                            zoolog_server::core::Input::Committed {
                                position: position as i64,
                                entry: payload,
                            },
                        )?;
                    }
                }
                Action::StatusChanged(status) => {
                    self.nodes[idx].set_status(status, self.now);
                    self.end_connections(idx);
                    if self.zk.is_some() {
                        self.core_input(idx, zoolog_server::core::Input::Role(status.into()))?;
                    }
                }
            }
        }
        Ok(())
    }

    fn maybe_snapshot(&mut self, idx: usize) -> Result<(), String> {
        let node = &mut self.nodes[idx];
        let Some(zab) = &node.zab else {
            return Ok(());
        };
        if zab.delivered_position() != node.machine.applied {
            return Err(format!(
                "server {}: the machine says delivered {}, the driver applied {}",
                node.id,
                zab.delivered_position(),
                node.machine.applied
            ));
        }
        let position = node.machine.applied;
        if position < node.last_snapshot + self.snapshot_every {
            return Ok(());
        }
        let Some(epoch) = zab.epoch_at(position) else {
            return Ok(());
        };
        let purge = self
            .rng
            .chance(self.purge_p)
            .then(|| position - self.rng.below(2));
        let mut payload = node.machine.snapshot_payload();
        if self.zk.is_some() {
            payload = self.front_snapshot(idx, payload);
        }
        let node = &mut self.nodes[idx];
        node.disk.save_snapshot(
            SavedSnapshot {
                position,
                epoch,
                payload,
            },
            purge,
        );
        node.last_snapshot = position;
        self.feed(idx, Input::SnapshotSaved { position })
    }

    // ----- clients ----------------------------------------------------------------------

    fn end_connections(&mut self, idx: usize) {
        for c in 0..self.clients.len() {
            let client = &mut self.clients[c];
            if client
                .connection
                .as_ref()
                .is_some_and(|conn| conn.node == idx)
            {
                client.connection = None;
                for seq in client.in_flight.drain(..) {
                    self.checker.unknown(client.id, seq);
                }
                client.reconnect_at = self.now + self.rng.range(0, 50_000);
            }
        }
    }

    fn acknowledge(&mut self, idx: usize, position: u64, payload: &[u8]) -> Result<(), String> {
        let Some((client_id, seq)) = decode_payload(payload) else {
            return Ok(());
        };
        let Some(client) = self.clients.get_mut(client_id as usize - 1) else {
            return Ok(());
        };
        if client.connection.as_ref().is_none_or(|c| c.node != idx) {
            return Ok(());
        }
        if !client.in_flight.contains(&seq) {
            return Ok(());
        }
        if client.in_flight.front() != Some(&seq) {
            return Err(format!(
                "FIFO: server {} acknowledged command {:?} at position {position} before the client's earlier commands {:?} on the same connection",
                self.nodes[idx].id,
                (client_id, seq),
                client.in_flight.iter().take_while(|s| **s != seq).collect::<Vec<_>>()
            ));
        }
        client.in_flight.pop_front();
        self.checker.acknowledged(client_id, seq, position)?;
        if self.phase == Phase::Liveness
            && self.checker.commands[&(client_id, seq)].submitted_us >= self.faults_end
        {
            self.post_heal_acked += 1;
        }
        Ok(())
    }

    fn client_step(&mut self, c: usize) -> Result<(), String> {
        let (lo, hi) = self.clients[c].step_us;
        let delay = self.rng.range(lo, hi);
        self.at(delay, Event::ClientStep { client: c });
        if self.clients[c].connection.is_none() {
            if self.now < self.clients[c].reconnect_at {
                return Ok(());
            }
            let candidates: Vec<usize> = (0..self.nodes.len())
                .filter(|i| {
                    let n = &self.nodes[*i];
                    n.is_up() && !n.observer && n.status.is_serving()
                })
                .collect();
            let Some(&node) = self.rng.pick(&candidates) else {
                return Ok(());
            };
            let id = self.next_connection;
            self.next_connection += 1;
            self.clients[c].connection = Some(Connection {
                id,
                node,
                status: self.nodes[node].status,
            });
        }
        if self.quiesce {
            return Ok(());
        }
        let conn = self.clients[c].connection.clone().unwrap();
        if self.clients[c].in_flight.is_empty() && self.rng.chance(0.01) {
            self.clients[c].connection = None;
            return Ok(());
        }
        let room = self.clients[c].max_in_flight - self.clients[c].in_flight.len();
        let lane = self.clients[c].lane;
        let capacity = self.nodes[conn.node]
            .zab
            .as_ref()
            .map_or(AppendCapacity::NONE, |z| z.append_capacity(lane));
        if room == 0
            || capacity.is_none()
            || self.nodes[conn.node].status != conn.status
            || self.is_paused(conn.node)
        {
            return Ok(());
        }
        let mut count = (room as u64).min(self.rng.range(1, 3));
        let client = &mut self.clients[c];
        let checker = &mut self.checker;
        let now = self.now;
        let payloads = capacity.fill(|| {
            if count == 0 {
                return None;
            }
            count -= 1;
            let seq = client.next_seq;
            client.next_seq += 1;
            client.in_flight.push_back(seq);
            checker.submitted(client.id, seq, conn.id, now);
            Some(encode_payload(client.id, seq))
        });
        self.feed(conn.node, Input::Append { lane, payloads })
    }

    // ----- faults and liveness ----------------------------------------------------------

    fn leader(&self) -> Option<usize> {
        self.nodes.iter().position(|n| {
            n.is_up()
                && matches!(
                    n.status,
                    Status::Serving {
                        role: ServingRole::Leader,
                        ..
                    }
                )
        })
    }

    fn fault(&mut self) -> Result<(), String> {
        if self.phase != Phase::Faults {
            return Ok(());
        }
        let delay = self.rng.range(self.fault_gap_us.0, self.fault_gap_us.1);
        self.at(delay, Event::Fault);
        let roll = self.rng.below(100);
        match roll {
            0..=29 => {
                let up: Vec<usize> = (0..self.nodes.len())
                    .filter(|i| self.nodes[*i].is_up())
                    .collect();
                if let Some(victim) = self.pick_victim(&up) {
                    self.crash(victim);
                }
            }
            30..=49 => {
                let groups = self.rng.range(2, 3) as u32;
                let cut = self.net.partition(&mut self.rng, groups);
                self.log(None, || format!("PARTITION {cut:?}"));
                self.notify_cut(cut);
            }
            50..=59 => {
                if let Some(leader) = self.leader() {
                    let cut = self.net.isolate(leader);
                    self.log(None, || {
                        format!("ISOLATE leader n{}", self.nodes[leader].id)
                    });
                    self.notify_cut(cut);
                }
            }
            60..=79 => {
                self.log(None, || "HEAL".into());
                self.net.heal();
            }
            80..=89 => {
                self.net.config.loss_p = *self.rng.pick(&[0.0, 0.01, 0.05, 0.3]).unwrap();
                self.net.config.duplicate_p = *self.rng.pick(&[0.0, 0.01, 0.1]).unwrap();
                self.log(None, || format!("NET {:?}", self.net.config));
            }
            90..=94 => self.pause(),
            _ => {}
        }
        Ok(())
    }

    /// The leader half the time (when it is a candidate), else any of `candidates`.
    fn pick_victim(&mut self, candidates: &[usize]) -> Option<usize> {
        match self.leader() {
            Some(leader) if candidates.contains(&leader) && self.rng.chance(0.5) => Some(leader),
            _ => self.rng.pick(candidates).copied(),
        }
    }

    /// Stops a server's process (the leader half the time) for up to four leader timeouts, as
    /// SIGSTOP, a long pause or a descheduled VM would: its inputs wait until it resumes.
    fn pause(&mut self) {
        let running: Vec<usize> = (0..self.nodes.len())
            .filter(|i| self.nodes[*i].is_up() && !self.is_paused(*i))
            .collect();
        let Some(victim) = self.pick_victim(&running) else {
            return;
        };
        let longest_us = 4 * self.nodes[victim].config.leader_timeout_ms * 1000;
        let pause_us = self.rng.range(1_000, longest_us);
        self.pauses += 1;
        let pause = self.pauses;
        let held = VecDeque::new();
        self.paused.insert(victim, Paused { pause, held });
        self.at(
            pause_us,
            Event::Resume {
                node: victim,
                pause,
            },
        );
        self.log(Some(victim), || format!("PAUSE for {pause_us} us"));
    }

    /// Resumes a stopped server: it takes what came meanwhile, in the order it came.
    fn resume(&mut self, idx: usize) -> Result<(), String> {
        let Some(paused) = self.paused.remove(&idx) else {
            return Ok(());
        };
        self.log(Some(idx), || {
            format!("RESUME ({} inputs held)", paused.held.len())
        });
        for event in paused.held {
            self.dispatch(event)?;
        }
        Ok(())
    }

    fn notify_cut(&mut self, cut: Vec<(usize, usize)>) {
        if !self.net.config.notify_disconnect {
            return;
        }
        for (a, b) in cut {
            for (me, peer) in [(a, b), (b, a)] {
                if self.nodes[me].is_up() {
                    let life = self.nodes[me].life;
                    let peer = self.nodes[peer].id;
                    let delay = self.rng.range(100, 5_000);
                    self.at(
                        delay,
                        Event::Disconnected {
                            node: me,
                            life,
                            peer,
                        },
                    );
                }
            }
        }
    }

    fn end_faults(&mut self) -> Result<(), String> {
        self.log(None, || "END OF FAULTS: heal, restart everything".into());
        self.phase = Phase::Liveness;
        self.net.heal();
        self.net.config.loss_p = 0.0;
        self.net.config.duplicate_p = 0.0;
        self.net.config.tail_p = 0.0;
        self.left_down = self.choose_left_down();
        self.calm_until = self.now + self.choose_calm_stretch_us();
        for idx in 0..self.nodes.len() {
            self.resume(idx)?;
            if Some(idx) == self.left_down {
                self.log(Some(idx), || "LEFT DOWN for the liveness phase".into());
                self.crash(idx);
                self.nodes[idx].restart_at = None;
            } else if !self.nodes[idx].is_up() {
                self.start(idx)?;
            }
        }
        self.deadline = self.now + self.liveness_us;
        self.at(10_000, Event::Check);
        Ok(())
    }

    /// In zab mode with at least three participants, one seed in four leaves one down for
    /// the liveness phase: the leader when there is one (the failover every deployment
    /// meets), else any participant.
    fn choose_left_down(&mut self) -> Option<usize> {
        let participants: Vec<usize> = (0..self.nodes.len())
            .filter(|idx| !self.nodes[*idx].observer)
            .collect();
        if self.zk.is_some() || participants.len() < 3 || !self.rng.chance(0.25) {
            return None;
        }
        // An observer never leads.
        Some(
            self.leader().unwrap_or_else(|| {
                participants[self.rng.below(participants.len() as u64) as usize]
            }),
        )
    }

    fn choose_calm_stretch_us(&mut self) -> u64 {
        let Some(zk) = &self.zk else {
            return 0;
        };
        let longest_us = zk.longest_requested_timeout_us();
        if !self.rng.chance(0.25) {
            return 0;
        }
        2 * longest_us
    }

    /// Every server but the one left down for the liveness phase.
    fn running_to_the_end(&self) -> impl Iterator<Item = &Node> {
        let left_down = self.left_down;
        self.nodes
            .iter()
            .enumerate()
            .filter(move |(idx, _)| Some(*idx) != left_down)
            .map(|(_, node)| node)
    }

    fn check_liveness(&mut self) -> Result<(), String> {
        if self.converged() {
            self.log(None, || "CONVERGED".into());
            self.done = true;
            return Ok(());
        }
        if self.now >= self.deadline {
            return Err(format!(
                "liveness: no convergence {} ms after the faults stopped (acknowledged since: {}, quiescing: {})\n{}",
                self.liveness_us / 1000,
                self.zk.as_ref().map_or(self.post_heal_acked, |zk| zk.post_heal_acked),
                self.quiesce,
                self.describe_state()
            ));
        }
        self.at(20_000, Event::Check);
        Ok(())
    }

    fn converged(&mut self) -> bool {
        let Some(leader) = self.leader() else {
            return false;
        };
        let Status::Serving { epoch, .. } = self.nodes[leader].status else {
            return false;
        };
        let leader_id = self.nodes[leader].id;
        let all_follow = self.running_to_the_end().all(|n| {
            n.is_up()
                && matches!(n.status, Status::Serving { leader: l, epoch: e, .. } if l == leader_id && e == epoch)
        });
        let post_heal_acked = match &self.zk {
            Some(zk) => zk.post_heal_acked,
            None => self.post_heal_acked,
        };
        if !all_follow || post_heal_acked == 0 || self.now < self.calm_until {
            return false;
        }
        self.quiesce = true;
        if self.clients.iter().any(|c| !c.in_flight.is_empty()) {
            return false;
        }
        if self.zk.is_some() && !self.zk_quiet() {
            return false;
        }
        let len = self.checker.sequence.len() as u64;
        let logged = self.nodes[leader]
            .zab
            .as_ref()
            .unwrap()
            .last_logged_position();
        logged == len
            && self.running_to_the_end().all(|n| {
                n.machine.applied == len && n.zab.as_ref().unwrap().delivered_position() == len
            })
    }

    pub(crate) fn describe_state(&self) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            match &node.zab {
                None => writeln!(out, "  server {}: down", node.id).unwrap(),
                Some(zab) => writeln!(
                    out,
                    "  server {}{}: {:?}, epochs {:?}, logged {}, committed {}, delivered {}, disk log end {}, snapshot {}",
                    node.id,
                    if node.observer { " (observer)" } else { "" },
                    node.status,
                    zab.epochs(),
                    zab.last_logged_position(),
                    zab.committed_position(),
                    zab.delivered_position(),
                    node.disk.log_end(),
                    node.disk.snapshot_position(),
                )
                .unwrap(),
            }
        }
        writeln!(
            out,
            "  common sequence: {} entries",
            self.checker.sequence.len()
        )
        .unwrap();
        self.zk_describe(&mut out);
        for client in &self.clients {
            let pending: Vec<_> = client
                .in_flight
                .iter()
                .map(|seq| {
                    let c = &self.checker.commands[&(client.id, *seq)];
                    (*seq, c.state == CommandState::InFlight, c.position)
                })
                .collect();
            writeln!(
                out,
                "  client {}: connection {:?}, in flight {:?}",
                client.id,
                client
                    .connection
                    .as_ref()
                    .map(|c| (c.id, self.nodes[c.node].id)),
                pending
            )
            .unwrap();
        }
        out
    }
}

fn check_epochs(id: u64, old: Epochs, new: Epochs) -> Result<(), String> {
    if new.accepted < old.accepted || new.current < old.current || new.current > new.accepted {
        return Err(format!(
            "server {id} persists epochs {new:?} after {old:?}: epochs never go back, and current never passes accepted"
        ));
    }
    Ok(())
}

fn describe_input(input: &Input) -> String {
    match input {
        Input::Tick => "Tick".into(),
        Input::Message { from, message } => format!("from n{from}: {}", describe_message(message)),
        Input::PeerDisconnected { peer } => format!("PeerDisconnected n{peer}"),
        Input::Append { lane, payloads } => format!(
            "Append {lane:?} {:?}",
            payloads
                .iter()
                .map(|p| decode_payload(p))
                .collect::<Vec<_>>()
        ),
        Input::Logged { position, epoch } => format!("Logged {position} (epoch {epoch})"),
        Input::SnapshotSaved { position } => format!("SnapshotSaved {position}"),
        Input::SnapshotLoaded { position, .. } => format!("SnapshotLoaded at {position}"),
        Input::SnapshotUnavailable => "SnapshotUnavailable".to_string(),
    }
}

/// The zab crate's line for a message, but a forward's commands decoded.
fn describe_message(message: &Message) -> String {
    match message {
        Message::Forward {
            link,
            lane,
            first_sequence,
            payloads,
        } => format!(
            "Forward {{ {link:?}, {lane:?}, first_sequence {first_sequence}, {:?} }}",
            payloads
                .iter()
                .map(|p| decode_payload(p))
                .collect::<Vec<_>>()
        ),
        other => other.to_string(),
    }
}

fn describe_action(action: &Action) -> String {
    match action {
        Action::Send { to, message } => format!("to n{to}: {}", describe_message(message)),
        Action::Append { entries } => format!("Append {}", EntryRange(entries)),
        Action::InstallSnapshot {
            position, epoch, ..
        } => format!("InstallSnapshot {position} (epoch {epoch})"),
        Action::Deliver { entries } => format!(
            "Deliver {:?}",
            entries
                .iter()
                .map(|(p, payload)| (*p, decode_payload(payload)))
                .collect::<Vec<_>>()
        ),
        other => format!("{other:?}"),
    }
}
