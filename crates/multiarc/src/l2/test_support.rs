//! What the room's unit tests share: a key codec, settings, fresh device
//! paths on disk, and buffers whose bytes tell their key.

use super::{Added, KeyCodec, L2Arc, L2Config};
use std::path::{Path, PathBuf};

pub(super) fn codec() -> KeyCodec<u64> {
    KeyCodec {
        len: 8,
        encode: |k, out| out[..8].copy_from_slice(&k.to_le_bytes()),
        decode: |b| u64::from_le_bytes(b[..8].try_into().unwrap()),
    }
}

pub(super) fn config(path: &Path, bytes: u64, write_max: u64) -> L2Config {
    L2Config::new(path.to_path_buf(), bytes, write_max)
}

/// A fresh path on the disk (the crate's target directory).
pub(super) fn path(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/l2-unit-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

pub(super) fn data(key: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (key as usize * 131 + i * 7) as u8)
        .collect()
}

/// Writes one batch of `keys` (key, length), the even ones as of the MFU
/// list; returns the buffers written.
pub(super) fn write(tier: &L2Arc<u64>, keys: impl Iterator<Item = (u64, usize)>) -> usize {
    let mut b = tier.batch();
    for (k, len) in keys {
        assert_eq!(b.add(&k, &data(k, len), k % 2 == 0), Added::Copied);
    }
    b.commit().unwrap()
}
