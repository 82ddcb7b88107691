//! The `kiln` command: glue between the command line and the `kiln` library. Arguments are
//! parsed here, the library does the work, and only this crate prints.

mod build;
mod render;
mod watch;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// kiln: an incremental build cache for shader variants.
#[derive(Parser)]
#[command(name = "kiln", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile every variant of every shader for every target, once.
    Build(build::BuildArgs),
    /// Watch the sources and rebuild exactly the affected variants on every change.
    Watch(watch::WatchArgs),
    /// Bound the size of the artifact store.
    Gc(GcArgs),
}

#[derive(clap::Args)]
struct GcArgs {
    /// The project manifest (its `.kiln/` is the default store).
    #[arg(long, default_value = "kiln.toml")]
    manifest: PathBuf,
    /// The store directory.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Remove least recently used entries until the store holds at most this many bytes.
    #[arg(long)]
    max_bytes: u64,
}

/// Exit codes: 0 success, 1 some variants failed, 2 the project could not be built at all.
fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Build(args) => build::run(&args),
        Command::Watch(args) => watch::run(&args),
        Command::Gc(args) => gc(&args),
    }
}

fn gc(args: &GcArgs) -> ExitCode {
    let dir = match &args.cache_dir {
        Some(dir) => dir.clone(),
        None => args
            .manifest
            .parent()
            .map(|p| p.join(".kiln"))
            .unwrap_or_else(|| PathBuf::from(".kiln")),
    };
    let store = kiln::store::LocalStore::new(&dir);
    match store.gc(args.max_bytes) {
        Ok(report) => {
            println!(
                "gc {}: scanned {} entries, removed {} ({} bytes freed), {} bytes remain",
                dir.display(),
                report.scanned,
                report.removed,
                report.freed_bytes,
                report.remaining_bytes
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
