//! The `kiln` command: glue between the command line and the `kiln` library. Arguments are
//! parsed here, the library does the work, and only this crate prints.

/// Prints a line on stderr, as `eprintln!` would, but never panics: a closed stderr
/// (`kiln build 2>&1 | head -1`) loses the line, not the build and its exit code.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

mod build;
mod explain;
mod gc;
mod render;
mod report;
mod serve;
mod usage;
mod watch;
mod watching;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// kiln: an incremental build cache for shader variants.
#[derive(Parser)]
#[command(name = "kiln", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Colour in diagnostics: auto (a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, global = true, value_enum, default_value_t = render::Color::Auto)]
    color: render::Color,
}

#[derive(Subcommand)]
enum Command {
    /// Compile every variant of every shader for every target, once.
    Build(build::BuildArgs),
    /// Watch the sources and rebuild exactly the affected variants on every change.
    Watch(watch::WatchArgs),
    /// Serve variants to a running engine over HTTP, compiled on demand, with hot reload
    /// pushed on an event stream and every variant used recorded.
    Serve(serve::ServeArgs),
    /// Write the variants clients fetched from `kiln serve` (merged with other usage files)
    /// as the usage file `[project] variants_from` builds.
    Usage(usage::UsageArgs),
    /// Bound the size of the artifact store.
    Gc(gc::GcArgs),
    /// Write an HTML page on the last build and the recent ones; print its path.
    Report(report::ReportArgs),
    /// Every input of one variant's identity, and why it was last rebuilt.
    Explain(explain::ExplainArgs),
    /// Serve Slang compile requests on stdin and stdout: the worker process kiln starts
    /// itself (`current_exe() slang-worker`), so that a crash in Slang fails one variant.
    #[command(hide = true)]
    SlangWorker,
}

/// Exit codes: 0 success, 1 some variants failed (or a shard could not upload its share), 2
/// the project could not be built at all.
fn main() -> ExitCode {
    let cli = Cli::parse();
    render::set_color(cli.color);
    route_warnings();
    // Slang compiles in worker processes of this same binary (`kiln slang-worker`), so an
    // installed kiln needs nothing beside it; without a path to itself the library looks.
    if let Ok(exe) = std::env::current_exe() {
        kiln::compile::slang::set_worker_command(
            kiln::compile::slang::WorkerCommand::new(exe).arg("slang-worker"),
        );
    }
    match cli.command {
        Command::Build(args) => build::run(&args),
        Command::Watch(args) => watch::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Usage(args) => usage::run(&args),
        Command::Gc(args) => gc::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Explain(args) => explain::run(&args),
        Command::SlangWorker => kiln::compile::slang::worker_main(),
    }
}

/// The library reports some problems through `tracing` (a store entry that could not be
/// removed, ...): they go to stderr, warnings and errors only, for every command.
fn route_warnings() {
    // Only fails if a subscriber is already set, which then does the job.
    let _ = tracing::subscriber::set_global_default(warning_subscriber(std::io::stderr));
}

fn warning_subscriber<W>(writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(writer)
        .with_target(false)
        .without_time()
        .with_ansi(false)
        .finish()
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn library_warnings_reach_the_user_and_debug_noise_does_not() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = super::warning_subscriber(move || writer.clone());
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(path = "/s/ab/cd", "cannot remove corrupt store entry");
            tracing::debug!("store entry already written by another writer");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert!(text.contains("WARN"), "{text}");
        assert!(text.contains("cannot remove corrupt store entry"), "{text}");
        assert!(text.contains("/s/ab/cd"), "{text}");
        assert!(!text.contains("another writer"), "{text}");
    }
}
