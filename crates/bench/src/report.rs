//! What a run leaves behind: CSV files, Markdown tables (printed and saved), the zoolog/Apache
//! ratios, and the description of the machine and the servers.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use crate::stats::{combine_rounds, Measurement, Workload};

pub const CSV_HEADER: &str = "server,workload,point,x,operations,errors,elapsed_s,rate_per_s,\
latency_mean_ms,latency_p50_ms,latency_p99_ms,latency_p999_ms,complete,latency_max_ms,round";

pub fn to_csv(rows: &[&Measurement]) -> String {
    let mut csv = format!("{CSV_HEADER}\n");
    for row in rows {
        let latency = row.latency;
        let fields = [
            csv_field(&row.server),
            csv_field(row.workload.name()),
            csv_field(&row.point),
            row.x.to_string(),
            row.operations.to_string(),
            row.errors.to_string(),
            format!("{:.3}", row.elapsed_s),
            format!("{:.1}", row.rate_per_s()),
            optional_ms(latency.mean_ms),
            optional_ms(latency.p50_ms),
            optional_ms(latency.p99_ms),
            optional_ms(latency.p999_ms),
            row.complete.to_string(),
            optional_ms(latency.max_ms),
            row.round.to_string(),
        ];
        csv.push_str(&fields.join(","));
        csv.push('\n');
    }
    csv
}

/// Quotes a field that holds a comma, a quote or a line break (RFC 4180).
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// Milliseconds with microsecond digits; empty when nothing was measured.
fn optional_ms(value_ms: Option<f64>) -> String {
    value_ms.map(|ms| format!("{ms:.3}")).unwrap_or_default()
}

fn rows_of(results: &[Measurement], workload: Workload) -> Vec<&Measurement> {
    results
        .iter()
        .filter(|row| row.workload == workload)
        .collect()
}

/// One Markdown table per workload that has rows.
pub fn results_tables(results: &[Measurement]) -> String {
    let mut text = String::new();
    for workload in Workload::EVERY {
        let rows = rows_of(results, workload);
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(text, "\n### {}\n", workload_title(workload));
        if workload == Workload::LeaderKill {
            text.push_str(&leader_kill_table(&rows));
            continue;
        }
        let _ = writeln!(
            text,
            "| server | point | {}/s | p50 ms | p99 ms | p99.9 ms | mean ms | errors |",
            workload.unit()
        );
        text.push_str("|---|---|---:|---:|---:|---:|---:|---:|\n");
        for row in rows {
            let latency = row.latency;
            let _ = writeln!(
                text,
                "| {} | {}{} | {:.0} | {} | {} | {} | {} | {} |",
                row.server,
                row.point,
                if row.complete { "" } else { " (cut short)" },
                row.rate_per_s(),
                table_ms(latency.p50_ms),
                table_ms(latency.p99_ms),
                table_ms(latency.p999_ms),
                table_ms(latency.mean_ms),
                row.errors
            );
        }
    }
    text
}

fn workload_title(workload: Workload) -> &'static str {
    match workload {
        Workload::Throughput => "Throughput by read ratio (ZooKeeper paper, Figure 5)",
        Workload::Creates => "Synchronous creates, asynchronous deletes (ZooKeeper paper, Table 2)",
        Workload::Barrier => "Double barriers in lock-step (ZooKeeper paper, Table 3)",
        Workload::Recipes => "Recipe latency (shared-log paper, Table 1; approximate)",
        Workload::LeaderKill => {
            "Unavailability after kill -9 of the leader (kill to first successful write)"
        }
    }
}

fn leader_kill_table(rows: &[&Measurement]) -> String {
    let mut text = String::from(
        "| server | trials | median ms | max ms | mean ms | failed trials |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let latency = row.latency;
        let _ = writeln!(
            text,
            "| {} | {}{} | {} | {} | {} | {} |",
            row.server,
            row.operations,
            if row.complete { "" } else { " (cut short)" },
            table_ms(latency.p50_ms),
            table_ms(latency.max_ms),
            table_ms(latency.mean_ms),
            row.errors
        );
    }
    text
}

