//! The second tier's on-device format (version 1), little-endian.
//!
//! ```text
//!  0      4 KiB                                              bytes
//!  +------+--------------------------------------------------+
//!  |header| ring: batches, each [buffers ...][log block]     |
//!  +------+--------------------------------------------------+
//! ```
//!
//! - The **header** (unit 0): magic, version, unit size, the cache
//!   identity, the device size, the key encoding's length, a pointer to the
//!   newest log block, a *trim* range: the region the hand is about to
//!   overwrite, written before that overwrite so that a rebuild after a
//!   crash never trusts what lay there, and a *dirty* flag: set (written)
//!   before the first rewrite or removal of a key that is not yet written
//!   down in a log block, cleared once all are. It ends with its own
//!   checksum.
//! - A **batch** is written in one sequential write at the ring's hand:
//!   its buffers, each padded to whole units, then one **log block**
//!   (whole units) that describes them: magic, its own checksum, its
//!   generation (the previous log block's plus one), a pointer to the
//!   previous log block (offset, length, checksum, generation: the chain
//!   back), where the batch starts, and per buffer the encoded key, device
//!   offset, length, flags (bit 0: fed from MFU; bit 1: on the tier's
//!   second list, T2) and data checksum; then the *tombstones*: the
//!   encoded keys rewritten or removed in memory since the previous log
//!   block, whose copies in older batches are stale.
//!
//! The index is rebuilt by walking the chain back from the header's
//! pointer (`mod.rs`, `rebuild`); a tombstone hides the entries of its key
//! in the blocks older than its own. A device whose header is dirty (the
//! cache stopped without writing its last tombstones down: a crash) is
//! started empty, since some copies on it may be stale.

use super::checksum::checksum;
use super::device::{units, UNIT};

pub(super) const VERSION: u32 = 2;
const HEADER_MAGIC: &[u8; 8] = b"MARC-L2\0";
const LOG_MAGIC: &[u8; 8] = b"MARC-LOG";
/// Bytes of a log block before its entries.
const LOG_FIXED: usize = 80;
/// Bytes of an entry beyond its key.
const ENTRY_FIXED: usize = 24;

/// A pointer to a log block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct LogPtr {
    pub(super) offset: u64,
    pub(super) len: u32,
    pub(super) cksum: u64,
    pub(super) generation: u64,
}

impl LogPtr {
    fn put(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..12].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.cksum.to_le_bytes());
        b[24..32].copy_from_slice(&self.generation.to_le_bytes());
    }

    fn get(b: &[u8]) -> LogPtr {
        LogPtr {
            offset: u64_at(b, 0),
            len: u32_at(b, 8),
            cksum: u64_at(b, 16),
            generation: u64_at(b, 24),
        }
    }

    /// No log block (an empty device).
    pub(super) fn is_none(&self) -> bool {
        self.len == 0
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The device header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Header {
    pub(super) identity: u64,
    pub(super) device_bytes: u64,
    pub(super) key_len: u32,
    pub(super) newest: LogPtr,
    /// `[start, end)` the hand may be overwriting; empty when none.
    pub(super) trim: (u64, u64),
    /// Rewrites or removals are not all written down in log blocks.
    pub(super) dirty: bool,
}

/// Why a header was not used.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum HeaderProblem {
    /// All zeros: a new device.
    Blank,
    /// Not a header (or a torn or damaged one).
    Unreadable,
    /// Another format version.
    Version(u32),
}

