//! `kiln watch`.

use crate::build::ProjectArgs;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub project: ProjectArgs,
    /// Byte budget for compiled artifacts kept in memory.
    #[arg(long)]
    pub max_memory: Option<u64>,
}

pub fn run(_args: &WatchArgs) -> ExitCode {
    eprintln!("error: `kiln watch` is not available yet");
    ExitCode::from(2)
}
