//! The servers `--compare` starts: Apache ZooKeeper (Debian's package) and this zoolog binary,
//! each on a free port of 127.0.0.1 with its data in a fresh temp dir, stopped (SIGKILL, their
//! data is thrown away) when the handle is dropped.

use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
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
        self.command_for(
            data_dir,
            config,
            "org.apache.zookeeper.server.ZooKeeperServerMain",
        )
    }

    /// The command line of one server: `zoolog serve --config FILE` (the running executable),
    /// or Apache's `main_class` (ZooKeeperServerMain standalone, QuorumPeerMain in an ensemble)
    /// with JVM defaults.
    fn command_for(
        self,
        data_dir: &Path,
        config: &Path,
        main_class: &str,
    ) -> Result<Command, String> {
        match self {
            ServerKind::Zoolog => {
                let exe = zoolog_executable()?;
                let mut command = Command::new(exe);
                command.arg("serve").arg("--config").arg(config);
                Ok(command)
            }
            ServerKind::Apache => {
                let classpath = apache_classpath();
                check_jars_exist(&classpath)?;
                let mut command = Command::new("java");
                command
                    .arg("-cp")
                    .arg(&classpath)
                    .arg(format!("-Dzookeeper.log.dir={}", data_dir.display()))
                    .arg("-Dzookeeper.root.logger=INFO,CONSOLE")
                    .arg("-Dzookeeper.admin.enableServer=false")
                    .arg(main_class)
                    .arg(config);
                Ok(command)
            }
        }
    }
}

/// The zoolog binary the servers run: the running executable (the `zoolog` binary itself, whose
/// `serve` subcommand starts a server).
fn zoolog_executable() -> Result<std::path::PathBuf, String> {
    std::env::current_exe().map_err(|error| format!("cannot find the zoolog binary: {error}"))
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

/// Refuses a class path whose jars are missing, before any JVM starts: otherwise each server
/// exits with Java's `ClassNotFoundException`, and the benchmark first waits out its start
/// timeout for servers that never come up.
fn check_jars_exist(classpath: &str) -> Result<(), String> {
    let missing: Vec<&str> = classpath
        .split(':')
        .filter(|entry| entry.ends_with(".jar") && !Path::new(entry).exists())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "Apache ZooKeeper is not installed: {} missing from its class path {classpath} \
         (install Debian's `zookeeper` package, or set APACHE_ZK_CLASSPATH, e.g. to the output \
         of tests/java/apache-3.9-classpath.sh)",
        missing.join(", ")
    ))
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

/// The timing settings of every ensemble member, the same for zoolog and Apache (those of
/// tests/ensemble/ensemble.py): a 500 ms tick, initLimit 10 and syncLimit 5 ticks.
pub const ENSEMBLE_SETTINGS: [(&str, &str); 7] = [
    ("tickTime", "500"),
    ("initLimit", "10"),
    ("syncLimit", "5"),
    ("4lw.commands.whitelist", "*"),
    ("maxClientCnxns", "0"),
    ("admin.enableServer", "false"),
    ("clientPortAddress", "127.0.0.1"),
];
/// How long a whole ensemble may take to elect its first leader (three JVMs on two cores).
pub const QUORUM_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a stopped member gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// The layout file in an ensemble's directory, in tests/ensemble/ensemble.py's format.
const LAYOUT_FILE: &str = "ensemble.json";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Participant,
    Observer,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Participant => "participant",
            Role::Observer => "observer",
        }
    }

    /// The `srvr` modes of a member of this role that serves.
    fn serves_as(self, mode: &str) -> bool {
        match self {
            Role::Participant => mode == "leader" || mode == "follower",
            Role::Observer => mode == "observer",
        }
    }
}

/// One server of an [`Ensemble`]: its id (myid), role, ports and directory `s<ID>` holding
/// `zoo.cfg`, `data/` (with `myid`), `server.log` and `pid`.
pub struct Member {
    pub id: u32,
    pub role: Role,
    pub client_port: u16,
    pub quorum_port: u16,
    pub election_port: u16,
    pub dir: PathBuf,
    child: Mutex<Option<Child>>,
}