impl Header {
    pub(super) fn encode(&self, b: &mut [u8]) {
        let b = &mut b[..UNIT as usize];
        b.fill(0);
        b[0..8].copy_from_slice(HEADER_MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(UNIT as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.identity.to_le_bytes());
        b[24..32].copy_from_slice(&self.device_bytes.to_le_bytes());
        b[32..36].copy_from_slice(&self.key_len.to_le_bytes());
        self.newest.put(&mut b[40..72]);
        b[72..80].copy_from_slice(&self.trim.0.to_le_bytes());
        b[80..88].copy_from_slice(&self.trim.1.to_le_bytes());
        b[88..92].copy_from_slice(&u32::from(self.dirty).to_le_bytes());
        let sum = checksum(&b[..UNIT as usize - 8]);
        b[UNIT as usize - 8..].copy_from_slice(&sum.to_le_bytes());
    }

    pub(super) fn decode(b: &[u8]) -> Result<Header, HeaderProblem> {
        let b = &b[..UNIT as usize];
        if b.iter().all(|&x| x == 0) {
            return Err(HeaderProblem::Blank);
        }
        if &b[0..8] != HEADER_MAGIC
            || u64_at(b, UNIT as usize - 8) != checksum(&b[..UNIT as usize - 8])
        {
            return Err(HeaderProblem::Unreadable);
        }
        let version = u32_at(b, 8);
        if version != VERSION || u32_at(b, 12) != UNIT as u32 {
            return Err(HeaderProblem::Version(version));
        }
        Ok(Header {
            identity: u64_at(b, 16),
            device_bytes: u64_at(b, 24),
            key_len: u32_at(b, 32),
            newest: LogPtr::get(&b[40..72]),
            trim: (u64_at(b, 72), u64_at(b, 80)),
            dirty: u32_at(b, 88) != 0,
        })
    }
}

/// One buffer a log block describes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LogEntry {
    pub(super) key: Vec<u8>,
    pub(super) offset: u64,
    pub(super) len: u32,
    pub(super) mfu: bool,
    /// On the tier's second list (T2).
    pub(super) t2: bool,
    pub(super) cksum: u64,
}

/// A decoded log block.
#[derive(Debug)]
pub(super) struct LogBlock {
    pub(super) generation: u64,
    pub(super) prev: LogPtr,
    /// Where its batch starts (its first buffer).
    pub(super) start: u64,
    pub(super) entries: Vec<LogEntry>,
    /// Encoded keys whose entries in older blocks are stale.
    pub(super) tombstones: Vec<Vec<u8>>,
}

/// The bytes of a log block of `n` entries and `t` tombstones with keys of
/// `key_len` bytes.
pub(super) fn log_len(n: usize, t: usize, key_len: usize) -> u64 {
    units((LOG_FIXED + n * (key_len + ENTRY_FIXED) + t * key_len) as u64)
}

/// Writes the log block into `b` (exactly `log_len` bytes); returns its
/// checksum.
pub(super) fn encode_log(
    b: &mut [u8],
    generation: u64,
    prev: &LogPtr,
    start: u64,
    key_len: usize,
    entries: impl ExactSizeIterator<Item = (Vec<u8>, u64, u32, bool, bool, u64)>,
    tombstones: &[Vec<u8>],
) -> u64 {
    b.fill(0);
    b[0..8].copy_from_slice(LOG_MAGIC);
    b[16..24].copy_from_slice(&generation.to_le_bytes());
    prev.put(&mut b[24..56]);
    b[56..64].copy_from_slice(&start.to_le_bytes());
    b[64..68].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    b[68..72].copy_from_slice(&(key_len as u32).to_le_bytes());
    b[72..76].copy_from_slice(&(tombstones.len() as u32).to_le_bytes());
    let mut at = LOG_FIXED;
    for (key, offset, len, mfu, t2, cksum) in entries {
        b[at..at + key_len].copy_from_slice(&key);
        at += key_len;
        b[at..at + 8].copy_from_slice(&offset.to_le_bytes());
        b[at + 8..at + 12].copy_from_slice(&len.to_le_bytes());
        let flags = u32::from(mfu) | u32::from(t2) << 1;
        b[at + 12..at + 16].copy_from_slice(&flags.to_le_bytes());
        b[at + 16..at + 24].copy_from_slice(&cksum.to_le_bytes());
        at += ENTRY_FIXED;
    }
    for key in tombstones {
        b[at..at + key_len].copy_from_slice(key);
        at += key_len;
    }
    let sum = checksum(&b[16..]);
    b[8..16].copy_from_slice(&sum.to_le_bytes());
    sum
}

