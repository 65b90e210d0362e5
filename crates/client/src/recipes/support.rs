//! Small pieces every recipe needs: retrying idempotent calls across a lost connection, making a
//! recipe's directory, and waiting for a node to go away.

use std::future::Future;

use crate::{open_acl_unsafe, Client, CreateMode, Error, ErrorCode, Watch};

/// Runs `attempt` again each time it fails with `ConnectionLoss`. Only for calls whose repetition
/// is harmless (reads, deleting one's own node, creating a node whose owner can be checked).
/// It does not spin: a call made while disconnected waits for the next connection, or, once no
/// server has answered for a session timeout, fails at the end of the next round of attempts.
pub(crate) async fn retrying<T, F, Fut>(mut attempt: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    loop {
        match attempt().await {
            Err(Error::ConnectionLoss) => continue,
            outcome => return outcome,
        }
    }
}

/// Creates `path` and its missing ancestors as empty persistent nodes (an existing node is fine).
pub(crate) async fn ensure_path(client: &Client, path: &str) -> Result<(), Error> {
    let acl = open_acl_unsafe();
    let ends = path.match_indices('/').skip(1).map(|(slash, _)| slash);
    for end in ends.chain([path.len()]).filter(|end| *end > 1) {
        let prefix = &path[..end];
        let created =
            retrying(|| client.create(prefix, Some(b""), &acl, CreateMode::Persistent)).await;
        match created {
            Ok(_) | Err(Error::Server(ErrorCode::NodeExists)) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Deletes `path`; a node already gone (deleted by someone, or with its session) is fine.
pub(crate) async fn delete_if_present(client: &Client, path: &str) -> Result<(), Error> {
    match retrying(|| client.delete(path, None)).await {
        Ok(()) | Err(Error::Server(ErrorCode::NoNode)) => Ok(()),
        Err(error) => Err(error),
    }
}

/// `dir` + "/" + `name`, without doubling the slash under the root.
pub(crate) fn child_path(dir: &str, name: &str) -> String {
    format!("{}/{name}", dir.trim_end_matches('/'))
}

/// Returns once `path` has changed or gone: at once if it does not exist, else when the watch
/// set on it fires. Callers re-read their state afterwards, as the paper's recipes do.
pub(crate) async fn wait_for_change_or_absence(client: &Client, path: &str) -> Result<(), Error> {
    // getData, unlike exists, leaves no watch behind on a node that is already gone.
    match retrying(|| client.get_data_w(path)).await {
        Ok((_, _, watch)) => watch.await.map(drop),
        Err(Error::Server(ErrorCode::NoNode)) => Ok(()),
        Err(error) => Err(error),
    }
}

/// The paper's read-with-watch loop: every read sets a watch, and the next read waits for it, so
/// each read sees a state newer than the last and, after the last change, a read shows it.
#[derive(Debug, Default)]
pub(crate) struct Rewatch {
    pending: Option<Watch>,
}

impl Rewatch {
    /// Waits for the watch of the previous read (none the first time), then reads again.
    /// Cancel-safe: a fired watch is forgotten only once it has been awaited.
    pub async fn next<T, F, Fut>(&mut self, read: F) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(T, Watch), Error>>,
    {
        if let Some(watch) = &mut self.pending {
            watch.await?;
            self.pending = None;
        }
        let (value, watch) = retrying(read).await?;
        self.pending = Some(watch);
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::child_path;

    #[test]
    fn child_paths_have_one_slash() {
        assert_eq!(child_path("/", "a"), "/a");
        assert_eq!(child_path("/locks", "a"), "/locks/a");
    }
}
