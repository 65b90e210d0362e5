//! Containers and TTL nodes in core mode (half the core seeds): clients create containers and
//! TTL nodes under the root, and ephemeral sequential nodes in the containers (as lock and
//! queue recipes do), and the deciding server's reaper deletes each once it is due (a
//! container when it is empty after having had a child, or after `container_never_used_ms`
//! if it never had one; a TTL node after its TTL; times counted from the last change).
//! Checked (with `zkcheck`): a create answers the path it made; the reaper deletes nothing
//! before it is due; and once faults have stopped, it deletes whatever is due: the run does
//! not count as settled before that (so a reaper that stops fails the liveness deadline). Due
//! by the simulation's time: the servers' clocks may be skewed (`clock`).

use zoolog_proto::{CreateRequest, CreateTtlRequest, Request};

use super::{open_acl, Kind, Pending, World, CONTAINERS};
use crate::rng::Rng;
use crate::zkcheck::Reapable;

/// The random stream of the reaper's choices: seeds without it keep every other choice.
pub(super) const REAP_STREAM: u64 = 5;

/// The reaper's settings in a seed that has one, and its random stream.
pub(super) struct Reaping {
    pub(super) check_interval_ms: u64,
    pub(super) never_used_ms: i64,
    /// The fewest nodes a check goes over at a tick: small in most seeds, so that a check
    /// spans ticks while nodes come, change and go.
    pub(super) scan_per_tick_min: usize,
    rng: Rng,
}

impl Reaping {
    /// Half the seeds reap, with their own settings.
    pub(super) fn draw(parent: &Rng) -> Option<Reaping> {
        let mut rng = parent.fork(REAP_STREAM);
        if !rng.chance(0.5) {
            return None;
        }
        Some(Reaping {
            check_interval_ms: rng.range(50, 1_000),
            never_used_ms: rng.range(100, 3_000) as i64,
            scan_per_tick_min: *rng.pick(&[1, 2, 4, 1024]).unwrap(),
            rng,
        })
    }
}

impl World {
    /// Now and then, instead of its next request, a client of a reaping seed creates a
    /// container or a TTL node. Says whether it did.
    pub(super) fn maybe_issue_reapable_create(&mut self, c: usize) -> bool {
        let Some(reaping) = &mut self.zk().reaping else {
            return false;
        };
        let rng = &mut reaping.rng;
        if !rng.chance(0.05) {
            return false;
        }
        let index = rng.below(CONTAINERS.len() as u64) as usize;
        let ttl_ms = match rng.below(3) {
            0 => Some(rng.range(50, 2_000) as i64),
            1 => None,
            _ => {
                // A lock's or a queue's node: the container holds it while its session lives.
                let kind = Kind::Create {
                    ephemeral: true,
                    sequential: true,
                };
                let path = format!("{}/l-", CONTAINERS[index]);
                self.issue(c, kind, path, None, None);
                return true;
            }
        };
        let xid = self.next_xid(c);
        let client = &mut self.zk().clients[c];
        client.values += 1;
        let data = Some(format!("c{}v{}", client.id, client.values).into_bytes());
        let acl = Some(open_acl());
        let (path, request) = match ttl_ms {
            Some(ttl) => {
                let path = format!("/t{index}");
                let request = CreateTtlRequest {
                    path: path.clone(),
                    data,
                    acl,
                    flags: zoolog_proto::CreateMode::PersistentWithTtl.code(),
                    ttl,
                };
                (path, Request::CreateTtl(request))
            }
            None => {
                let path = CONTAINERS[index].to_string();
                let request = CreateRequest {
                    path: path.clone(),
                    data,
                    acl,
                    flags: zoolog_proto::CreateMode::Container.code(),
                };
                (path, Request::CreateContainer(request))
            }
        };
        let pending = Pending::new(xid, Kind::CreateReapable, path, self.now);
        self.send_request(c, pending, &request);
        true
    }

    /// The containers and TTL nodes of the common state that are due by the simulation's
    /// time: the reaper owes their deletion.
    pub(super) fn due_for_reaping(&self) -> impl Iterator<Item = (&String, &Reapable)> {
        let checker = &self.zk.as_ref().expect("core mode").checker;
        let now_us = self.now;
        checker
            .reapable
            .iter()
            .filter(move |(path, node)| node.due(now_us) && checker.childless(path))
    }
}
