//! The client's half of the watch tables: who waits for which path, how a notification fans out
//! to them, and the SetWatches batches that re-register everything on a new connection.
//!
//! Paths here are server paths (chroot included), as the server names them in notifications.

use std::collections::HashMap;
use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::{broadcast, oneshot};
use zoolog_proto::{EventType, Request, SetWatches, SetWatches2, WatcherType};

use crate::hosts::Chroot;
use crate::{Error, WatchedEvent};

/// Java's client batches SetWatches at about this many path bytes; servers accept any number of
/// batches, and a batch this size stays far below jute.maxbuffer.
const SET_WATCHES_BATCH_BYTES_MAX: usize = 128 * 1024;

type OneShotSender = oneshot::Sender<Result<WatchedEvent, Error>>;
type PersistentSender = broadcast::Sender<WatchedEvent>;
/// Picks one of the five path lists of a SetWatches2 batch.
type BatchList = fn(&mut SetWatches2) -> &mut Vec<String>;

/// Resolves once, when the watched node changes (or with an error when the session ends first).
#[must_use = "a watch does nothing unless awaited"]
#[derive(Debug)]
pub struct Watch {
    receiver: oneshot::Receiver<Result<WatchedEvent, Error>>,
}

impl Future for Watch {
    type Output = Result<WatchedEvent, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // A dropped sender means the session task is gone: the client was dropped or closed.
        Pin::new(&mut self.receiver)
            .poll(cx)
            .map(|delivered| delivered.unwrap_or(Err(Error::SessionClosed)))
    }
}

/// The events of one persistent (or persistent recursive) watch, in the order the server sent them.
#[derive(Debug)]
pub struct PersistentWatch {
    receiver: broadcast::Receiver<WatchedEvent>,
}

impl PersistentWatch {
    /// The next event; `WatchLagged` if the buffer overflowed (the stream goes on), `WatchEnded`
    /// once the watch was removed or the session ended.
    pub async fn next(&mut self) -> Result<WatchedEvent, Error> {
        self.receiver.recv().await.map_err(|error| match error {
            broadcast::error::RecvError::Lagged(missed) => Error::WatchLagged { missed },
            broadcast::error::RecvError::Closed => Error::WatchEnded,
        })
    }
}

/// The watch side effect of a request, applied when its reply arrives.
pub(crate) struct WatchChange {
    pub server_path: String,
    pub kind: WatchChangeKind,
}

pub(crate) enum WatchChangeKind {
    /// getData: registered if the node exists.
    Data(OneShotSender),
    /// exists: a data watch if the node exists, an exist watch if it does not.
    Exists(OneShotSender),
    Children(OneShotSender),
    Persistent(PersistentSender),
    PersistentRecursive(PersistentSender),
    /// removeWatches succeeded: drop the local watchers of this type.
    Remove(WatcherType),
}

/// Makes the caller's end and the registry's end of a one-shot watch.
pub(crate) fn one_shot() -> (OneShotSender, Watch) {
    let (sender, receiver) = oneshot::channel();
    (sender, Watch { receiver })
}

/// Makes the caller's end and the registry's end of a persistent watch.
pub(crate) fn persistent(events_max: usize) -> (PersistentSender, PersistentWatch) {
    let (sender, receiver) = broadcast::channel(events_max.max(1));
    (sender, PersistentWatch { receiver })
}

#[derive(Default)]
pub(crate) struct WatchRegistry {
    data: HashMap<String, Vec<OneShotSender>>,
    exist: HashMap<String, Vec<OneShotSender>>,
    child: HashMap<String, Vec<OneShotSender>>,
    persistent: HashMap<String, Vec<PersistentSender>>,
    recursive: HashMap<String, Vec<PersistentSender>>,
}

impl WatchRegistry {
    /// Applies a request's watch change given how the request ended.
    pub fn apply(&mut self, change: WatchChange, succeeded: bool, no_node: bool, chroot: &Chroot) {
        let path = change.server_path;
        match change.kind {
            WatchChangeKind::Data(sender) if succeeded => {
                self.data.entry(path).or_default().push(sender)
            }
            WatchChangeKind::Exists(sender) if succeeded => {
                self.data.entry(path).or_default().push(sender)
            }
            WatchChangeKind::Exists(sender) if no_node => {
                self.exist.entry(path).or_default().push(sender)
            }
            WatchChangeKind::Children(sender) if succeeded => {
                self.child.entry(path).or_default().push(sender)
            }
            WatchChangeKind::Persistent(sender) if succeeded => {
                self.persistent.entry(path).or_default().push(sender)
            }
            WatchChangeKind::PersistentRecursive(sender) if succeeded => {
                self.recursive.entry(path).or_default().push(sender)
            }
            WatchChangeKind::Remove(watcher_type) if succeeded => {
                self.remove(&path, watcher_type, chroot)
            }
            // The request failed: nothing was registered server-side, so the caller's end just drops.
            _ => {}
        }
    }

