//! A real server for the tests, started through the repository's `tests/zk-server` script so the
//! same tests drive Apache ZooKeeper (`ZK_KIND=apache`, the default here) or zoolog
//! (`ZK_KIND=zoolog`, with `ZOOLOG_BIN` naming the binary).

#![allow(dead_code)] // each test file uses its own part of the harness

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use zoolog_client::{Client, ClientOptions, SessionState};

pub struct ZkServer {
    dir: tempfile::TempDir,
    pub port: u16,
}

impl ZkServer {
    /// Starts a fresh server with TTL and container nodes enabled.
    pub fn start() -> ZkServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let output = script(&[
            "start",
            path_str(&dir),
            "-Dzookeeper.extendedTypesEnabled=true",
        ]);
        let port = output
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("zk-server printed {output:?}"));
        ZkServer { dir, port }
    }

    pub fn hosts(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// SIGTERM and wait: the data directory stays for `restart`.
    pub fn stop(&self) {
        script(&["stop", path_str(&self.dir)]);
    }

    /// Starts again on the same port with the same data.
    pub fn restart(&self) {
        script(&["restart", path_str(&self.dir)]);
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        script(&["stop", path_str(&self.dir)]);
    }
}

fn path_str(dir: &tempfile::TempDir) -> &str {
    dir.path().to_str().expect("utf-8 temp path")
}

fn script(args: &[&str]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/zk-server");
    let kind = std::env::var("ZK_KIND").unwrap_or_else(|_| "apache".to_owned());
    let output = Command::new(&script)
        .args(args)
        .env("ZK_KIND", kind)
        .output()
        .expect("run tests/zk-server");
    assert!(
        output.status.success(),
        "tests/zk-server {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

pub async fn connect(hosts: &str) -> Client {
    connect_with(hosts, ClientOptions::default()).await
}

pub async fn connect_with(hosts: &str, options: ClientOptions) -> Client {
    Client::connect(hosts, options).await.expect("connect")
}

/// Waits (boundedly) for the next session state `wanted` accepts.
pub async fn wait_for_state(
    client: &Client,
    wanted: impl Fn(SessionState) -> bool,
    within: Duration,
) -> SessionState {
    tokio::time::timeout(within, client.wait_for_state(wanted))
        .await
        .expect("session state reached in time")
}

/// Bounds a future so a broken test fails instead of hanging.
pub async fn within<T>(duration: Duration, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(duration, future)
        .await
        .expect("finished in time")
}