impl Member {
    pub fn hosts(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    fn config(&self) -> PathBuf {
        self.dir.join("zoo.cfg")
    }
}

/// The most of one member's log [`Ensemble::keep_logs`] keeps: its end.
const KEPT_LOG_BYTES: u64 = 4 << 20;

/// A replicated ensemble of real server processes on 127.0.0.1: `participants` voting members
/// (ids 1..=participants) and `observers` (the ids after them), each with free client, quorum
/// and election ports. Every process is killed when the handle is dropped.
pub struct Ensemble {
    kind: ServerKind,
    dir: PathBuf,
    _temp: Option<TempDir>,
    members: Vec<Member>,
}

impl Ensemble {
    /// Writes every member's zoo.cfg and myid under `dir` (a fresh temp dir when `None`), and
    /// `ensemble.json`; starts nothing. The data of an earlier ensemble of the same size in
    /// `dir` is kept (its configs get new ports); one of another size is refused.
    pub fn create(
        kind: ServerKind,
        participants: usize,
        observers: usize,
        dir: Option<&Path>,
    ) -> Result<Ensemble, String> {
        if participants == 0 {
            return Err("an ensemble needs at least one participant".into());
        }
        let (dir, temp) = match dir {
            Some(dir) => {
                fs::create_dir_all(dir)
                    .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
                let dir = dir
                    .canonicalize()
                    .map_err(|error| format!("{}: {error}", dir.display()))?;
                (dir, None)
            }
            None => {
                let temp = tempfile::Builder::new()
                    .prefix(&format!("zoolog-ensemble-{}-", kind.label()))
                    .tempdir()
                    .map_err(|error| format!("cannot make a temp dir: {error}"))?;
                (temp.path().to_path_buf(), Some(temp))
            }
        };
        check_earlier_layout(&dir, kind, participants, observers)?;
        let count = participants + observers;
        let ports = free_ports(3 * count)?;
        let members: Vec<Member> = (0..count)
            .map(|index| {
                let id = index as u32 + 1;
                Member {
                    id,
                    role: if index < participants {
                        Role::Participant
                    } else {
                        Role::Observer
                    },
                    client_port: ports[3 * index],
                    quorum_port: ports[3 * index + 1],
                    election_port: ports[3 * index + 2],
                    dir: dir.join(format!("s{id}")),
                    child: Mutex::new(None),
                }
            })
            .collect();
        let ensemble = Ensemble {
            kind,
            dir,
            _temp: temp,
            members,
        };
        ensemble.write_layout()?;
        Ok(ensemble)
    }

    /// The machine's CPUs shared among the members, at least one each: members that share a
    /// machine run best on as few threads as that (see `zoolog.serverThreads`).
    fn server_threads(&self) -> usize {
        let cpus = std::thread::available_parallelism().map_or(1, |cpus| cpus.get());
        (cpus / self.members.len()).max(1)
    }