    /// Fans a notification out to every local watcher it concerns, as the server's tables would.
    pub fn dispatch(
        &mut self,
        event_type: EventType,
        server_path: &str,
        zxid: i64,
        chroot: &Chroot,
    ) {
        let event = WatchedEvent {
            event_type,
            path: chroot.client_path(server_path),
            zxid,
        };
        let one_shot_tables: &mut [&mut HashMap<String, Vec<OneShotSender>>] = match event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                &mut [&mut self.data, &mut self.exist]
            }
            EventType::NodeChildrenChanged => &mut [&mut self.child],
            EventType::NodeDeleted => &mut [&mut self.data, &mut self.exist, &mut self.child],
            _ => &mut [],
        };
        for table in one_shot_tables.iter_mut() {
            fire_one_shot(table, server_path, &event);
        }
        fire_persistent(&mut self.persistent, server_path, &event);
        // Recursive watches never see NodeChildrenChanged: they get the children's own events.
        if event_type != EventType::NodeChildrenChanged && !self.recursive.is_empty() {
            for ancestor in self_and_ancestors(server_path) {
                fire_persistent(&mut self.recursive, ancestor, &event);
            }
        }
    }

    /// Removes local watchers after a successful removeWatches, telling each why it ended.
    fn remove(&mut self, server_path: &str, watcher_type: WatcherType, chroot: &Chroot) {
        let removed = |event_type| WatchedEvent {
            event_type,
            path: chroot.client_path(server_path),
            zxid: -1,
        };
        let data = matches!(watcher_type, WatcherType::Data | WatcherType::Any);
        let children = matches!(watcher_type, WatcherType::Children | WatcherType::Any);
        let persistent = matches!(watcher_type, WatcherType::Persistent | WatcherType::Any);
        let recursive = matches!(
            watcher_type,
            WatcherType::PersistentRecursive | WatcherType::Any
        );
        if data {
            fire_one_shot(
                &mut self.data,
                server_path,
                &removed(EventType::DataWatchRemoved),
            );
            fire_one_shot(
                &mut self.exist,
                server_path,
                &removed(EventType::DataWatchRemoved),
            );
        }
        if children {
            fire_one_shot(
                &mut self.child,
                server_path,
                &removed(EventType::ChildWatchRemoved),
            );
        }
        for (wanted, table) in [
            (persistent, &mut self.persistent),
            (recursive, &mut self.recursive),
        ] {
            if wanted {
                for sender in table.remove(server_path).unwrap_or_default() {
                    let _ = sender.send(removed(EventType::PersistentWatchRemoved));
                }
            }
        }
    }

    /// Ends every watcher with `error` (the session is over); persistent streams just end.
    pub fn end_all(&mut self, error: &Error) {
        for table in [&mut self.data, &mut self.exist, &mut self.child] {
            for sender in table.drain().flat_map(|(_, senders)| senders) {
                let _ = sender.send(Err(error.clone()));
            }
        }
        self.persistent.clear();
        self.recursive.clear();
    }

    /// The SetWatches/SetWatches2 requests that restore every live watch on a new connection.
    /// Watchers whose caller has gone away are forgotten rather than re-registered.
    pub fn set_watches_requests(&mut self, relative_zxid: i64) -> Vec<Request> {
        self.forget_abandoned();
        let mut batches = Vec::new();
        let mut batch = SetWatches2 {
            relative_zxid,
            ..SetWatches2::default()
        };
        let mut batch_bytes = 0;
        let tables: [(&[String], BatchList); 5] = [
            (&sorted_keys(&self.data), |b| &mut b.data_watches),
            (&sorted_keys(&self.exist), |b| &mut b.exist_watches),
            (&sorted_keys(&self.child), |b| &mut b.child_watches),
            (&sorted_keys(&self.persistent), |b| {
                &mut b.persistent_watches
            }),
            (&sorted_keys(&self.recursive), |b| {
                &mut b.persistent_recursive_watches
            }),
        ];
        for (paths, list_of) in tables {
            for path in paths {
                if batch_bytes > 0 && batch_bytes + path.len() > SET_WATCHES_BATCH_BYTES_MAX {
                    batches.push(set_watches_request(mem::replace(
                        &mut batch,
                        SetWatches2 {
                            relative_zxid,
                            ..SetWatches2::default()
                        },
                    )));
                    batch_bytes = 0;
                }
                list_of(&mut batch).push(path.clone());
                batch_bytes += path.len();
            }
        }
        if batch_bytes > 0 {
            batches.push(set_watches_request(batch));
        }
        batches
    }

    fn forget_abandoned(&mut self) {
        for table in [&mut self.data, &mut self.exist, &mut self.child] {
            table.retain(|_, senders| {
                senders.retain(|sender| !sender.is_closed());
                !senders.is_empty()
            });
        }
        for table in [&mut self.persistent, &mut self.recursive] {
            table.retain(|_, senders| {
                senders.retain(|sender| sender.receiver_count() > 0);
                !senders.is_empty()
            });
        }
    }
}

