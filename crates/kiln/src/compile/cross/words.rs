//! A structural check of SPIR-V words before a translator reads them: SPIRV-Cross assumes
//! well-formed input, so a truncated or foreign buffer is refused here with a clear error.

use super::{CompileError, CompilePhase};

/// The first word of every SPIR-V module (in the module's own byte order).
const MAGIC: u32 = 0x0723_0203;

/// The most IDs a module may declare (the SPIR-V specification's universal limit on the ID
/// bound); a translator allocates a table of this many entries.
const MAX_ID_BOUND: u32 = 4_194_303;

/// Checks the header (magic number, version 1.0 to 1.6, ID bound) and that the instruction
/// stream is a sequence of whole instructions.
pub(super) fn check(spirv: &[u32]) -> Result<(), CompileError> {
    let [magic, version, _generator, bound, _schema, stream @ ..] = spirv else {
        return Err(invalid(format!(
            "{} words is shorter than the 5-word SPIR-V header",
            spirv.len()
        )));
    };
    if *magic != MAGIC {
        return Err(invalid(if magic.swap_bytes() == MAGIC {
            "the words are byte-swapped (give them in the machine's byte order)".to_owned()
        } else {
            format!(
                "not SPIR-V: the first word is {magic:#010x}, not the magic number {MAGIC:#010x}"
            )
        }));
    }
    let (major, minor) = ((version >> 16) & 0xff, (version >> 8) & 0xff);
    if major != 1 || minor > 6 {
        return Err(invalid(format!(
            "SPIR-V version {major}.{minor} is not one of 1.0 ..= 1.6"
        )));
    }
    if *bound == 0 || *bound > MAX_ID_BOUND {
        return Err(invalid(format!(
            "the ID bound {bound} is outside 1 ..= {MAX_ID_BOUND}"
        )));
    }
    let mut at = 0usize;
    while let Some(&first) = stream.get(at) {
        let count = (first >> 16) as usize;
        if count == 0 {
            return Err(invalid(format!(
                "the instruction at word {} has a word count of 0",
                at + 5
            )));
        }
        if count > stream.len() - at {
            return Err(invalid(format!(
                "the instruction at word {} needs {count} words; the module ends after {}",
                at + 5,
                stream.len() - at
            )));
        }
        at += count;
    }
    Ok(())
}

fn invalid(what: String) -> CompileError {
    CompileError::new(CompilePhase::Parse, format!("invalid SPIR-V: {what}"), None)
}

/// The instructions of the module after its 5-word header, as (word index, opcode, words).
/// The caller has checked the stream ([`check`]): every instruction of it, in order.
pub(crate) fn instructions(spirv: &[u32]) -> impl Iterator<Item = (usize, u32, &[u32])> {
    let mut at = 5usize;
    std::iter::from_fn(move || {
        let first = *spirv.get(at)?;
        let count = (first >> 16) as usize;
        let words = spirv.get(at..at + count)?;
        let start = at;
        at += count.max(1);
        Some((start, first & 0xffff, words))
    })
}