    fn write_layout(&self) -> Result<(), String> {
        let write = |path: &Path, text: String| {
            fs::write(path, text)
                .map_err(|error| format!("cannot write {}: {error}", path.display()))
        };
        let server_lines: Vec<String> = self
            .members
            .iter()
            .map(|member| {
                format!(
                    "server.{}=127.0.0.1:{}:{}:{}",
                    member.id,
                    member.quorum_port,
                    member.election_port,
                    member.role.name()
                )
            })
            .collect();
        for member in &self.members {
            let data = member.dir.join("data");
            fs::create_dir_all(&data)
                .map_err(|error| format!("cannot create {}: {error}", data.display()))?;
            write(&data.join("myid"), format!("{}\n", member.id))?;
            let mut config = String::new();
            for (key, value) in ENSEMBLE_SETTINGS {
                config.push_str(&format!("{key}={value}\n"));
            }
            config.push_str(&format!(
                "dataDir={}\nclientPort={}\n",
                data.display(),
                member.client_port
            ));
            if self.kind == ServerKind::Apache && member.role == Role::Observer {
                config.push_str("peerType=observer\n");
            }
            if self.kind == ServerKind::Zoolog {
                config.push_str(&format!("zoolog.serverThreads={}\n", self.server_threads()));
            }
            for line in &server_lines {
                config.push_str(line);
                config.push('\n');
            }
            write(&member.config(), config)?;
        }
        let servers: Vec<String> = self
            .members
            .iter()
            .map(|member| {
                format!(
                    "  \"{}\": {{\"role\": \"{}\", \"client_port\": {}, \"quorum_port\": {}, \
                     \"election_port\": {}, \"dir\": \"{}\"}}",
                    member.id,
                    member.role.name(),
                    member.client_port,
                    member.quorum_port,
                    member.election_port,
                    member.dir.display()
                )
            })
            .collect();
        let settings: Vec<String> = ENSEMBLE_SETTINGS
            .iter()
            .map(|(key, value)| format!("\"{key}\": \"{value}\""))
            .collect();
        write(
            &self.dir.join(LAYOUT_FILE),
            format!(
                "{{\"kind\": \"{}\", \"proxy\": false, \"links\": [], \"settings\": {{{}}},\n\
                 \"servers\": {{\n{}\n}}}}\n",
                self.kind.label(),
                settings.join(", "),
                servers.join(",\n")
            ),
        )
    }

    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }

    fn member(&self, id: u32) -> Result<&Member, String> {
        self.members
            .iter()
            .find(|member| member.id == id)
            .ok_or_else(|| format!("no server {id}"))
    }

    /// Every member's client address, for a client that may use any of them.
    pub fn connect_string(&self) -> String {
        let hosts: Vec<String> = self.members.iter().map(Member::hosts).collect();
        hosts.join(",")
    }

    /// What a reader of the results needs to know about the members.
    pub fn settings(&self) -> String {
        let participants = self
            .members
            .iter()
            .filter(|member| member.role == Role::Participant)
            .count();
        let timing: Vec<String> = ENSEMBLE_SETTINGS[..3]
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        let server = match self.kind {
            ServerKind::Zoolog => format!(
                "zoolog {} (`zoolog serve`, Zab), WAL fsynced before every ack (always on)",
                env!("CARGO_PKG_VERSION")
            ),
            ServerKind::Apache => format!(
                "Apache ZooKeeper QuorumPeerMain (classpath {}), forceSync=yes (default), JVM \
                 defaults ({})",
                apache_classpath(),
                java_version()
            ),
        };
        format!(
            "{participants} participants + {} observers on 127.0.0.1, {}; {server}; data in {}",
            self.members.len() - participants,
            timing.join(", "),
            self.dir.display()
        )
    }

