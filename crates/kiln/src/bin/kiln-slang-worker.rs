//! A Slang compile worker: serves `kiln::compile::slang::SlangPool` requests on stdin and
//! stdout, so that a crash in Slang ends this process, not kiln.

fn main() -> std::process::ExitCode {
    kiln::compile::slang::worker_main()
}
