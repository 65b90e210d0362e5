//! Configuration management (§2.4 "Configuration Management").
//!
//! The configuration lives in one znode. A process reads it with the watch flag set and, when the
//! watch fires, reads it again with a new watch. **In order**: each read follows the notification
//! of a change, and ZooKeeper delivers a notification before the client can see the state after
//! the change, so every read returns a newer configuration than the one before. **Never missing
//! the last**: a watch is set by every read, so the change after any read fires it, and the read
//! that follows sees the latest version. Intermediate versions may be skipped when several changes
//! land between two reads; as the paper notes, those notifications would only have said that the
//! configuration in hand is stale.

use crate::recipes::support::Rewatch;
use crate::{Client, Error, ErrorCode, Watch};

/// One version of the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigVersion {
    /// `None` when the node's data is null (e.g. zkCli's `create` without data).
    pub data: Option<Vec<u8>>,
    /// The znode's data version (restarts at 0 if the node is deleted and created again).
    pub version: i32,
    /// The zxid of the change that wrote this version; it grows with every version.
    pub modified_zxid: i64,
}

/// Yields the configuration at `path`, then each newer version as it changes.
///
/// ```no_run
/// use zoolog_client::recipes::ConfigWatcher;
/// # async fn example(client: zoolog_client::Client) -> Result<(), zoolog_client::Error> {
/// let mut config = ConfigWatcher::new(&client, "/app/config");
/// loop {
///     match config.next().await? {
///         Some(current) => println!("config v{}: {:?}", current.version, current.data),
///         None => println!("no configuration yet"),
///     }
/// }
/// # }
/// ```
pub struct ConfigWatcher {
    client: Client,
    path: String,
    rewatch: Rewatch,
}

impl ConfigWatcher {
    pub fn new(client: &Client, path: &str) -> ConfigWatcher {
        ConfigWatcher {
            client: client.clone(),
            path: path.to_owned(),
            rewatch: Rewatch::default(),
        }
    }

    /// The first call returns the current configuration at once; each later call waits for a
    /// change and returns the configuration after it. `None`: the node does not exist (yet).
    pub async fn next(&mut self) -> Result<Option<ConfigVersion>, Error> {
        let (client, path) = (&self.client, self.path.as_str());
        self.rewatch.next(|| read_watched(client, path)).await
    }
}

/// Reads the node with a data watch, or, when it does not exist, watches for its creation.
async fn read_watched(
    client: &Client,
    path: &str,
) -> Result<(Option<ConfigVersion>, Watch), Error> {
    loop {
        match client.get_data_w(path).await {
            Ok((data, stat, watch)) => {
                let version = ConfigVersion {
                    data,
                    version: stat.version,
                    modified_zxid: stat.mzxid,
                };
                return Ok((Some(version), watch));
            }
            Err(Error::Server(ErrorCode::NoNode)) => {}
            Err(error) => return Err(error),
        }
        let (stat, created) = client.exists_w(path).await?;
        if stat.is_none() {
            return Ok((None, created));
        }
        // Created between the two reads: read it.
    }
}