/// Whole numbers for large values (rates), two decimals for small ones (milliseconds).
pub fn format_number(value: f64) -> String {
    if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

fn table_ms(value_ms: Option<f64>) -> String {
    value_ms
        .map(|ms| format!("{ms:.2}"))
        .unwrap_or_else(|| "–".into())
}

/// zoolog's value divided by Apache's for one point and one metric.
#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    pub workload: Workload,
    pub point: String,
    pub metric: &'static str,
    pub zoolog: f64,
    pub apache: f64,
}

impl Ratio {
    pub fn value(&self) -> f64 {
        self.zoolog / self.apache
    }
}

/// Reads one metric off a row.
type MetricReader = fn(&Measurement) -> Option<f64>;

/// The metrics compared, with how to read them off a row.
const COMPARED_METRICS: [(&str, MetricReader); 3] = [
    ("rate/s (higher is better)", |row| Some(row.rate_per_s())),
    ("p50 ms (lower is better)", |row| row.latency.p50_ms),
    ("p99 ms (lower is better)", |row| row.latency.p99_ms),
];

/// The metrics compared for the leader-kill trials.
const LEADER_KILL_METRICS: [(&str, MetricReader); 2] = [
    ("median ms to the first write (lower is better)", |row| {
        row.latency.p50_ms
    }),
    ("max ms to the first write (lower is better)", |row| {
        row.latency.max_ms
    }),
];

/// Ratios for every point measured on both "zoolog" and "apache", where both values are there
/// and Apache's is not zero.
pub fn ratios(results: &[Measurement]) -> Vec<Ratio> {
    let mut ratios = Vec::new();
    for zoolog in results.iter().filter(|row| row.server == "zoolog") {
        let Some(apache) = results.iter().find(|row| {
            row.server == "apache" && row.workload == zoolog.workload && row.point == zoolog.point
        }) else {
            continue;
        };
        let metrics: &[(&'static str, MetricReader)] = if zoolog.workload == Workload::LeaderKill {
            &LEADER_KILL_METRICS
        } else {
            &COMPARED_METRICS
        };
        for &(metric, read) in metrics {
            if let (Some(zoolog_value), Some(apache_value)) = (read(zoolog), read(apache)) {
                if apache_value > 0.0 {
                    ratios.push(Ratio {
                        workload: zoolog.workload,
                        point: zoolog.point.clone(),
                        metric,
                        zoolog: zoolog_value,
                        apache: apache_value,
                    });
                }
            }
        }
    }
    ratios
}

/// One target checked at one point.
struct TargetCheck {
    target: String,
    point: String,
    zoolog: f64,
    apache: f64,
    met: bool,
}

/// The targets for 3-server ensembles, checked against a `--ensemble --compare` run:
/// one line per target and point, with both values and the ratio over the combined rounds
/// (see [`combine_rounds`]), whether that is met, and in how many of the single rounds it was.
pub fn ensemble_targets(results: &[Measurement]) -> String {
    let combined = combine_rounds(results);
    let mut rounds: Vec<usize> = results.iter().map(|row| row.round).collect();
    rounds.sort_unstable();
    rounds.dedup();
    let checks_by_round: Vec<Vec<TargetCheck>> = rounds
        .iter()
        .map(|&round| {
            let rows: Vec<&Measurement> = results.iter().filter(|row| row.round == round).collect();
            target_checks(&rows)
        })
        .collect();
    let mut text = String::from(
        "| target | point | zoolog | Apache | zoolog/Apache | met | rounds met |\n\
         |---|---|---:|---:|---:|---|---:|\n",
    );
    for check in target_checks(&combined.iter().collect::<Vec<_>>()) {
        let rounds_met = checks_by_round
            .iter()
            .filter(|checks| {
                checks.iter().any(|other| {
                    other.met && other.target == check.target && other.point == check.point
                })
            })
            .count();
        let ratio = if check.apache > 0.0 {
            format!("{:.2}", check.zoolog / check.apache)
        } else {
            "–".into()
        };
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {ratio} | {} | {rounds_met}/{} |",
            check.target,
            check.point,
            format_number(check.zoolog),
            format_number(check.apache),
            if check.met { "yes" } else { "**no**" },
            rounds.len()
        );
    }
    text
}

