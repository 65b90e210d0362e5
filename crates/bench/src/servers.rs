//! The servers `--compare` starts: Apache ZooKeeper (Debian's package) and this zoolog binary,
//! each on a free port of 127.0.0.1 with its data in a fresh temp dir, stopped (SIGKILL, their
//! data is thrown away) when the handle is dropped.

use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The classpath of Debian's `zookeeper` package; APACHE_ZK_CLASSPATH overrides it, as it does
/// for tests/zk-server.
const APACHE_CLASSPATH_DEFAULT: &str = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar";
/// A JVM takes a few seconds to start on a loaded 2-core machine.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const READY_POLL_PERIOD: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerKind {
    Zoolog,
    Apache,
}

impl ServerKind {
    pub fn label(self) -> &'static str {
        match self {
            ServerKind::Zoolog => "zoolog",
            ServerKind::Apache => "apache",
        }
    }

    /// What a reader of the results needs to know to judge the comparison.
    pub fn settings(self) -> String {
        match self {
            ServerKind::Zoolog => format!(
                "zoolog {} standalone (`zoolog serve`), single-node WAL, fsync on every group \
                 commit (always on), snapCount 100000, globalOutstandingLimit 1000 per connection",
                env!("CARGO_PKG_VERSION")
            ),
            ServerKind::Apache => format!(
                "Apache ZooKeeper standalone (ZooKeeperServerMain, classpath {}), forceSync=yes \
                 (default: fsync of the txn log before each ack batch), snapCount 100000, \
                 globalOutstandingLimit 1000, JVM defaults ({})",
                apache_classpath(),
                java_version()
            ),
        }
    }

    /// Starts the server and waits until it answers `ruok`.
    pub async fn launch(self) -> Result<LaunchedServer, String> {
        let data_dir = tempfile::Builder::new()
            .prefix(&format!("zoolog-bench-{}-", self.label()))
            .tempdir()
            .map_err(|error| format!("cannot make a temp dir: {error}"))?;
        let port = free_port()?;
        let config = data_dir.path().join("zoo.cfg");
        fs::write(&config, zoo_cfg(data_dir.path(), port))
            .map_err(|error| format!("cannot write {}: {error}", config.display()))?;
        let log_path = data_dir.path().join("server.log");
        let log =
            File::create(&log_path).map_err(|error| format!("cannot create the log: {error}"))?;
        let mut command = self.command(data_dir.path(), &config)?;
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|error| error.to_string())?)
            .stderr(log)
            // Its own process group: Ctrl-C reaches the benchmark only, which then stops the
            // server itself after writing its results.
            .process_group(0)
            .spawn()
            .map_err(|error| format!("cannot start {}: {error}", self.label()))?;
        let mut server = LaunchedServer {
            child,
            hosts: format!("127.0.0.1:{port}"),
            data_dir,
        };
        server.wait_ready(port).await.map_err(|error| {
            let log = fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            format!(
                "{} did not start: {error}\n{}",
                self.label(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        })?;
        Ok(server)
    }

    fn command(self, data_dir: &Path, config: &Path) -> Result<Command, String> {
        match self {
            ServerKind::Zoolog => {
                let exe = std::env::current_exe()
                    .map_err(|error| format!("cannot find the zoolog binary: {error}"))?;
                let mut command = Command::new(exe);
                command.arg("serve").arg("--config").arg(config);
                Ok(command)
            }
            ServerKind::Apache => {
                let mut command = Command::new("java");
                command
                    .arg("-cp")
                    .arg(apache_classpath())
                    .arg(format!("-Dzookeeper.log.dir={}", data_dir.display()))
                    .arg("-Dzookeeper.root.logger=INFO,CONSOLE")
                    .arg("-Dzookeeper.admin.enableServer=false")
                    .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
                    .arg(config);
                Ok(command)
            }
        }
    }
}

/// The same zoo.cfg for both servers: only what differs from the defaults for a local run.
fn zoo_cfg(data_dir: &Path, port: u16) -> String {
    format!(
        "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
         maxClientCnxns=0\n4lw.commands.whitelist=*\nadmin.enableServer=false\n",
        data_dir.join("data").display()
    )
}

fn apache_classpath() -> String {
    std::env::var("APACHE_ZK_CLASSPATH").unwrap_or_else(|_| APACHE_CLASSPATH_DEFAULT.to_string())
}

/// `java -version`'s first line, e.g. `openjdk version "17.0.13" 2024-10-15`.
fn java_version() -> String {
    Command::new("java")
        .arg("-version")
        .output()
        .ok()
        .and_then(|output| {
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_else(|| "java not found".into())
}

/// A port nobody listens on right now. The server binds it a moment later: another process
/// could take it in between, which only makes the start fail, never the measurement wrong.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|error| format!("no free port: {error}"))
}

pub struct LaunchedServer {
    child: Child,
    pub hosts: String,
    data_dir: TempDir,
}

impl LaunchedServer {
    async fn wait_ready(&mut self, port: u16) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited with {status}"));
            }
            if ruok(port).await {
                return Ok(());
            }
            tokio::time::sleep(READY_POLL_PERIOD).await;
        }
        Err(format!("no answer to ruok within {READY_TIMEOUT:?}"))
    }

    pub fn data_dir(&self) -> &Path {
        self.data_dir.path()
    }
}

impl Drop for LaunchedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn ruok(port: u16) -> bool {
    let answer = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        stream.write_all(b"ruok").await?;
        let mut reply = [0u8; 4];
        stream.read_exact(&mut reply).await?;
        Ok::<_, std::io::Error>(reply)
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), answer).await,
        Ok(Ok(reply)) if &reply == b"imok"
    )
}
