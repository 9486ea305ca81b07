//! What the Garage tests share: starting Garage (or skipping), the S3
//! client to a node, and object contents that name their own version in
//! every 8 bytes.

#![allow(dead_code)]

use multiarc_garage_harness::{ForTests, Garage};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{BackoffConfig, RetryConfig};
use std::ops::Range;
use std::time::Duration;

/// A Garage of `nodes` nodes; `None` (after printing why) where the
/// binary is absent and `CI` is not set. Any other failure panics with the
/// harness's message (which step, the nodes' log tails).
pub fn start_garage(nodes: usize) -> Option<Garage> {
    match Garage::start_for_tests(nodes) {
        Ok(ForTests::Running(garage)) => Some(garage),
        Ok(ForTests::Skip { reason }) => {
            eprintln!("skipped: {reason}");
            None
        }
        Err(e) => panic!("starting a {nodes}-node Garage: {e}"),
    }
}

/// The S3 credentials and place of a bucket, as plain strings (to pass to
/// another process).
#[derive(Clone, Debug)]
pub struct S3Target {
    pub endpoint: String,
    pub region: String,
    pub bucket: String,
    pub access_key_id: String,
    pub secret_access_key: String,
}

impl S3Target {
    /// Node `node` of `garage`, its bucket and key.
    pub fn of(garage: &Garage, node: usize) -> S3Target {
        S3Target {
            endpoint: garage.endpoint(node),
            region: garage.region.clone(),
            bucket: garage.bucket.clone(),
            access_key_id: garage.access_key_id.clone(),
            secret_access_key: garage.secret_access_key.clone(),
        }
    }

    /// object_store's S3 client for it: path-style, plain HTTP, a few
    /// quick retries (the tests want errors, not minutes of backoff).
    pub fn client(&self) -> AmazonS3 {
        AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_region(&self.region)
            .with_bucket_name(&self.bucket)
            .with_access_key_id(&self.access_key_id)
            .with_secret_access_key(&self.secret_access_key)
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false)
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(20),
                    max_backoff: Duration::from_millis(200),
                    base: 2.0,
                },
                max_retries: 2,
                retry_timeout: Duration::from_secs(10),
            })
            .build()
            .expect("an S3 client")
    }
}

/// The 8-byte word at index `index` of version `version` of object
/// `object`: a marker byte, the object, the version and the index, so
/// any 8 aligned bytes say where they belong.
fn word(object: u8, version: u16, index: u64) -> u64 {
    (0xA5 << 56) | (u64::from(object) << 48) | (u64::from(version) << 32) | (index & 0xFFFF_FFFF)
}

/// Bytes `range` of version `version` of object `object`.
pub fn version_bytes(object: u8, version: u16, range: Range<u64>) -> Vec<u8> {
    let words = range.start / 8..range.end.div_ceil(8);
    let mut bytes = Vec::with_capacity(((words.end - words.start) * 8) as usize);
    for i in words {
        bytes.extend_from_slice(&word(object, version, i).to_le_bytes());
    }
    let skip = (range.start % 8) as usize;
    bytes.truncate(skip + (range.end - range.start) as usize);
    bytes.drain(..skip);
    bytes
}

/// The version that `got`, read at `range` of object `object`, is all of;
/// an error describing the first byte that belongs to no single version
/// (a mix, or bytes of another object), or a length that is not the
/// range's (short bytes). `range` must hold an aligned 8-byte word.
pub fn identify(got: &[u8], object: u8, range: Range<u64>) -> Result<u16, String> {
    if got.len() as u64 != range.end - range.start {
        return Err(format!(
            "{} bytes where range {range:?} has {}",
            got.len(),
            range.end - range.start
        ));
    }
    let first_word = range.start.div_ceil(8) * 8;
    let at = (first_word - range.start) as usize;
    let Some(bytes) = got.get(at..at + 8) else {
        return Err(format!("range {range:?} holds no whole word to identify"));
    };
    let decoded = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
    let version = ((decoded >> 32) & 0xFFFF) as u16;
    let want = version_bytes(object, version, range.clone());
    if got == want.as_slice() {
        return Ok(version);
    }
    if let Some(k) = got.iter().zip(&want).position(|(g, w)| g != w) {
        let pos = range.start + k as u64;
        let word_start = pos / 8 * 8;
        let there = (word_start >= range.start && word_start + 8 <= range.end)
            .then(|| (word_start - range.start) as usize)
            .map(|i| u64::from_le_bytes(got[i..i + 8].try_into().expect("8 bytes")))
            .map(|w| {
                format!(
                    "object {} version {} word {}",
                    (w >> 48) & 0xFF,
                    (w >> 32) & 0xFFFF,
                    w & 0xFFFF_FFFF
                )
            })
            .unwrap_or_else(|| "a partial word".into());
        return Err(format!(
            "range {range:?} of object {object}: starts as version {version} but byte {pos} \
             is {:#04x}, not {:#04x} ({there} there)",
            got[k], want[k]
        ));
    }
    Ok(version)
}
