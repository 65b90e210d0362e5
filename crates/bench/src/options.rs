//! The command line of `zoolog bench`.

use std::path::PathBuf;
use std::time::Duration;

use crate::stats::Workload;

pub const USAGE: &str = "usage: zoolog bench [options]

  --servers H:P,...       ZooKeeper-compatible servers to measure (default 127.0.0.1:2181)
  --compare               start Apache ZooKeeper and zoolog in temp dirs instead, measure both
                          one after the other, print the ratios zoolog/Apache
  --ensemble N            start N-server ensembles instead of standalone servers (zoolog, and
                          Apache's QuorumPeerMain too with --compare), one after the other;
                          sessions are spread over the servers round-robin. Defaults then:
                          --workload throughput,creates,leader-kill --read-ratios 0,0.7,1
  --leader-kills N        leader-kill: trials, each kill -9 of the leader (default 5)
  --rounds N              measure everything N times, on fresh servers each round, the compared
                          servers alternating (zoolog, Apache, zoolog, ...), so that a machine
                          whose speed drifts during the run weighs on both alike; the tables and
                          ratios give each point's median over the rounds (default 1)
  --workload NAME|all     throughput, creates, barrier, recipes, leader-kill (ensembles only)
                          or all (every one but leader-kill; default)
  --duration-s N          measured seconds per point (default 10)
  --warmup-s N            unmeasured seconds before each point (default 2)
  --sessions N            throughput: client sessions (default 20)
  --outstanding N         throughput: requests each session keeps outstanding (default 50)
  --value-bytes N         size of the values written and read (default 1024)
  --read-ratios R,...     throughput: read shares to measure (default 0,0.3,0.7,0.9,1)
  --create-workers N,...  creates: synchronous workers (default 1,10,20)
  --barrier-clients N,... barrier: clients per barrier (default 10,50)
  --recipe-clients N      recipes: clients contending in barrier and lock (default 2)
  --out DIR               results folder (default ./bench-results/<UTC timestamp>)
  --client-threads N      threads of the benchmark client (default 1: on a machine shared with
                          the servers, a one-thread client takes the least from them)

Ctrl-C stops the run and still writes what was measured.";

#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub servers: String,
    pub compare: bool,
    pub workloads: Vec<Workload>,
    pub duration: Duration,
    pub warmup: Duration,
    pub sessions: usize,
    pub outstanding: usize,
    pub value_bytes: usize,
    pub read_ratios: Vec<f64>,
    pub create_workers: Vec<usize>,
    pub barrier_clients: Vec<usize>,
    pub recipe_clients: usize,
    pub out: Option<PathBuf>,
    /// Servers per ensemble; `None` for standalone servers.
    pub ensemble: Option<usize>,
    pub leader_kills: usize,
    pub rounds: usize,
    pub client_threads: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            servers: "127.0.0.1:2181".into(),
            compare: false,
            workloads: Workload::ALL.to_vec(),
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(2),
            sessions: 20,
            outstanding: 50,
            value_bytes: 1024,
            read_ratios: vec![0.0, 0.3, 0.7, 0.9, 1.0],
            create_workers: vec![1, 10, 20],
            barrier_clients: vec![10, 50],
            recipe_clients: 2,
            out: None,
            ensemble: None,
            leader_kills: 5,
            rounds: 1,
            client_threads: 1,
        }
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Command {
    Bench(Box<Options>),
    Help,
}

/// Bounds that keep a mistyped argument from asking for something absurd.
const SESSIONS_MAX: usize = 1000;
const OUTSTANDING_MAX: usize = 10_000;
const VALUE_BYTES_MAX: usize = 1 << 20;
const DURATION_S_MAX: f64 = 3600.0;
const ENSEMBLE_SERVERS_MAX: usize = 9;
const LEADER_KILLS_MAX: usize = 100;
const ROUNDS_MAX: usize = 20;
const CLIENT_THREADS_MAX: usize = 256;

