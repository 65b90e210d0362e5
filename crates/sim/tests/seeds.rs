//! The simulator in CI: many seeds (ZOOLOG_SIM_SEEDS, default 1000, from ZOOLOG_SIM_FROM),
//! and reproducibility.

use zoolog_sim::{run_seed, Options};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn seeds_pass() {
    let count = env("ZOOLOG_SIM_SEEDS", 1000);
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
