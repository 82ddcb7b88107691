//! Replacing output files atomically without a new inode per file.
//!
//! The plain way (write a temporary file, rename it over the output) allocates an inode and
//! frees the old one for every changed output. On ext4 without a journal, as on these
//! machines, allocating an inode checks the ones freed in the last minute, one inode-table
//! lookup each, so a rebuild that replaces thousands of outputs pays a cost quadratic in
//! their number (a third of a 1,200-output edit's time, in the kernel).
//!
//! Instead the new bytes go into a spare file, which is swapped with the output in one step
//! (`renameat2(RENAME_EXCHANGE)`): readers see the old file or the new one, never a part.
//! The spare's name then holds the old output's inode, which is reused for the next output,
//! but only once a write lease proves nobody has it open: a hot-reloading engine that opened
//! the old output is still reading it. Held from the check to the swap, the lease also makes
//! anyone opening the spare by its name wait until it is swapped. A spare that is not a
//! plain file of ours with one link, or cannot be leased, is removed and a new one made.
//! The spares are temporary files (`.kiln-tmp-*`): a killed build's are removed by the next.
//! Elsewhere than Linux, or where the file system refuses the swap or leases, outputs are
//! replaced the plain way.
//!
//! A new output (nothing at its path) is written into an unnamed file (`O_TMPFILE`) that is
//! then linked under its name: it appears whole, with one directory operation instead of
//! the two of a temporary file and a rename (on this disk 6,000 new files cost 40 ms more
//! than plain `open`/`write`/`close` this way, against 120 ms through a rename), and a killed
//! writer leaves nothing behind.

