//! `zoolog ensemble up`: real processes. Starts a 3-server ensemble with an observer, checks
//! the roles through `srvr` and that a write through one server is read through another, then
//! stops it with SIGTERM and checks that every server process is gone.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ZOOLOG: &str = env!("CARGO_BIN_EXE_zoolog");

fn four_letter(port: u16, word: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.write_all(word.as_bytes());
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

fn mode(port: u16) -> Option<String> {
    four_letter(port, "srvr")
        .lines()
        .find_map(|line| line.strip_prefix("Mode:"))
        .map(|mode| mode.trim().to_string())
}

fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(str::to_string))
        })
        .is_some_and(|state| state != "Z" && state != "X")
}

fn shell(server: &str, command: &str) -> String {
    let output = Command::new(ZOOLOG)
        .args(["shell", "-server", server, "-c", command])
        .output()
        .expect("zoolog shell runs");
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

#[test]
fn ensemble_up_starts_a_serving_ensemble_and_stops_it_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ensemble_dir = dir.path().join("ens");
    let mut child = Command::new(ZOOLOG)
        .args(["ensemble", "up", "3", "--observers", "1", "--dir"])
        .arg(&ensemble_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("zoolog ensemble up starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout"));
    let mut printed = String::new();
    let connect = loop {
        let mut line = String::new();
        if lines.read_line(&mut line).expect("stdout readable") == 0 {
            let _ = child.kill();
            panic!("zoolog ensemble up ended before a connect string; it printed:\n{printed}");
        }
        printed.push_str(&line);
        if let Some(connect) = line.strip_prefix("connect string: ") {
            break connect.trim().to_string();
        }
    };
    let ports: Vec<u16> = connect
        .split(',')
        .map(|host| host.rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ports.len(), 4, "{printed}");
    let modes: Vec<Option<String>> = ports.iter().map(|&port| mode(port)).collect();
    let count = |wanted: &str| {
        modes
            .iter()
            .filter(|m| m.as_deref() == Some(wanted))
            .count()
    };
    assert_eq!(
        (count("leader"), count("follower"), modes[3].as_deref()),
        (1, 2, Some("observer")),
        "modes {modes:?}\n{printed}"
    );
    // A write through server 1 is read back through the observer.
    let first = format!("127.0.0.1:{}", ports[0]);
    let observer = format!("127.0.0.1:{}", ports[3]);
    shell(&first, "create /up-test hello");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let read = shell(&observer, "get /up-test");
        if read.contains("hello") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "observer never read the write: {read}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let server_pids: Vec<u32> = (1..=4)
        .map(|id| {
            let pid_file = ensemble_dir.join(format!("s{id}")).join("pid");
            std::fs::read_to_string(&pid_file)
                .expect("pid file")
                .trim()
                .parse()
                .expect("a pid")
        })
        .collect();
    assert!(server_pids.iter().all(|&pid| pid_alive(pid)));
    assert!(Path::new(&ensemble_dir.join("s2/data/myid")).exists());

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(exit) = child.try_wait().expect("wait") {
            break exit;
        }
        assert!(Instant::now() < deadline, "zoolog ensemble up did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "exit status {exit}");
    for pid in server_pids {
        assert!(!pid_alive(pid), "server pid {pid} still runs");
    }
}
