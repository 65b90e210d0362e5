//! One progress bar for the whole run, measured in planned time, with the current point's
//! live rate. indicatif hides it when stderr is not a terminal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::control::Window;

const REDRAW_PERIOD: Duration = Duration::from_millis(200);
/// Printed lines kept for [`Progress::printed`]; later ones are only printed. A run prints a
/// few per round and one per leader-kill trial.
const KEPT_LINES_MAX: usize = 100_000;

pub struct Progress {
    bar: ProgressBar,
    /// Planned milliseconds of the points already started.
    started_ms: AtomicU64,
    printed: Mutex<Vec<String>>,
}

/// The redraw task of the point being measured; moves the bar to the point's end when finished.
pub struct PointProgress {
    bar: ProgressBar,
    end_ms: u64,
    redraw: JoinHandle<()>,
}

impl Progress {
    pub fn new(planned: Duration) -> Progress {
        let bar = ProgressBar::new(duration_ms(planned).max(1));
        let style = ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {percent:>3}% ~{eta} left  {msg}",
        )
        .expect("the template is valid")
        .progress_chars("=> ");
        bar.set_style(style);
        Progress {
            bar,
            started_ms: AtomicU64::new(0),
            printed: Mutex::new(Vec::new()),
        }
    }

    /// Shows `label` and the live rate of `window` until the returned guard is finished.
    pub fn point(&self, label: String, planned: Duration, window: &Window) -> PointProgress {
        let bar = self.bar.clone();
        let counted = window.counted_so_far();
        let window = window.clone();
        let planned_ms = duration_ms(planned);
        let done_ms = self.started_ms.fetch_add(planned_ms, Ordering::Relaxed);
        let started = Instant::now();
        let redraw = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(REDRAW_PERIOD);
            while window.is_open() {
                ticks.tick().await;
                let elapsed_ms = duration_ms(started.elapsed()).min(planned_ms);
                bar.set_position(done_ms + elapsed_ms);
                let rate = counted.load(Ordering::Relaxed) as f64 / window.measured_s().max(0.001);
                bar.set_message(format!("{label}: {rate:.0}/s"));
            }
        });
        PointProgress {
            bar: self.bar.clone(),
            end_ms: done_ms + planned_ms,
            redraw,
        }
    }

    /// Prints a line above the bar (or plainly when the bar is hidden), and keeps it.
    pub fn println(&self, line: impl AsRef<str>) {
        let line = line.as_ref();
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
        let mut printed = self.printed.lock().expect("no panics while holding it");
        if printed.len() < KEPT_LINES_MAX {
            printed.push(line.to_string());
        }
    }

    /// Every line printed so far (up to [`KEPT_LINES_MAX`]), one per line.
    pub fn printed(&self) -> String {
        let printed = self.printed.lock().expect("no panics while holding it");
        printed.iter().map(|line| format!("{line}\n")).collect()
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl PointProgress {
    pub fn finish(self) {
        self.redraw.abort();
        self.bar.set_position(self.end_ms);
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_lines_are_kept_in_order() {
        let progress = Progress::new(Duration::from_secs(1));
        progress.println("round 1 of 2");
        progress.println(String::from("trial 1: first write after 30.1 ms"));
        assert_eq!(
            progress.printed(),
            "round 1 of 2\ntrial 1: first write after 30.1 ms\n"
        );
    }
}
