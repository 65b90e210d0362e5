//! A real server for the tests, started through the repository's `tests/zk-server` script so the
//! same tests drive zoolog (`ZK_KIND=zoolog`, the scripts' default, with `ZOOLOG_BIN` naming
//! the binary, else `target/release/zoolog`) or Apache ZooKeeper (`ZK_KIND=apache`).

#![allow(dead_code)] // each test file uses its own part of the harness

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use zoolog_client::{Client, ClientOptions, SessionState};

pub struct ZkServer {
    dir: tempfile::TempDir,
    pub port: u16,
}

impl ZkServer {
    /// Starts a fresh server with TTL and container nodes enabled.
    pub fn start() -> ZkServer {
        Self::start_with(&[])
    }

    /// As `start`, with `settings` (zoo.cfg `key=value` lines or `-Dname=value` properties)
    /// besides.
    pub fn start_with(settings: &[&str]) -> ZkServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut args = vec![
            "start",
            path_str(&dir),
            "-Dzookeeper.extendedTypesEnabled=true",
        ];
        args.extend_from_slice(settings);
        let output = script(&args);
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
    run_script("tests/zk-server", args)
}

/// Runs a script of the repository's `tests/`; it reads the server kind from `ZK_KIND`.
fn run_script(script: &str, args: &[&str]) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(script);
    let output = Command::new(&path)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("run {script}: {error}"));
    assert!(
        output.status.success(),
        "{script} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// A 3-server ensemble of real processes, started through `tests/ensemble/zk-ensemble` with
/// every server-to-server link through its fault proxy (so members can be isolated).
pub struct Ensemble {
    dir: tempfile::TempDir,
    /// `host:port` of each member's client port; member `id` is at `id - 1`.
    members: Vec<String>,
}

impl Ensemble {
    pub const SIZE: usize = 3;

    /// Starts the ensemble and waits for a quorum; `settings` are zoo.cfg `key=value` lines or
    /// `-Dname=value` properties, given to every member.
    pub fn start(settings: &[&str]) -> Ensemble {
        let dir = tempfile::tempdir().expect("temp dir");
        let size = Self::SIZE.to_string();
        let mut args = vec!["up", path_str(&dir), &size, "--proxy"];
        args.extend_from_slice(settings);
        let output = ensemble_script(&args);
        // `up` prints {"connect": "h1:p1,h2:p2,h3:p3", ...}, members in id order.
        let connect = output
            .split("\"connect\": \"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("zk-ensemble up printed {output:?}"));
        let members: Vec<String> = connect.split(',').map(str::to_owned).collect();
        assert_eq!(members.len(), Self::SIZE, "{connect}");
        Ensemble { dir, members }
    }

    /// Every member, for a client that may use any.
    pub fn hosts(&self) -> String {
        self.members.join(",")
    }

    pub fn member_hosts(&self, id: usize) -> &str {
        &self.members[id - 1]
    }

    pub fn member_port(&self, id: usize) -> u16 {
        let (_, port) = self.member_hosts(id).rsplit_once(':').expect("host:port");
        port.parse().expect("port")
    }

    /// The member the others agree leads.
    pub fn leader(&self) -> usize {
        let id = ensemble_script(&["leader", path_str(&self.dir)]);
        id.trim().parse().expect("leader id")
    }

    /// Cuts every link between member `id` and the others.
    pub fn isolate(&self, id: usize) {
        ensemble_script(&["isolate", path_str(&self.dir), &id.to_string()]);
    }

    /// SIGKILL, returning once the process is gone.
    pub fn kill(&self, id: usize) {
        ensemble_script(&["kill", path_str(&self.dir), &id.to_string()]);
    }

    /// Starts member `id` again with its data, returning once it answers `ruok`.
    pub fn start_member(&self, id: usize) {
        ensemble_script(&["start", path_str(&self.dir), &id.to_string()]);
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        ensemble_script(&["stop", path_str(&self.dir)]);
    }
}

fn ensemble_script(args: &[&str]) -> String {
    run_script("tests/ensemble/zk-ensemble", args)
}

/// The answer of the server at `hosts` to a four-letter word ("" if it does not answer).
pub fn four_letter(hosts: &str, word: &str) -> String {
    use std::io::{Read, Write};
    let exchange = || -> std::io::Result<String> {
        let mut stream = std::net::TcpStream::connect(hosts)?;
        stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        stream.write_all(word.as_bytes())?;
        stream.shutdown(std::net::Shutdown::Write)?;
        let mut answer = String::new();
        stream.take(64 * 1024).read_to_string(&mut answer)?;
        Ok(answer)
    };
    exchange().unwrap_or_default()
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

/// A local TCP listener between clients and a server that can cut the network: `cut` drops
/// every connection it carries and refuses new ones until `heal`. Each accepted connection
/// is carried by `carry` (a plain copy in both directions, or something that reads the
/// frames as they pass).
pub struct CuttableListener {
    port: u16,
    cut: Arc<AtomicBool>,
    connections: Arc<tokio::sync::Mutex<JoinSet<()>>>,
}

impl CuttableListener {
    pub async fn start<Carry, Carried>(carry: Carry) -> CuttableListener
    where
        Carry: Fn(TcpStream) -> Carried + Send + 'static,
        Carried: std::future::Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let connections = Arc::new(tokio::sync::Mutex::new(JoinSet::new()));
        let (accept_cut, accept_connections) = (cut.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if accept_cut.load(Ordering::SeqCst) {
                    continue; // dropping the socket refuses the connection
                }
                accept_connections.lock().await.spawn(carry(client));
            }
        });
        CuttableListener {
            port,
            cut,
            connections,
        }
    }

    pub fn hosts(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub async fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.connections.lock().await.abort_all();
    }

    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// Carries one client connection to the server on `server_port`, unchanged.
pub async fn copy_to_server(mut client: TcpStream, server_port: u16) {
    if let Ok(mut server) = TcpStream::connect(("127.0.0.1", server_port)).await {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
    }
}
