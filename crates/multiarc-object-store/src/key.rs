//! Block keys: which bytes of which version of which object a cached block
//! holds, in a fixed-length form the second tier can keep across restarts.

use multiarc::PersistentKey;
use object_store::path::Path;
use object_store::ObjectMeta;
use sha2::{Digest, Sha256};

/// The key of one cached block: the SHA-256 digest of the object's full
/// identity (location, ETag, version, size, ...: see the crate docs, *Keys*)
/// and the block's index in the object.
///
/// 40 bytes, so it can be a [`PersistentKey`]: the second tier writes it
/// beside the block and finds it again after a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectBlockKey {
    /// SHA-256 of the object's identity.
    pub identity: [u8; 32],
    /// The block's index: it holds bytes `block * block_size ..` of the object.
    pub block: u64,
}

impl PersistentKey for ObjectBlockKey {
    const ENCODED_LEN: usize = 40;
    fn encode(&self, out: &mut [u8]) {
        out[..32].copy_from_slice(&self.identity);
        out[32..40].copy_from_slice(&self.block.to_le_bytes());
    }
    fn decode(bytes: &[u8]) -> Self {
        let mut identity = [0u8; 32];
        identity.copy_from_slice(&bytes[..32]);
        let block = u64::from_le_bytes(bytes[32..40].try_into().expect("8 bytes"));
        ObjectBlockKey { identity, block }
    }
}

/// The identity of one version of one object, cut into blocks of one size:
/// everything that decides which bytes block `i` holds.
///
/// It hashes, each field length-prefixed (so no two different field lists
/// hash the same input): a format tag, the store's namespace (by default
/// the inner store's `Display`, e.g. `AmazonS3(bucket)`), the location,
/// the ETag and the version (each with a presence byte), the size, the
/// last-modified time and the block size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ObjectIdentity {
    digest: [u8; 32],
}

impl ObjectIdentity {
    pub(crate) fn of(
        namespace: &str,
        location: &Path,
        meta: &ObjectMeta,
        block_size: u64,
    ) -> ObjectIdentity {
        fn field(hash: &mut Sha256, bytes: &[u8]) {
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        }
        fn optional(hash: &mut Sha256, value: Option<&str>) {
            match value {
                Some(v) => {
                    hash.update([1u8]);
                    field(hash, v.as_bytes());
                }
                None => hash.update([0u8]),
            }
        }
        let mut hash = Sha256::new();
        field(&mut hash, b"multiarc-object-store block v1");
        field(&mut hash, namespace.as_bytes());
        field(&mut hash, location.as_ref().as_bytes());
        optional(&mut hash, meta.e_tag.as_deref());
        optional(&mut hash, meta.version.as_deref());
        hash.update(meta.size.to_le_bytes());
        let modified = meta.last_modified;
        hash.update(modified.timestamp().to_le_bytes());
        hash.update(modified.timestamp_subsec_nanos().to_le_bytes());
        hash.update(block_size.to_le_bytes());
        ObjectIdentity {
            digest: hash.finalize().into(),
        }
    }

    pub(crate) fn block(&self, block: u64) -> ObjectBlockKey {
        ObjectBlockKey {
            identity: self.digest,
            block,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(e_tag: Option<&str>, version: Option<&str>, size: u64) -> ObjectMeta {
        ObjectMeta {
            location: Path::from("x"),
            last_modified: Default::default(),
            size,
            e_tag: e_tag.map(str::to_owned),
            version: version.map(str::to_owned),
        }
    }

    #[test]
    fn key_round_trips_through_its_encoding() {
        let id = ObjectIdentity::of("ns", &Path::from("a/b"), &meta(Some("e"), None, 10), 4096);
        let key = id.block(u64::MAX - 3);
        let mut bytes = [0u8; ObjectBlockKey::ENCODED_LEN];
        key.encode(&mut bytes);
        assert_eq!(ObjectBlockKey::decode(&bytes), key);
    }

    #[test]
    fn every_field_changes_the_identity() {
        let base = || {
            (
                "ns",
                Path::from("a/b"),
                meta(Some("e"), Some("v"), 10),
                4096u64,
            )
        };
        let (n, p, m, b) = base();
        let reference = ObjectIdentity::of(n, &p, &m, b);
        let variants = [
            ObjectIdentity::of("ns2", &p, &m, b),
            ObjectIdentity::of(n, &Path::from("a/c"), &m, b),
            ObjectIdentity::of(n, &p, &meta(Some("f"), Some("v"), 10), b),
            ObjectIdentity::of(n, &p, &meta(None, Some("v"), 10), b),
            ObjectIdentity::of(n, &p, &meta(Some("e"), None, 10), b),
            ObjectIdentity::of(n, &p, &meta(Some("e"), Some("v"), 11), b),
            ObjectIdentity::of(n, &p, &m, 8192),
            // The ETag's bytes moved into the version: the presence bytes
            // and length prefixes keep them apart.
            ObjectIdentity::of(n, &p, &meta(None, Some("e"), 10), b),
        ];
        for v in variants {
            assert_ne!(v, reference);
        }
        assert_eq!(ObjectIdentity::of(n, &p, &m, b), reference);
    }
}
