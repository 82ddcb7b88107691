//! `kiln gc`: bound the artifact store by removing the least recently used entries.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::render;

#[derive(clap::Args)]
pub struct GcArgs {
    /// The project manifest (its `.kiln/` is the default store).
    #[arg(long, default_value = "kiln.toml")]
    manifest: PathBuf,
    /// The store directory.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Remove least recently used entries until the store's artifacts take at most this
    /// many bytes: a number, optionally followed by K, M, G or T (powers of 1024), e.g.
    /// `500M` or `2G`.
    #[arg(long, value_parser = parse_size)]
    max_bytes: u64,
}

pub fn run(args: &GcArgs) -> ExitCode {
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
            render::stdout_line(&format!(
                "gc {}: scanned {} entries, removed {} ({} bytes freed), {} bytes remain \
                 ({} bytes on disk)",
                dir.display(),
                report.scanned,
                report.removed,
                report.freed_bytes,
                report.remaining_bytes,
                report.database_bytes,
            ));
            ExitCode::SUCCESS
        }
        Err(e) => {
            say!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// A byte count: digits, then optionally one of `K`, `M`, `G`, `T` (either case, powers of
/// 1024), optionally followed by `B` or `iB` (`500M`, `2G`, `64KiB`, `1048576`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let invalid = || {
        format!(
            "invalid size {text:?}: expected bytes as a whole number, optionally with a \
             K, M, G or T suffix (powers of 1024), e.g. 1048576, 500M or 2G"
        )
    };
    let trimmed = text.trim();
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(invalid());
    }
    let number: u64 = digits.parse().map_err(|_| invalid())?;
    let upper = suffix.to_ascii_uppercase();
    let unit = upper
        .strip_suffix("IB")
        .or_else(|| upper.strip_suffix('B').filter(|u| !u.is_empty()))
        .unwrap_or(&upper);
    let shift = match unit {
        "" if !upper.is_empty() => return Err(invalid()),
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(invalid()),
    };
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size {text:?} is too large (more than {} bytes)", u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_take_plain_bytes_and_binary_suffixes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("500m"), Ok(500 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("2GB"), Ok(2 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
    }

    #[test]
    fn anything_else_is_a_clear_error() {
        for bad in [
            "", "M", "-1", "1.5G", "2X", "2 G B", "12MBs", "B", "0x10", "2iB",
        ] {
            let err = parse_size(bad).unwrap_err();
            assert!(err.contains("invalid size"), "{bad:?}: {err}");
            assert!(err.contains("500M"), "{bad:?}: {err}");
        }
        let err = parse_size("99999999999T").unwrap_err();
        assert!(err.contains("too large"), "{err}");
        let err = parse_size("99999999999999999999999").unwrap_err();
        assert!(err.contains("invalid size"), "{err}");
    }
}
