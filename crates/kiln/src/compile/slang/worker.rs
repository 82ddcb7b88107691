//! The worker process's side: one warm Slang session, one request at a time.

use std::io::{BufReader, BufWriter, Read, Write};
use std::process::ExitCode;

use super::protocol::{read_frame, write_frame, write_json, Hello, Reply};
use super::{SlangCompiler, SlangError, SlangRequest};

/// Test-only: when this environment variable is `1` in a worker, the entry point names
/// `__kiln_test_crash` (raises SIGSEGV, as Slang's Metal back end does), `__kiln_test_abort`
/// and `__kiln_test_hang` (sleeps forever) make the worker misbehave on purpose, so that the
/// pool's crash and deadline handling can be tested. Never set by kiln itself.
pub const TEST_FAULTS_ENV: &str = "KILN_SLANG_WORKER_TEST_FAULTS";

/// The worker executable's whole `main`: the protocol on stdin and the real stdout, with
/// fd 1 pointed at stderr first, so that anything Slang prints cannot corrupt the frames.
pub fn worker_main() -> ExitCode {
    #[cfg(unix)]
    {
        use std::os::fd::FromRawFd;
        // SAFETY: duplicates fd 1 (open: the pool gave us a pipe) and then replaces fd 1 by
        // a copy of fd 2; the duplicate is owned by the `File` alone.
        let protocol = unsafe {
            let fd = libc::dup(1);
            if fd < 0 || libc::dup2(2, 1) < 0 {
                return ExitCode::from(2);
            }
            std::fs::File::from_raw_fd(fd)
        };
        serve_worker(std::io::stdin().lock(), protocol)
    }
    #[cfg(not(unix))]
    {
        serve_worker(std::io::stdin().lock(), std::io::stdout().lock())
    }
}

/// Serves requests from `input` until it ends: the hello, then one reply per request.
/// Exit code 0 at the end of input, 1 when a frame cannot be read or written.
pub fn serve_worker(input: impl Read, output: impl Write) -> ExitCode {
    let mut input = BufReader::new(input);
    let mut output = BufWriter::new(output);
    let faults = std::env::var_os(TEST_FAULTS_ENV).is_some_and(|v| v == "1");
    let compiler = SlangCompiler::new();
    let hello = Hello {
        version: compiler.as_ref().map(|c| c.version()).map_err(Clone::clone),
    };
    if write_json(&mut output, &hello)
        .and_then(|()| output.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    loop {
        let frame = match read_frame(&mut input) {
            Ok(Some(frame)) => frame,
            Ok(None) => return ExitCode::SUCCESS,
            Err(_) => return ExitCode::FAILURE,
        };
        let reply = match serde_json::from_slice::<SlangRequest>(&frame) {
            Err(e) => Err(SlangError::Worker {
                message: format!("undecodable request: {e}"),
            }),
            Ok(request) => {
                if faults {
                    misbehave(&request.entry);
                }
                match &compiler {
                    Ok(compiler) => compiler.compile(&request),
                    Err(e) => Err(e.clone()),
                }
            }
        };
        if send(&mut output, reply).is_err() {
            return ExitCode::FAILURE;
        }
    }
}

fn send(
    output: &mut impl Write,
    reply: Result<super::SlangResponse, SlangError>,
) -> std::io::Result<()> {
    match reply {
        Err(e) => write_json(output, &Reply::Failed(e))?,
        Ok(response) => {
            let header = Reply::Done {
                outputs: response
                    .outputs
                    .iter()
                    .map(|o| {
                        o.as_ref()
                            .map(|bytes| bytes.len() as u64)
                            .map_err(Clone::clone)
                    })
                    .collect(),
                diagnostics: response.diagnostics,
                served: response.served,
                not_found: response.not_found,
            };
            write_json(output, &header)?;
            for bytes in response.outputs.iter().flatten() {
                write_frame(output, bytes)?;
            }
        }
    }
    output.flush()
}

/// The test-only faults of [`TEST_FAULTS_ENV`].
fn misbehave(entry: &str) {
    match entry {
        "__kiln_test_crash" => {
            #[cfg(unix)]
            // SAFETY: raising a signal on ourselves. Rust's runtime handles SIGSEGV (to
            // report stack overflows) and returns from a raised one, so the default action,
            // which ends the process as a real fault in Slang does, is restored first.
            unsafe {
                libc::signal(libc::SIGSEGV, libc::SIG_DFL);
                libc::raise(libc::SIGSEGV);
            }
            std::process::abort();
        }
        "__kiln_test_abort" => std::process::abort(),
        "__kiln_test_hang" => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::slang::{SlangFormat, SlangTarget};
    use crate::compile::Stage;
    use std::sync::Arc;

    /// The protocol in-process: hello, a reply with its raw output frames, a `Failed` reply
    /// for an undecodable request (the worker goes on), and exit 0 at the end of input.
    #[test]
    // A test skipped for want of the library says so.
    #[allow(clippy::print_stdout)]
    fn a_worker_answers_each_frame_and_ends_with_its_input() {
        if let Err(e) = super::super::version() {
            println!("skipped: {e}");
            return;
        }
        let request = SlangRequest {
            main: "c.slang".to_owned(),
            files: vec![(
                "c.slang".to_owned(),
                Arc::from("[shader(\"compute\")] [numthreads(1, 1, 1)] void main() {}\n"),
            )],
            search_dirs: Vec::new(),
            defines: Vec::new(),
            entry: "main".to_owned(),
            stage: Stage::Compute,
            targets: vec![
                SlangTarget::new(SlangFormat::Spirv),
                SlangTarget::new(SlangFormat::Wgsl),
            ],
            matrix_layout_column_major: false,
            optimization: 1,
        };
        let mut input = Vec::new();
        write_json(&mut input, &request).unwrap();
        write_frame(&mut input, b"not json").unwrap();
        let mut output = Vec::new();
        let code = serve_worker(&input[..], &mut output);
        assert_eq!(code, ExitCode::SUCCESS);

        let mut frames = &output[..];
        let mut next = || read_frame(&mut frames).unwrap().unwrap();
        let hello: Hello = serde_json::from_slice(&next()).unwrap();
        assert!(hello.version.is_ok());
        let Reply::Done { outputs, .. } = serde_json::from_slice(&next()).unwrap() else {
            panic!("the request failed");
        };
        let lengths: Vec<u64> = outputs.into_iter().map(Result::unwrap).collect();
        let spirv = next();
        let wgsl = next();
        assert_eq!([spirv.len() as u64, wgsl.len() as u64], lengths[..]);
        assert_eq!(spirv[..4], 0x0723_0203_u32.to_le_bytes());
        assert!(String::from_utf8_lossy(&wgsl).contains("@compute"));
        let reply: Reply = serde_json::from_slice(&next()).unwrap();
        assert!(
            matches!(reply, Reply::Failed(SlangError::Worker { .. })),
            "{reply:?}"
        );
        assert!(read_frame(&mut frames).unwrap().is_none());
    }
}