fn sorted_keys<V>(table: &HashMap<String, V>) -> Vec<String> {
    let mut keys: Vec<String> = table.keys().cloned().collect();
    keys.sort();
    keys
}

/// Old servers only know SetWatches (101), so SetWatches2 (105) is used only when needed.
fn set_watches_request(batch: SetWatches2) -> Request {
    if batch.persistent_watches.is_empty() && batch.persistent_recursive_watches.is_empty() {
        Request::SetWatches(SetWatches {
            relative_zxid: batch.relative_zxid,
            data_watches: batch.data_watches,
            exist_watches: batch.exist_watches,
            child_watches: batch.child_watches,
        })
    } else {
        Request::SetWatches2(batch)
    }
}

fn fire_one_shot(
    table: &mut HashMap<String, Vec<OneShotSender>>,
    server_path: &str,
    event: &WatchedEvent,
) {
    for sender in table.remove(server_path).unwrap_or_default() {
        let _ = sender.send(Ok(event.clone()));
    }
}

fn fire_persistent(
    table: &mut HashMap<String, Vec<PersistentSender>>,
    server_path: &str,
    event: &WatchedEvent,
) {
    if let Some(senders) = table.get_mut(server_path) {
        // A send fails only when the caller dropped the stream: forget that watcher.
        senders.retain(|sender| sender.send(event.clone()).is_ok());
    }
}

/// "/a/b" yields "/a/b", "/a", "/".
fn self_and_ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(path);
    std::iter::from_fn(move || {
        let current = next?;
        next = match current.rfind('/') {
            Some(0) if current.len() > 1 => Some("/"),
            Some(0) | None => None,
            Some(slash) => Some(&current[..slash]),
        };
        Some(current)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_end_at_root() {
        assert_eq!(
            self_and_ancestors("/a/b").collect::<Vec<_>>(),
            ["/a/b", "/a", "/"]
        );
        assert_eq!(self_and_ancestors("/").collect::<Vec<_>>(), ["/"]);
    }

    #[test]
    fn deletion_fires_data_exist_and_child_watches_once() {
        let mut registry = WatchRegistry::default();
        let chroot = Chroot::default();
        let (data, mut data_watch) = one_shot();
        let (child, mut child_watch) = one_shot();
        registry.apply(
            WatchChange {
                server_path: "/n".into(),
                kind: WatchChangeKind::Data(data),
            },
            true,
            false,
            &chroot,
        );
        registry.apply(
            WatchChange {
                server_path: "/n".into(),
                kind: WatchChangeKind::Children(child),
            },
            true,
            false,
            &chroot,
        );
        registry.dispatch(EventType::NodeDeleted, "/n", 7, &chroot);
        let fired = WatchedEvent {
            event_type: EventType::NodeDeleted,
            path: "/n".into(),
            zxid: 7,
        };
        assert_eq!(data_watch.receiver.try_recv().unwrap(), Ok(fired.clone()));
        assert_eq!(child_watch.receiver.try_recv().unwrap(), Ok(fired));
        assert!(registry.set_watches_requests(0).is_empty());
    }

    #[test]
    fn set_watches_batches_stay_bounded_and_use_v2_only_for_persistent() {
        let mut registry = WatchRegistry::default();
        let mut watches = Vec::new();
        for index in 0..3000 {
            let (sender, watch) = one_shot();
            let path = format!("/{index:0>100}");
            registry.apply(
                WatchChange {
                    server_path: path,
                    kind: WatchChangeKind::Data(sender),
                },
                true,
                false,
                &Chroot::default(),
            );
            watches.push(watch);
        }
        let requests = registry.set_watches_requests(5);
        assert_eq!(requests.len(), 3);
        assert!(requests
            .iter()
            .all(|request| matches!(request, Request::SetWatches(_))));
        let (sender, _stream) = persistent(4);
        registry.apply(
            WatchChange {
                server_path: "/p".into(),
                kind: WatchChangeKind::PersistentRecursive(sender),
            },
            true,
            false,
            &Chroot::default(),
        );
        let requests = registry.set_watches_requests(5);
        assert!(
            matches!(requests.last(), Some(Request::SetWatches2(batch)) if batch.persistent_recursive_watches == ["/p"])
        );
    }
}