/// Decodes a log block read from where `ptr` points; `None` if it is not
/// the block `ptr` describes (torn, overwritten, damaged).
pub(super) fn decode_log(b: &[u8], ptr: &LogPtr, key_len: usize) -> Option<LogBlock> {
    if b.len() < LOG_FIXED || &b[0..8] != LOG_MAGIC {
        return None;
    }
    let sum = checksum(&b[16..]);
    if u64_at(b, 8) != sum || sum != ptr.cksum || u64_at(b, 16) != ptr.generation {
        return None;
    }
    let n = u32_at(b, 64) as usize;
    let t = u32_at(b, 72) as usize;
    if u32_at(b, 68) as usize != key_len
        || n > b.len()
        || t > b.len()
        || log_len(n, t, key_len) != b.len() as u64
    {
        return None;
    }
    let mut entries = Vec::with_capacity(n);
    let mut at = LOG_FIXED;
    for _ in 0..n {
        let key = b[at..at + key_len].to_vec();
        at += key_len;
        entries.push(LogEntry {
            key,
            offset: u64_at(b, at),
            len: u32_at(b, at + 8),
            mfu: u32_at(b, at + 12) & 1 == 1,
            t2: u32_at(b, at + 12) & 2 == 2,
            cksum: u64_at(b, at + 16),
        });
        at += ENTRY_FIXED;
    }
    let tombstones = (0..t)
        .map(|i| b[at + i * key_len..at + (i + 1) * key_len].to_vec())
        .collect();
    Some(LogBlock {
        generation: ptr.generation,
        prev: LogPtr::get(&b[24..56]),
        start: u64_at(b, 56),
        entries,
        tombstones,
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip_and_damage() {
        let h = Header {
            identity: 7,
            device_bytes: 1 << 30,
            key_len: 16,
            newest: LogPtr {
                offset: 8192,
                len: 4096,
                cksum: 99,
                generation: 3,
            },
            trim: (4096, 12288),
            dirty: true,
        };
        let mut b = vec![0u8; 4096];
        assert_eq!(Header::decode(&b), Err(HeaderProblem::Blank));
        h.encode(&mut b);
        assert_eq!(Header::decode(&b), Ok(h));
        b[100] ^= 1;
        assert_eq!(Header::decode(&b), Err(HeaderProblem::Unreadable));
    }

    #[test]
    fn log_roundtrip_and_damage() {
        let entries = vec![
            (vec![1u8; 8], 4096u64, 10u32, true, false, 5u64),
            (vec![2u8; 8], 8192, 4096, false, true, 6),
        ];
        let tombstones = vec![vec![7u8; 8], vec![9u8; 8]];
        let len = log_len(entries.len(), tombstones.len(), 8) as usize;
        assert_eq!(len, 4096);
        let mut b = vec![0u8; len];
        let prev = LogPtr::default();
        let sum = encode_log(
            &mut b,
            4,
            &prev,
            4096,
            8,
            entries.clone().into_iter(),
            &tombstones,
        );
        let ptr = LogPtr {
            offset: 12288,
            len: len as u32,
            cksum: sum,
            generation: 4,
        };
        let log = decode_log(&b, &ptr, 8).expect("decodes");
        assert_eq!((log.generation, log.start, log.entries.len()), (4, 4096, 2));
        assert_eq!(log.entries[0].key, vec![1u8; 8]);
        assert!(log.entries[0].mfu && !log.entries[1].mfu);
        assert!(!log.entries[0].t2 && log.entries[1].t2);
        assert_eq!(log.tombstones, tombstones);
        // Another generation, key length, or a flipped byte: rejected.
        assert!(decode_log(
            &b,
            &LogPtr {
                generation: 5,
                ..ptr
            },
            8
        )
        .is_none());
        assert!(decode_log(&b, &ptr, 16).is_none());
        b[200] ^= 0x40;
        assert!(decode_log(&b, &ptr, 8).is_none());
    }
}
