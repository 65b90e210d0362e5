//! End to end: every workload for about a second against a real zoolog server started through
//! tests/zk-server, then the files it wrote. Only the shape of the results is checked, never
//! a timing: the machine running the tests may be arbitrarily slow or busy.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A zoolog server in a temp dir, stopped when dropped.
struct Server {
    dir: tempfile::TempDir,
    port: String,
}

impl Server {
    fn start() -> Server {
        let root = repository_root();
        let binary = std::env::var("ZOOLOG_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|_| root.join("target/release/zoolog"));
        assert!(
            binary.exists(),
            "{} is missing: run `cargo build --release -p zoolog` first (or set ZOOLOG_BIN)",
            binary.display()
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let output = Command::new(root.join("tests/zk-server"))
            .arg("start")
            .arg(dir.path())
            .env("ZK_KIND", "zoolog")
            .env("ZOOLOG_BIN", &binary)
            .output()
            .expect("tests/zk-server runs");
        assert!(
            output.status.success(),
            "zk-server start failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let port = String::from_utf8(output.stdout)
            .expect("a port")
            .trim()
            .to_string();
        Server { dir, port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new(repository_root().join("tests/zk-server"))
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

fn csv_rows(path: &Path) -> Vec<Vec<String>> {
    let text =
        fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    text.lines()
        .skip(1)
        .map(|line| line.split(',').map(String::from).collect())
        .collect()
}

fn number(field: &str) -> f64 {
    field
        .parse()
        .unwrap_or_else(|_| panic!("{field:?} is not a number"))
}

/// Columns of the CSV files, as in the header.
const OPERATIONS: usize = 4;
const ERRORS: usize = 5;
const RATE: usize = 7;
const P50: usize = 9;
const P99: usize = 10;
const P999: usize = 11;
const COMPLETE: usize = 12;

fn assert_plausible(row: &[String]) {
    assert!(number(&row[OPERATIONS]) > 0.0, "no operations: {row:?}");
    assert_eq!(row[ERRORS], "0", "errors: {row:?}");
    assert!(number(&row[RATE]) > 0.0, "no rate: {row:?}");
    let (p50, p99, p999) = (number(&row[P50]), number(&row[P99]), number(&row[P999]));
    assert!(
        0.0 <= p50 && p50 <= p99 && p99 <= p999,
        "percentiles out of order: {row:?}"
    );
    assert_eq!(row[COMPLETE], "true");
}

#[test]
fn every_workload_writes_plausible_results() {
    let server = Server::start();
    let out = tempfile::tempdir().expect("temp dir");
    let args: Vec<String> = [
        "--servers",
        &format!("127.0.0.1:{}", server.port),
        "--duration-s",
        "1",
        "--warmup-s",
        "0.2",
        "--sessions",
        "4",
        "--outstanding",
        "8",
        "--read-ratios",
        "0,1",
        "--create-workers",
        "1,3",
        "--barrier-clients",
        "3",
        "--recipe-clients",
        "2",
        "--out",
        out.path().to_str().expect("utf-8 path"),
    ]
    .iter()
    .map(|arg| arg.to_string())
    .collect();
    let one_thread = |_threads| tokio::runtime::Builder::new_current_thread();
    assert_eq!(zoolog_bench::run(&args, one_thread), ExitCode::SUCCESS);

    let expected_points = [
        ("throughput.csv", vec!["read_ratio=0", "read_ratio=1"]),
        ("creates.csv", vec!["workers=1", "workers=3"]),
        ("barrier.csv", vec!["clients=3"]),
        ("recipes.csv", vec!["barrier", "lock", "queue", "query"]),
    ];
    for (file, points) in expected_points {
        let rows = csv_rows(&out.path().join(file));
        let found: Vec<&str> = rows.iter().map(|row| row[2].as_str()).collect();
        assert_eq!(found, points, "{file}");
        rows.iter().for_each(|row| assert_plausible(row));
    }
    assert_eq!(csv_rows(&out.path().join("results.csv")).len(), 9);
    assert!(fs::read_to_string(out.path().join("summary.md"))
        .unwrap()
        .contains("| target | read_ratio=1 |"));

    for workload in ["throughput", "creates", "barrier", "recipes"] {
        assert_plot_written(out.path(), workload);
    }
}

/// `<workload>.png`, or `.svg` where no font is installed, and named in the summary.
fn assert_plot_written(out: &Path, workload: &str) {
    let png = out.join(format!("{workload}.png"));
    let svg = out.join(format!("{workload}.svg"));
    let written = if png.exists() {
        assert_eq!(&fs::read(&png).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
        png
    } else {
        assert!(
            fs::read_to_string(&svg)
                .unwrap_or_else(|_| panic!("no plot was written for {workload}"))
                .contains("<svg"),
            "{workload}"
        );
        svg
    };
    let summary = fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains(&format!("Plot: {}", written.display())),
        "{summary}"
    );
}