    /// Starts member `id` (again), with its config and data; does not wait for it.
    pub fn start(&self, id: u32) -> Result<(), String> {
        let member = self.member(id)?;
        let mut slot = member
            .child
            .lock()
            .expect("no panics while holding a child");
        if let Some(child) = slot.as_mut() {
            if matches!(child.try_wait(), Ok(None)) {
                return Err(format!("server {id} runs already"));
            }
        }
        let log_path = member.dir.join("server.log");
        let mut log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|error| format!("cannot open {}: {error}", log_path.display()))?;
        let _ = std::io::Write::write_all(&mut log, b"\n==== start ====\n");
        let main_class = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
        let mut command = self
            .kind
            .command_for(&member.dir, &member.config(), main_class)?;
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|error| error.to_string())?)
            .stderr(log)
            .process_group(0);
        // SAFETY: prctl is async-signal-safe; it only asks for SIGKILL when the spawning
        // thread ends, so that no server outlives a crashed or killed parent.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|error| format!("cannot start server {id}: {error}"))?;
        let _ = fs::write(member.dir.join("pid"), child.id().to_string());
        *slot = Some(child);
        Ok(())
    }

    pub fn is_running(&self, id: u32) -> bool {
        self.member(id).is_ok_and(|member| {
            let mut slot = member
                .child
                .lock()
                .expect("no panics while holding a child");
            slot.as_mut()
                .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
        })
    }

    /// Starts every member that does not run and waits until they serve under one leader;
    /// returns the leader's id.
    pub async fn up(&self) -> Result<u32, String> {
        for member in &self.members {
            if !self.is_running(member.id) {
                self.start(member.id)?;
            }
        }
        self.wait_quorum(QUORUM_TIMEOUT).await
    }

    /// Each member's `srvr` mode (leader, follower, observer, standalone…), `None` for one that
    /// does not run or does not serve.
    pub async fn modes(&self) -> Vec<(u32, Option<String>)> {
        let mut modes = Vec::with_capacity(self.members.len());
        for member in &self.members {
            let mode = if self.is_running(member.id) {
                srvr_mode(member.client_port).await
            } else {
                None
            };
            modes.push((member.id, mode));
        }
        modes
    }

    /// Waits until exactly one member says `Mode: leader` and every running member serves in
    /// its role; returns the leader's id. Fails early when a member exits.
    pub async fn wait_quorum(&self, timeout: Duration) -> Result<u32, String> {
        let deadline = Instant::now() + timeout;
        let mut last = Vec::new();
        while Instant::now() < deadline {
            last = self.modes().await;
            let leaders: Vec<u32> = last
                .iter()
                .filter(|(_, mode)| mode.as_deref() == Some("leader"))
                .map(|(id, _)| *id)
                .collect();
            let all_serve = self.members.iter().zip(&last).all(|(member, (_, mode))| {
                !self.is_running(member.id)
                    || mode
                        .as_deref()
                        .is_some_and(|mode| member.role.serves_as(mode))
            });
            if leaders.len() == 1 && all_serve {
                return Ok(leaders[0]);
            }
            if let Some((id, _)) = last
                .iter()
                .find(|(_, mode)| mode.as_deref() == Some("standalone"))
            {
                return Err(format!(
                    "server {id} runs standalone with an ensemble zoo.cfg"
                ));
            }
            tokio::time::sleep(READY_POLL_PERIOD).await;
        }
        let tails: Vec<String> = self
            .members
            .iter()
            .map(|member| {
                format!(
                    "--- server {} ---\n{}",
                    member.id,
                    self.log_tail(member.id, 10)
                )
            })
            .collect();
        Err(format!(
            "no leader with every server serving within {timeout:?}; modes {last:?}\n{}",
            tails.join("\n")
        ))
    }

    /// SIGKILL (a crash); returns once the process is gone.
    pub fn kill(&self, id: u32) -> Result<(), String> {
        let member = self.member(id)?;
        let mut slot = member
            .child
            .lock()
            .expect("no panics while holding a child");
        if let Some(mut child) = slot.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        Ok(())
    }

    /// SIGTERM to every member at once, SIGKILL to those still running after a grace period.
    pub fn stop_all(&self) {
        let mut children: Vec<Child> = self
            .members
            .iter()
            .filter_map(|member| member.child.lock().expect("no panics").take())
            .collect();
        for child in &children {
            if let Ok(pid) = i32::try_from(child.id()) {
                // SAFETY: kill(2) with a pid we spawned and have not reaped yet.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
        let deadline = std::time::Instant::now() + STOP_GRACE;
        for child in &mut children {
            while matches!(child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Copies the end of every member's `server.log` (at most `KEPT_LOG_BYTES`) into `dir`
    /// as `<prefix>-server.<id>.log`, so that a run's results keep what the servers said
    /// after their temp dirs are gone.
    pub fn keep_logs(&self, dir: &Path, prefix: &str) -> std::io::Result<()> {
        fs::create_dir_all(dir)?;
        for member in &self.members {
            let mut log = match File::open(member.dir.join("server.log")) {
                Ok(log) => log,
                // Never started.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            let length = log.metadata()?.len();
            log.seek(SeekFrom::Start(length.saturating_sub(KEPT_LOG_BYTES)))?;
            let mut kept = File::create(dir.join(format!("{prefix}-server.{}.log", member.id)))?;
            std::io::copy(&mut log.take(KEPT_LOG_BYTES), &mut kept)?;
        }
        Ok(())
    }

    pub fn log_tail(&self, id: u32, lines: usize) -> String {
        let Ok(member) = self.member(id) else {
            return String::new();
        };
        let log = fs::read_to_string(member.dir.join("server.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(lines).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        for member in &self.members {
            let _ = self.kill(member.id);
        }
    }
}

/// Refuses a directory that holds an ensemble of another kind or size.
fn check_earlier_layout(
    dir: &Path,
    kind: ServerKind,
    participants: usize,
    observers: usize,
) -> Result<(), String> {
    let Ok(layout) = fs::read_to_string(dir.join(LAYOUT_FILE)) else {
        return Ok(());
    };
    let servers = layout.matches("\"role\"").count();
    let earlier_observers = layout.matches("\"observer\"").count();
    let same_kind = layout.contains(&format!("\"kind\": \"{}\"", kind.label()));
    if !same_kind || servers != participants + observers || earlier_observers != observers {
        return Err(format!(
            "{} holds another ensemble ({servers} servers, {earlier_observers} observers); \
             remove it or choose another directory",
            dir.display()
        ));
    }
    Ok(())
}

/// `count` distinct free ports, all held open together so none is handed out twice.
fn free_ports(count: usize) -> Result<Vec<u16>, String> {
    let listeners = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("no free port: {error}"))?;
    listeners
        .iter()
        .map(|listener| listener.local_addr().map(|address| address.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("no free port: {error}"))
}

/// The `Mode:` line of a server's `srvr` answer, `None` when it does not answer or serve.
pub async fn srvr_mode(port: u16) -> Option<String> {
    let answer = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        stream.write_all(b"srvr").await?;
        stream.shutdown().await?;
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).await?;
        Ok::<_, std::io::Error>(reply)
    };
    let reply = tokio::time::timeout(Duration::from_secs(1), answer)
        .await
        .ok()?
        .ok()?;
    String::from_utf8_lossy(&reply)
        .lines()
        .find_map(|line| line.strip_prefix("Mode:"))
        .map(|mode| mode.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::{check_jars_exist, Ensemble, ServerKind, KEPT_LOG_BYTES};

    #[test]
    fn kept_logs_are_each_members_end_and_skip_members_never_started() {
        let dir = tempfile::tempdir().expect("temp dir");
        let ensemble =
            Ensemble::create(ServerKind::Zoolog, 3, 0, Some(dir.path())).expect("configs");
        let members = ensemble.members();
        std::fs::write(members[0].dir.join("server.log"), b"short log\n").expect("write");
        let mut long = vec![b'x'; KEPT_LOG_BYTES as usize];
        long.extend_from_slice(b"the end\n");
        std::fs::write(members[1].dir.join("server.log"), &long).expect("write");
        let kept_dir = dir.path().join("kept");
        ensemble
            .keep_logs(&kept_dir, "zoolog-round1")
            .expect("kept");
        let kept = |id: u32| std::fs::read(kept_dir.join(format!("zoolog-round1-server.{id}.log")));
        assert_eq!(kept(1).expect("member 1"), b"short log\n");
        let long_kept = kept(2).expect("member 2");
        assert_eq!(long_kept.len() as u64, KEPT_LOG_BYTES);
        assert!(long_kept.ends_with(b"the end\n"));
        assert!(kept(3).is_err(), "member 3 never started");
    }

    #[test]
    fn a_class_path_with_a_missing_jar_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        let present = dir.path().join("zookeeper.jar");
        std::fs::write(&present, b"").expect("write jar");
        let present = present.display().to_string();
        let conf = dir.path().display().to_string();
        assert_eq!(check_jars_exist(&format!("{conf}:{present}")), Ok(()));
        let missing = dir.path().join("gone.jar").display().to_string();
        let error = check_jars_exist(&format!("{conf}:{present}:{missing}"))
            .expect_err("a missing jar is refused");
        assert!(error.contains(&missing), "{error}");
        assert!(!error.contains(&format!("{present},")), "{error}");
    }
}
