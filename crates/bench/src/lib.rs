//! # zoolog-bench (being written this session)
use std::process::ExitCode;

pub fn run(_args: &[String]) -> ExitCode {
    eprintln!("zoolog bench is not built yet");
    ExitCode::FAILURE
}