pub fn parse(args: &[String]) -> Result<Command, String> {
    let mut options = Options::default();
    let mut given = Vec::new();
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        if matches!(flag.as_str(), "-h" | "--help") {
            return Ok(Command::Help);
        }
        if flag == "--compare" {
            options.compare = true;
            continue;
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        apply(&mut options, flag, value)?;
        given.push(flag.as_str());
    }
    if options.ensemble.is_some() {
        if !given.contains(&"--workload") {
            options.workloads = vec![
                Workload::Throughput,
                Workload::Creates,
                Workload::LeaderKill,
            ];
        }
        if !given.contains(&"--read-ratios") {
            options.read_ratios = vec![0.0, 0.7, 1.0];
        }
        if given.contains(&"--servers") {
            return Err("--ensemble starts its own servers; it takes no --servers".into());
        }
    } else if options.workloads.contains(&Workload::LeaderKill) {
        return Err("the leader-kill workload needs --ensemble N".into());
    }
    Ok(Command::Bench(Box::new(options)))
}

fn apply(options: &mut Options, flag: &str, value: &str) -> Result<(), String> {
    match flag {
        "--servers" => options.servers = value.to_string(),
        "--workload" => options.workloads = parse_workloads(value)?,
        "--duration-s" => options.duration = parse_seconds(flag, value, 0.1)?,
        "--warmup-s" => options.warmup = parse_seconds(flag, value, 0.0)?,
        "--sessions" => options.sessions = parse_count(flag, value, SESSIONS_MAX)?,
        "--outstanding" => options.outstanding = parse_count(flag, value, OUTSTANDING_MAX)?,
        "--value-bytes" => options.value_bytes = parse_count(flag, value, VALUE_BYTES_MAX)?,
        "--read-ratios" => options.read_ratios = parse_list(value, parse_ratio)?,
        "--create-workers" => {
            options.create_workers = parse_list(value, |v| parse_count(flag, v, SESSIONS_MAX))?
        }
        "--barrier-clients" => {
            options.barrier_clients = parse_list(value, |v| parse_count(flag, v, SESSIONS_MAX))?
        }
        "--recipe-clients" => options.recipe_clients = parse_count(flag, value, SESSIONS_MAX)?,
        "--out" => options.out = Some(PathBuf::from(value)),
        "--ensemble" => {
            let servers = parse_count(flag, value, ENSEMBLE_SERVERS_MAX)?;
            if servers < 3 {
                return Err(format!(
                    "{flag}: an ensemble here has 3 to {ENSEMBLE_SERVERS_MAX} servers"
                ));
            }
            options.ensemble = Some(servers);
        }
        "--leader-kills" => options.leader_kills = parse_count(flag, value, LEADER_KILLS_MAX)?,
        "--rounds" => options.rounds = parse_count(flag, value, ROUNDS_MAX)?,
        "--client-threads" => {
            options.client_threads = parse_count(flag, value, CLIENT_THREADS_MAX)?
        }
        _ => return Err(format!("unknown option {flag}")),
    }
    Ok(())
}

fn parse_workloads(value: &str) -> Result<Vec<Workload>, String> {
    if value == "all" {
        return Ok(Workload::ALL.to_vec());
    }
    parse_list(value, |name| {
        Workload::parse(name).ok_or_else(|| format!("unknown workload {name}"))
    })
}

