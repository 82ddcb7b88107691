//! `kiln slang-worker`: the hidden subcommand the build starts as its Slang workers
//! (`current_exe() slang-worker`) speaks the pool's protocol. Skips when the Slang library
//! cannot be found, unless `KILN_REQUIRE_SLANG=1`.

use std::process::Command;
use std::sync::Arc;

use kiln::compile::slang::{
    self, PoolOptions, SlangFormat, SlangPool, SlangRequest, SlangTarget, WorkerCommand,
};
use kiln::compile::Stage;

#[test]
fn the_hidden_subcommand_is_a_slang_worker() {
    let kiln = env!("CARGO_BIN_EXE_kiln");
    let help = Command::new(kiln).arg("--help").output().unwrap();
    assert!(!String::from_utf8_lossy(&help.stdout).contains("slang-worker"));

    if let Err(e) = slang::version() {
        let required = std::env::var_os("KILN_REQUIRE_SLANG").is_some_and(|v| v == "1");
        assert!(!required, "KILN_REQUIRE_SLANG=1 but {e}");
        println!("skipped: {e}");
        return;
    }
    let pool = SlangPool::new(
        WorkerCommand::new(kiln).arg("slang-worker"),
        PoolOptions::default(),
    );
    let main = "[shader(\"compute\")] [numthreads(1, 1, 1)] void main() {}\n";
    let request = SlangRequest {
        main: "c.slang".to_owned(),
        files: vec![("c.slang".to_owned(), Arc::from(main))],
        search_dirs: Vec::new(),
        defines: Vec::new(),
        entry: "main".to_owned(),
        stage: Stage::Compute,
        targets: vec![SlangTarget::new(SlangFormat::Spirv)],
        matrix_layout_column_major: false,
        optimization: 1,
    };
    let response = pool.compile(&request).unwrap();
    let spirv = response.outputs[0].as_ref().unwrap();
    assert_eq!(spirv[..4], 0x0723_0203_u32.to_le_bytes());
}