use super::write_atomic;
use std::fs::Metadata;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Writes a new output at `path`, where nothing is yet, as a build does (see the module
/// documentation): for benchmarks and tools that want kiln's file operations.
pub fn write_new_output(path: &Path, bytes: &[u8]) -> io::Result<Metadata> {
    Spares::default().write_new(path, bytes)
}

/// The spare files of one build's output writes; [`Spares::remove_all`] when done.
#[derive(Default)]
pub(crate) struct Spares {
    spares: Mutex<Vec<PathBuf>>,
    /// The file system refused a swap: plain replacement from then on.
    plain: std::sync::atomic::AtomicBool,
    /// Unnamed files cannot be made or linked here: new outputs through a rename too.
    no_unnamed: std::sync::atomic::AtomicBool,
}

impl Spares {
    /// Writes `bytes` to `path` atomically (see the module documentation); returns the new
    /// file's metadata.
    pub(crate) fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<Metadata> {
        #[cfg(target_os = "linux")]
        if !self.plain.load(std::sync::atomic::Ordering::Relaxed) {
            if let Some(meta) = linux::write_swapping(self, path, bytes)? {
                return Ok(meta);
            }
        }
        write_atomic(path, bytes)
    }

    /// [`Spares::write`] for a `path` at which the caller just found nothing: the bytes go
    /// into an unnamed file linked under `path` once complete (see the module
    /// documentation), creating missing directories. If something appeared at `path`
    /// meanwhile, or the file system has no unnamed files, it is replaced as by `write`.
    pub(crate) fn write_new(&self, path: &Path, bytes: &[u8]) -> io::Result<Metadata> {
        #[cfg(target_os = "linux")]
        if !self.no_unnamed.load(std::sync::atomic::Ordering::Relaxed) {
            match linux::write_unnamed(path, bytes)? {
                linux::Linked::Done(meta) => return Ok(meta),
                linux::Linked::Exists => {}
                linux::Linked::Unsupported => self
                    .no_unnamed
                    .store(true, std::sync::atomic::Ordering::Relaxed),
            }
        }
        self.write(path, bytes)
    }

    /// Removes the spare files left; best effort (a leftover is a killed writer's temporary
    /// file to the next build).
    pub(crate) fn remove_all(&self) {
        let spares = std::mem::take(&mut *self.spares.lock().unwrap_or_else(|e| e.into_inner()));
        for spare in spares {
            let _ = std::fs::remove_file(spare);
        }
    }

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn take(&self) -> Option<PathBuf> {
        self.spares.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn put(&self, spare: PathBuf) {
        self.spares
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(spare);
    }
}

impl Drop for Spares {
    fn drop(&mut self) {
        self.remove_all();
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::super::TEMP_PREFIX;
    use super::Spares;
    use std::ffi::CString;
    use std::fs::{File, Metadata, OpenOptions};
    use std::io;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    use std::path::{Path, PathBuf};
    use std::sync::atomic::Ordering;

    /// A spare file open for writing: a new one, or a reused one, leased and emptied.
    struct Spare {
        file: File,
        path: PathBuf,
        leased: bool,
    }

    impl Drop for Spare {
        fn drop(&mut self) {
            if self.leased {
                // SAFETY: `fcntl` on a descriptor this `File` owns; releasing a lease has
                // no memory effects.
                unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
            }
        }
    }

    /// Takes a lease on the file open as `file`: only possible when no other open file
    /// description of it exists, in this process or any other. A lease break (someone
    /// opening the file while it is held) is signalled with `SIGURG`, ignored by default,
    /// not with the default `SIGIO`, which would end the process.
    fn lease(file: &File) -> bool {
        // `F_SETSIG` from `<asm-generic/fcntl.h>`; the `libc` crate does not name it. Other
        // architectures number it differently: no reuse there.
        #[cfg(any(
            target_arch = "x86_64",
            target_arch = "x86",
            target_arch = "aarch64",
            target_arch = "arm",
            target_arch = "riscv64"
        ))]
        const F_SETSIG: libc::c_int = 10;
        #[cfg(not(any(
            target_arch = "x86_64",
            target_arch = "x86",
            target_arch = "aarch64",
            target_arch = "arm",
            target_arch = "riscv64"
        )))]
        return false;
        let fd = file.as_raw_fd();
        // SAFETY: `fcntl` on a descriptor `file` owns, with integer arguments only.
        unsafe {
            libc::fcntl(fd, F_SETSIG, libc::SIGURG) == 0
                && libc::fcntl(fd, libc::F_SETLEASE, libc::F_WRLCK) == 0
        }
    }

    /// Opens `spare` for reuse: a regular file (never through a link), with one link, owned
    /// by nobody else right now. Otherwise removes it and returns `None`.
    fn reuse(path: PathBuf) -> Option<Spare> {
        let usable = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
            .ok()
            .filter(|file| {
                file.metadata()
                    .is_ok_and(|meta| meta.is_file() && meta.nlink() == 1)
            })
            .filter(lease)
            .map(|file| Spare {
                file,
                path: path.clone(),
                leased: true,
            });
        if usable.is_none() {
            let _ = std::fs::remove_file(&path);
        }
        usable
    }

    /// A new spare file beside `path` (creating its directory if missing).
    fn create(path: &Path) -> io::Result<Spare> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut builder = tempfile::Builder::new();
        builder.prefix(TEMP_PREFIX);
        // tempfile's default is 0600; outputs are read by other tools and users.
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        let temp = match builder.tempfile_in(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir)?;
                builder.tempfile_in(dir)?
            }
            other => other?,
        };
        let (file, path) = temp.keep().map_err(|e| e.error)?;
        Ok(Spare {
            file,
            path,
            leased: false,
        })
    }

    /// Makes the spare hold exactly `bytes`. A reused spare is overwritten from its start
    /// and then cut to the new length, never emptied first: on ext4, a file truncated to
    /// zero is flushed to the disk when closed (`auto_da_alloc`, a guard for programs that
    /// rewrite files in place), and the truncation frees the blocks the write then
    /// allocates again. Together they were a third of the time an edit spent writing
    /// outputs. Nobody else has the spare open (it is leased), so nobody sees it half done.
    fn fill(file: &mut File, bytes: &[u8]) -> io::Result<Metadata> {
        use std::os::unix::fs::FileExt;
        file.write_all_at(bytes, 0)?;
        let meta = file.metadata()?;
        if meta.len() == bytes.len() as u64 {
            return Ok(meta);
        }
        file.set_len(bytes.len() as u64)?;
        file.metadata()
    }

    fn c_path(path: &Path) -> io::Result<CString> {
        CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds NUL"))
    }

    /// Swaps the names `a` and `b` in one step.
    fn exchange(a: &Path, b: &Path) -> io::Result<()> {
        let (a, b) = (c_path(a)?, c_path(b)?);
        // SAFETY: two NUL-terminated paths that outlive the call.
        let done = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                a.as_ptr(),
                libc::AT_FDCWD,
                b.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        if done == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// What became of a new output written as an unnamed file.
    pub(super) enum Linked {
        Done(Metadata),
        /// Something is at the path now: it must be replaced, not created.
        Exists,
        /// No unnamed files, or no `/proc` to link them through.
        Unsupported,
    }

    /// Writes `bytes` into an unnamed file in `path`'s directory (made if missing) and links
    /// it as `path`. Linking goes through `/proc/self/fd`, which needs no privilege
    /// (`AT_EMPTY_PATH` would need `CAP_DAC_READ_SEARCH`).
    pub(super) fn write_unnamed(path: &Path, bytes: &[u8]) -> io::Result<Linked> {
        use std::io::Write;
        let dir = path.parent().unwrap_or(Path::new("."));
        let open = || {
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
                .mode(0o666)
                .open(dir)
        };
        let opened = match open() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir)?;
                open()
            }
            other => other,
        };
        let mut file = match opened {
            Ok(file) => file,
            // Kernels and file systems without `O_TMPFILE` answer one of these.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL | libc::ENOSYS)
                ) =>
            {
                return Ok(Linked::Unsupported)
            }
            Err(e) => return Err(e),
        };
        file.write_all(bytes)?;
        let meta = file.metadata()?;
        let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .map_err(|_| io::Error::other("descriptor path holds NUL"))?;
        let to = c_path(path)?;
        // SAFETY: two NUL-terminated paths that outlive the call.
        let linked = unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        };
        if linked == 0 {
            return Ok(Linked::Done(meta));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EEXIST) => Ok(Linked::Exists),
            // No `/proc` (ENOENT on the descriptor's path), or linking refused there.
            Some(libc::ENOENT | libc::EPERM | libc::EXDEV | libc::EOPNOTSUPP) => {
                Ok(Linked::Unsupported)
            }
            _ => Err(e),
        }
    }

    /// Replaces the existing regular file `path` by swapping it with a spare holding
    /// `bytes`. `None`: `path` is not an existing regular file or link, or the file system
    /// cannot swap; the caller writes it the plain way.
    pub(super) fn write_swapping(
        spares: &Spares,
        path: &Path,
        bytes: &[u8],
    ) -> io::Result<Option<Metadata>> {
        // A new output takes the temporary file's inode (nothing is freed); a directory in
        // the way must fail as before, not be swapped away.
        match std::fs::symlink_metadata(path) {
            Ok(meta) if !meta.is_dir() => {}
            _ => return Ok(None),
        }
        let mut spare = loop {
            match spares.take() {
                Some(path) => {
                    if let Some(spare) = reuse(path) {
                        break spare;
                    }
                }
                None => break create(path)?,
            }
        };
        let meta = match fill(&mut spare.file, bytes) {
            Ok(meta) => meta,
            Err(e) => {
                let _ = std::fs::remove_file(&spare.path);
                return Err(e);
            }
        };
        // Leased until swapped: whoever opens the spare by its name meanwhile waits.
        let swapped = exchange(&spare.path, path);
        let spare = {
            let path = std::mem::take(&mut spare.path);
            drop(spare);
            path
        };
        match swapped {
            Ok(()) => {
                // The spare's name now holds the old output.
                spares.put(spare);
                Ok(Some(meta))
            }
            Err(e) => {
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)
                ) {
                    spares.plain.store(true, Ordering::Relaxed);
                }
                // The bytes are in the spare: rename it into place the plain way.
                match std::fs::rename(&spare, path) {
                    Ok(()) => Ok(Some(meta)),
                    Err(e) => {
                        let _ = std::fs::remove_file(&spare);
                        Err(e)
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temps(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(super::super::TEMP_PREFIX))
            .collect()
    }

    #[test]
    fn replacing_outputs_reuses_the_replaced_inode_and_leaves_no_spare() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.spv"), dir.path().join("b.spv"));
        std::fs::write(&a, b"old a").unwrap();
        std::fs::write(&b, b"old b").unwrap();
        let old_a = std::fs::metadata(&a).unwrap();
        let spares = Spares::default();
        spares.write(&a, b"new a").unwrap();
        let meta = spares.write(&b, b"new b, longer").unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"new a");
        assert_eq!(std::fs::read(&b).unwrap(), b"new b, longer");
        assert_eq!(meta.len(), 13);
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::MetadataExt;
            // b's new bytes went into a's old inode.
            assert_eq!(std::fs::metadata(&b).unwrap().ino(), old_a.ino());
            assert_eq!(meta.ino(), old_a.ino());
            assert_eq!(temps(dir.path()).len(), 1, "one spare while writing");
        }
        let _ = old_a;
        spares.remove_all();
        assert!(temps(dir.path()).is_empty());
        // A new output is created, not swapped.
        spares.write(&dir.path().join("c/new.spv"), b"c").unwrap();
        assert_eq!(std::fs::read(dir.path().join("c/new.spv")).unwrap(), b"c");
    }

    #[test]
    fn a_new_output_appears_whole_with_no_temporary_name_and_the_usual_mode() {
        let dir = tempfile::tempdir().unwrap();
        let spares = Spares::default();
        let new = dir.path().join("sub/dir/new.spv");
        let meta = spares.write_new(&new, b"fresh bytes").unwrap();
        assert_eq!(std::fs::read(&new).unwrap(), b"fresh bytes");
        assert_eq!(meta.len(), 11);
        assert!(temps(&dir.path().join("sub/dir")).is_empty());
        #[cfg(target_os = "linux")]
        assert!(
            !spares.no_unnamed.load(std::sync::atomic::Ordering::Relaxed),
            "written as an unnamed file, not through a rename"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::{MetadataExt, PermissionsExt};
            let on_disk = std::fs::metadata(&new).unwrap();
            // The metadata returned describes the file now under the name.
            assert_eq!((meta.ino(), meta.size()), (on_disk.ino(), on_disk.size()));
            assert_eq!(on_disk.nlink(), 1);
            let plain = dir.path().join("sub/dir/plain");
            std::fs::write(&plain, b"x").unwrap();
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&new), mode(&plain), "mode as any written file's");
        }
        // Something appeared at the path since the caller looked: it is replaced.
        let raced = dir.path().join("raced.spv");
        std::fs::write(&raced, b"someone else's").unwrap();
        spares.write_new(&raced, b"ours").unwrap();
        assert_eq!(std::fs::read(&raced).unwrap(), b"ours");
        // A directory in the way is an error and stays.
        let sub = dir.path().join("sub");
        assert!(spares.write_new(&sub, b"x").is_err());
        assert!(sub.is_dir());
        spares.remove_all();
        assert!(temps(dir.path()).is_empty());
    }

    #[test]
    fn a_reused_spare_holds_exactly_the_new_bytes_when_they_are_shorter_or_longer() {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = (0..4)
            .map(|n| dir.path().join(format!("{n}.spv")))
            .collect();
        let old: [&[u8]; 4] = [
            b"a long old output",
            b"bbbbbb",
            b"c longer old output",
            b"dd",
        ];
        for (path, bytes) in paths.iter().zip(old) {
            std::fs::write(path, bytes).unwrap();
        }
        let spares = Spares::default();
        // Each write after the first goes into the inode the previous one replaced.
        let new: [&[u8]; 4] = [b"A", b"B, now much longer than b", b"C", b""];
        for (path, bytes) in paths.iter().zip(new) {
            let meta = spares.write(path, bytes).unwrap();
            assert_eq!(meta.len(), bytes.len() as u64);
        }
        for (path, bytes) in paths.iter().zip(new) {
            assert_eq!(std::fs::read(path).unwrap(), bytes, "{}", path.display());
        }
        spares.remove_all();
        assert!(temps(dir.path()).is_empty());
    }

    #[test]
    fn an_old_output_someone_still_reads_is_never_reused() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.spv"), dir.path().join("b.spv"));
        std::fs::write(&a, b"old a").unwrap();
        std::fs::write(&b, b"old b").unwrap();
        // A hot-reloading reader holds the old a open.
        let reader = std::fs::File::open(&a).unwrap();
        let spares = Spares::default();
        spares.write(&a, b"new a").unwrap();
        spares.write(&b, b"new b").unwrap();
        let mut old = String::new();
        std::io::Read::read_to_string(&mut &reader, &mut old).unwrap();
        assert_eq!(old, "old a", "the reader's file was not rewritten");
        assert_eq!(std::fs::read(&a).unwrap(), b"new a");
        assert_eq!(std::fs::read(&b).unwrap(), b"new b");
        spares.remove_all();
        assert!(temps(dir.path()).is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn a_link_or_a_directory_in_the_way_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("victim");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("a.spv");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let other = dir.path().join("b.spv");
        std::fs::write(&other, b"old b").unwrap();
        let spares = Spares::default();
        spares.write(&link, b"new a").unwrap();
        // The spare now names the link; the next write must not follow it.
        spares.write(&other, b"new b").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert_eq!(std::fs::read(&link).unwrap(), b"new a");
        assert!(!std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read(&other).unwrap(), b"new b");
        let sub = dir.path().join("d.spv");
        std::fs::create_dir(&sub).unwrap();
        assert!(spares.write(&sub, b"x").is_err());
        assert!(sub.is_dir());
        spares.remove_all();
        assert!(temps(dir.path()).is_empty());
    }
}