/// Every target that `rows` (one row per server and point) hold both values for.
fn target_checks(rows: &[&Measurement]) -> Vec<TargetCheck> {
    let find = |server: &str, workload: Workload, point: &str| {
        rows.iter()
            .find(|row| row.server == server && row.workload == workload && row.point == point)
    };
    let mut checks = Vec::new();
    let mut check = |target: &str,
                     point: &str,
                     zoolog: Option<f64>,
                     apache: Option<f64>,
                     met: &dyn Fn(f64, f64) -> bool| {
        if let (Some(zoolog), Some(apache)) = (zoolog, apache) {
            checks.push(TargetCheck {
                target: target.to_string(),
                point: point.to_string(),
                zoolog,
                apache,
                met: met(zoolog, apache),
            });
        }
    };
    for (read_ratio, target, factor) in [
        ("0", "throughput ≥ 3× (writes)", 3.0),
        ("0.7", "throughput ≥ 2.5× at 70% reads", 2.5),
    ] {
        let point = format!("read_ratio={read_ratio}");
        let rate = |server| find(server, Workload::Throughput, &point).map(|row| row.rate_per_s());
        check(target, &point, rate("zoolog"), rate("apache"), &|z, a| {
            z >= factor * a
        });
    }
    let p99_rows = rows
        .iter()
        .filter(|row| row.server == "zoolog")
        .filter(|row| matches!(row.workload, Workload::Throughput | Workload::Creates));
    for zoolog in p99_rows {
        let apache = find("apache", zoolog.workload, &zoolog.point);
        check(
            &format!("{} p99 ms ≤ ⅓ of Apache's", zoolog.workload.name()),
            &zoolog.point,
            zoolog.latency.p99_ms,
            apache.and_then(|row| row.latency.p99_ms),
            &|z, a| 3.0 * z <= a,
        );
    }
    let kill = |server| find(server, Workload::LeaderKill, "kill -9 leader").map(|row| row.latency);
    let (zoolog, apache) = (kill("zoolog"), kill("apache"));
    check(
        "leader kill to first write < 200 ms",
        "median ms",
        zoolog.and_then(|l| l.p50_ms),
        apache.and_then(|l| l.p50_ms),
        &|z, _| z < 200.0,
    );
    check(
        "leader kill to first write < 200 ms",
        "max ms",
        zoolog.and_then(|l| l.max_ms),
        apache.and_then(|l| l.max_ms),
        &|z, _| z < 200.0,
    );
    checks
}

pub fn ratios_table(ratios: &[Ratio]) -> String {
    if ratios.is_empty() {
        return "No point was measured on both servers.\n".into();
    }
    let mut text = String::from(
        "| workload | point | metric | zoolog | Apache | zoolog/Apache |\n|---|---|---|---:|---:|---:|\n",
    );
    for ratio in ratios {
        let _ = writeln!(
            text,
            "| {} | {} | {} | {} | {} | {:.2} |",
            ratio.workload.name(),
            ratio.point,
            ratio.metric,
            format_number(ratio.zoolog),
            format_number(ratio.apache),
            ratio.value()
        );
    }
    text
}

pub fn ratios_csv(ratios: &[Ratio]) -> String {
    let mut csv = String::from("workload,point,metric,zoolog,apache,ratio\n");
    for ratio in ratios {
        let _ = writeln!(
            csv,
            "{},{},{},{:.3},{:.3},{:.4}",
            ratio.workload.name(),
            csv_field(&ratio.point),
            csv_field(ratio.metric),
            ratio.zoolog,
            ratio.apache,
            ratio.value()
        );
    }
    csv
}

/// Writes `<workload>.csv` for every workload with rows, and `results.csv` with all of them.
pub fn write_csv_files(out_dir: &Path, results: &[Measurement]) -> io::Result<()> {
    for workload in Workload::EVERY {
        let rows = rows_of(results, workload);
        if !rows.is_empty() {
            fs::write(
                out_dir.join(format!("{}.csv", workload.name())),
                to_csv(&rows),
            )?;
        }
    }
    let all: Vec<&Measurement> = results.iter().collect();
    fs::write(out_dir.join("results.csv"), to_csv(&all))
}

