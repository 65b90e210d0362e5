//! # zoolog-shell (being written this session)
use std::process::ExitCode;

pub fn run(_args: &[String]) -> ExitCode {
    eprintln!("zoolog shell is not built yet");
    ExitCode::FAILURE
}
