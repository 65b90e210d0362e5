//! The simulator in CI: many seeds (ZOOLOG_SIM_SEEDS, default 2000, from ZOOLOG_SIM_FROM;
//! even seeds run zab mode, odd seeds core mode), and reproducibility.

use zoolog_sim::{run_seed, Mode, Options};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn seeds_pass() {
    let count = env("ZOOLOG_SIM_SEEDS", 2000);
    let from = env("ZOOLOG_SIM_FROM", 0);
    let options = Options::default();
    let failures: Vec<String> = (from..from + count)
        .filter_map(|seed| run_seed(seed, &options).err())
        .map(|failure| failure.to_string())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {count} seeds failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn same_seed_same_run() {
    let options = Options::default();
    for seed in [3, 17, 4242] {
        let first = run_seed(seed, &options);
        let second = run_seed(seed, &options);
        match (first, second) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "seed {seed} ran differently twice"),
            (Err(a), Err(b)) => {
                assert_eq!(a.message, b.message, "seed {seed} failed differently twice")
            }
            (a, b) => panic!("seed {seed}: one run passed, the other failed: {a:?} / {b:?}"),
        }
    }
}

#[test]
fn core_mode_is_deterministic_and_not_vacuous() {
    let options = Options {
        mode: Some(Mode::Core),
        ..Options::default()
    };
    let (mut acks, mut reads, mut synced) = (0, 0, 0);
    for seed in [1, 2, 4242, 77, 1001] {
        let first = run_seed(seed, &options).unwrap_or_else(|f| panic!("{f}"));
        let second = run_seed(seed, &options).unwrap_or_else(|f| panic!("{f}"));
        assert_eq!(
            first, second,
            "seed {seed} ran differently twice in core mode"
        );
        assert_eq!(first.mode, Mode::Core);
        acks += first.write_acks;
        reads += first.reads_checked;
        synced += first.synced_reads;
    }
    assert!(
        acks > 100 && reads > 100 && synced > 10,
        "the checkers saw too little: {acks} write replies, {reads} reads, {synced} after a sync"
    );
}

/// Seeds that found a bug, with what they found. A change to the simulator's draws may send a
/// seed elsewhere; it stays as a cheap check all the same.
#[test]
fn seeds_that_found_bugs_pass() {
    let core = Options {
        mode: Some(Mode::Core),
        ..Options::default()
    };
    let found = [
        (
            755834,
            "a read-only client's session expired while it talked to its server: the server's \
             liveness reports waited behind client writes in its full append queue",
        ),
        (
            339,
            "a member cut off from its quorum told a client resuming a session created after \
             what the member had applied that its session had expired",
        ),
        (
            2128142,
            "a read-only client's session expired while it talked to an observer: the \
             observer's liveness reports waited behind client writes forwarded to the leader",
        ),
    ];
    for (seed, bug) in found {
        if let Err(failure) = run_seed(seed, &core) {
            panic!("seed {seed} ({bug}): {failure}");
        }
    }
}