/// CPU model, cores, memory and kernel, from /proc (empty parts when unreadable).
pub fn machine_description() -> String {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = proc_value(&cpuinfo, "model name").unwrap_or("unknown CPU");
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_gib = proc_value(&meminfo, "MemTotal")
        .and_then(|value| value.trim_end_matches(" kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / (1024.0 * 1024.0));
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{cpu}, {cores} cores, {memory_gib:.0} GiB memory, Linux {}",
        kernel.trim()
    )
}

fn proc_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find(|line| line.split(':').next().map(str::trim) == Some(key))
        .and_then(|line| line.split_once(':'))
        .map(|(_, value)| value.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LatencySummary;

    fn row(
        server: &str,
        workload: Workload,
        point: &str,
        operations: u64,
        p50_ms: f64,
    ) -> Measurement {
        Measurement {
            server: server.into(),
            round: 1,
            workload,
            point: point.into(),
            x: 0.5,
            operations,
            errors: 1,
            elapsed_s: 2.0,
            latency: LatencySummary {
                mean_ms: Some(p50_ms),
                p50_ms: Some(p50_ms),
                p99_ms: Some(p50_ms * 2.0),
                p999_ms: None,
                max_ms: None,
            },
            complete: true,
        }
    }

    #[test]
    fn csv_has_a_header_and_one_line_per_row() {
        let measured = row("zoolog", Workload::Throughput, "read_ratio=0.5", 1000, 1.25);
        let csv = to_csv(&[&measured]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(
            lines[1],
            "zoolog,throughput,read_ratio=0.5,0.5,1000,1,2.000,500.0,1.250,1.250,2.500,,true,,1"
        );
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].split(',').count(), CSV_HEADER.split(',').count());
    }

    #[test]
    fn csv_fields_with_commas_or_quotes_are_quoted() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn ratios_pair_the_same_point_on_both_servers() {
        let results = [
            row("zoolog", Workload::Creates, "workers=1", 3000, 1.0),
            row("apache", Workload::Creates, "workers=1", 1000, 2.0),
            row("zoolog", Workload::Creates, "workers=10", 3000, 1.0),
        ];
        let ratios = ratios(&results);
        assert_eq!(ratios.len(), COMPARED_METRICS.len());
        assert!(ratios.iter().all(|ratio| ratio.point == "workers=1"));
        assert_eq!(ratios[0].value(), 3.0);
        assert_eq!(ratios[1].value(), 0.5);
        assert!(ratios_csv(&ratios)
            .lines()
            .nth(1)
            .unwrap()
            .ends_with(",3.0000"));
    }

    #[test]
    fn targets_take_the_median_round_and_count_the_rounds_that_met_them() {
        let mut results = Vec::new();
        for (round, zoolog_p50_ms) in [(1, 0.1), (2, 0.3), (3, 0.15)] {
            for (server, p50_ms) in [("zoolog", zoolog_p50_ms), ("apache", 0.5)] {
                let mut measured = row(server, Workload::Creates, "workers=1", 100, p50_ms);
                measured.round = round;
                results.push(measured);
            }
        }
        let table = ensemble_targets(&results);
        let line = table
            .lines()
            .find(|line| line.contains("workers=1"))
            .expect("a line for the point");
        assert_eq!(
            line,
            "| creates p99 ms ≤ ⅓ of Apache's | workers=1 | 0.30 | 1.00 | 0.30 | yes | 2/3 |"
        );
    }

    #[test]
    fn numbers_keep_the_digits_that_matter() {
        assert_eq!(format_number(85821.4), "85821");
        assert_eq!(format_number(0.0912), "0.09");
        assert_eq!(
            ratios_table(&[]),
            "No point was measured on both servers.\n"
        );
    }

    #[test]
    fn tables_mark_points_cut_short() {
        let mut cut = row("target", Workload::Barrier, "clients=10", 10, 3.0);
        cut.complete = false;
        let table = results_tables(&[cut]);
        assert!(
            table.contains("| target | clients=10 (cut short) | 5 | 3.00 | 6.00 | – | 3.00 | 1 |")
        );
        assert!(table.contains("barriers/s"));
    }

    #[test]
    fn proc_values_are_found_by_key() {
        let text = "processor\t: 0\nmodel name\t: Some CPU\nMemTotal:  1024 kB\n";
        assert_eq!(proc_value(text, "model name"), Some("Some CPU"));
        assert_eq!(proc_value(text, "MemTotal"), Some("1024 kB"));
        assert_eq!(proc_value(text, "missing"), None);
    }
}