fn parse_seconds(flag: &str, value: &str, seconds_min: f64) -> Result<Duration, String> {
    let seconds: f64 = value
        .parse()
        .map_err(|_| format!("{flag}: {value} is not a number"))?;
    if !(seconds_min..=DURATION_S_MAX).contains(&seconds) {
        return Err(format!(
            "{flag}: {value} is outside {seconds_min}..={DURATION_S_MAX}"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn parse_count(flag: &str, value: &str, count_max: usize) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(count) if (1..=count_max).contains(&count) => Ok(count),
        _ => Err(format!(
            "{flag}: {value} is not a whole number in 1..={count_max}"
        )),
    }
}

fn parse_ratio(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(ratio) if (0.0..=1.0).contains(&ratio) => Ok(ratio),
        _ => Err(format!("--read-ratios: {value} is not a number in 0..=1")),
    }
}

fn parse_list<T>(
    value: &str,
    parse_one: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let items = value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(parse_one)
        .collect::<Result<Vec<T>, String>>()?;
    if items.is_empty() {
        return Err(format!("empty list: {value:?}"));
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(line: &str) -> Result<Command, String> {
        let args: Vec<String> = line.split_whitespace().map(String::from).collect();
        parse(&args)
    }

    #[test]
    fn no_arguments_give_the_defaults() {
        assert_eq!(parse_words(""), Ok(Command::Bench(Box::default())));
    }

    #[test]
    fn every_option_is_read() {
        let Ok(Command::Bench(options)) = parse_words(
            "--servers a:1,b:2 --workload throughput,barrier --duration-s 1.5 --warmup-s 0 \
             --sessions 3 --outstanding 4 --value-bytes 10 --read-ratios 0,0.5,1 \
             --create-workers 1,2 --barrier-clients 3 --recipe-clients 4 --out /tmp/x --compare \
             --client-threads 3 --rounds 2",
        ) else {
            panic!("did not parse");
        };
        assert_eq!(options.servers, "a:1,b:2");
        assert_eq!(
            options.workloads,
            vec![Workload::Throughput, Workload::Barrier]
        );
        assert_eq!(options.duration, Duration::from_millis(1500));
        assert_eq!(options.warmup, Duration::ZERO);
        assert_eq!((options.sessions, options.outstanding), (3, 4));
        assert_eq!(options.value_bytes, 10);
        assert_eq!(options.read_ratios, vec![0.0, 0.5, 1.0]);
        assert_eq!(options.create_workers, vec![1, 2]);
        assert_eq!(options.barrier_clients, vec![3]);
        assert_eq!(options.recipe_clients, 4);
        assert_eq!(options.client_threads, 3);
        assert_eq!(options.rounds, 2);
        assert_eq!(options.out, Some(PathBuf::from("/tmp/x")));
        assert!(options.compare);
    }

    #[test]
    fn bad_values_are_refused() {
        for line in [
            "--read-ratios 1.5",
            "--sessions 0",
            "--workload nope",
            "--duration-s -1",
            "--bogus 1",
            "--out",
            "--read-ratios ,",
            "--rounds 0",
            "--rounds 21",
        ] {
            assert!(parse_words(line).is_err(), "{line} was accepted");
        }
    }

    #[test]
    fn an_ensemble_changes_the_defaults() {
        let Ok(Command::Bench(options)) = parse_words("--ensemble 3 --compare") else {
            panic!("did not parse");
        };
        assert_eq!(options.ensemble, Some(3));
        assert_eq!(
            options.workloads,
            vec![
                Workload::Throughput,
                Workload::Creates,
                Workload::LeaderKill
            ]
        );
        assert_eq!(options.read_ratios, vec![0.0, 0.7, 1.0]);
        let Ok(Command::Bench(options)) =
            parse_words("--ensemble 5 --workload creates --read-ratios 0.5 --leader-kills 3")
        else {
            panic!("did not parse");
        };
        assert_eq!(options.workloads, vec![Workload::Creates]);
        assert_eq!(options.read_ratios, vec![0.5]);
        assert_eq!(options.leader_kills, 3);
        for line in [
            "--workload leader-kill",
            "--ensemble 2",
            "--ensemble 3 --servers a:1",
        ] {
            assert!(parse_words(line).is_err(), "{line} was accepted");
        }
    }

    #[test]
    fn help_wins() {
        assert_eq!(parse_words("--sessions 3 --help"), Ok(Command::Help));
    }
}
