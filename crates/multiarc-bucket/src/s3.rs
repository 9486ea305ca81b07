//! `s3://bucket[/prefix]` sources and the S3 client for them.

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore, RetryConfig};
use std::time::Duration;

/// A bucket, and the prefix inside it that is the mount's root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Source {
    /// The bucket's name.
    pub bucket: String,
    /// The key prefix of the root, without leading or trailing `/` (empty:
    /// the whole bucket).
    pub prefix: String,
}

impl S3Source {
    /// Whether `text` names a bucket (`s3://...`) rather than a directory.
    pub fn is_s3(text: &str) -> bool {
        text.starts_with("s3://")
    }

    /// Parses `s3://bucket` or `s3://bucket/some/prefix[/]`.
    pub fn parse(text: &str) -> Result<S3Source, String> {
        let rest = text
            .strip_prefix("s3://")
            .ok_or_else(|| format!("{text:?} is not an s3://bucket[/prefix] address"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-._".contains(&b));
        if !valid_bucket {
            return Err(format!(
                "{text:?}: {bucket:?} is not a bucket name (3 to 63 lowercase letters, digits, '-', '.')"
            ));
        }
        let prefix = prefix.trim_matches('/');
        if !prefix.is_empty() && Path::parse(prefix).is_err() {
            return Err(format!(
                "{text:?}: the prefix {prefix:?} is not a valid key prefix (empty, '.' or '..' parts)"
            ));
        }
        Ok(S3Source {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// The root as a store path (`None` for the whole bucket).
    pub fn root(&self) -> Option<Path> {
        (!self.prefix.is_empty()).then(|| Path::from_iter(self.prefix.split('/')))
    }
}

impl std::fmt::Display for S3Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "s3://{}", self.bucket)
        } else {
            write!(f, "s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// Where and how to reach the bucket.
#[derive(Clone, Debug, Default)]
pub struct S3Options {
    /// The endpoint (`http://127.0.0.1:3900`); path-style requests, plain
    /// HTTP allowed when it says `http://`. `None`: `AWS_ENDPOINT_URL` or
    /// AWS itself.
    pub endpoint: Option<String>,
    /// The region (`None`: `AWS_REGION`, or `us-east-1`).
    pub region: Option<String>,
    /// How long one request may take before it is retried or fails.
    pub request_timeout: Duration,
    /// How long a failing request is retried in all before its error is
    /// returned (reads then get `EIO`).
    pub retry_timeout: Duration,
}

impl S3Options {
    /// The defaults: 30 s per request, retried for at most 10 s.
    pub fn new(endpoint: Option<String>, region: Option<String>) -> S3Options {
        S3Options {
            endpoint,
            region,
            request_timeout: Duration::from_secs(30),
            retry_timeout: Duration::from_secs(10),
        }
    }
}

/// The S3 client for `source`: credentials and settings from the `AWS_*`
/// environment variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL`, ...), then
/// `options` over them.
pub fn s3_store(source: &S3Source, options: &S3Options) -> object_store::Result<AmazonS3> {
    let mut builder = AmazonS3Builder::from_env().with_bucket_name(&source.bucket);
    if std::env::var_os("AWS_REGION").is_none() && std::env::var_os("AWS_DEFAULT_REGION").is_none()
    {
        builder = builder.with_region("us-east-1");
    }
    if let Some(region) = &options.region {
        builder = builder.with_region(region);
    }
    if let Some(endpoint) = &options.endpoint {
        builder = builder
            .with_endpoint(endpoint)
            .with_allow_http(endpoint.starts_with("http://"))
            .with_virtual_hosted_style_request(false);
    }
    // Set key by key: `with_client_options` would replace the options
    // the environment and `with_allow_http` set.
    let timeout = |d: Duration| format!("{}ms", d.as_millis());
    builder
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
            timeout(options.request_timeout),
        )
        .with_config(
            AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
            timeout(Duration::from_secs(5)),
        )
        .with_retry(RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: 4,
            retry_timeout: options.retry_timeout,
        })
        .build()
}

/// Checks that the bucket answers: one listing request under the root
/// (on its own small runtime; call it outside any runtime). The error is
/// one line naming the bucket and the cause.
pub fn check_bucket(
    store: &dyn ObjectStore,
    source: &S3Source,
    timeout: Duration,
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting a runtime: {e}"))?;
    let root = source.root();
    let listed = runtime.block_on(async {
        use futures::StreamExt;
        tokio::time::timeout(timeout, store.list(root.as_ref()).next()).await
    });
    match listed {
        Err(_) => Err(format!(
            "{source}: no answer from the store in {} s",
            timeout.as_secs_f64()
        )),
        Ok(Some(Err(e))) => Err(format!("{source}: {}", one_line(&e))),
        Ok(_) => Ok(()),
    }
}

/// An error and its sources on one line.
pub(crate) fn one_line(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse() {
        let s = S3Source::parse("s3://my-bucket").unwrap();
        assert_eq!((s.bucket.as_str(), s.prefix.as_str()), ("my-bucket", ""));
        assert_eq!(s.root(), None);
        let s = S3Source::parse("s3://b.x-1/a/b/").unwrap();
        assert_eq!((s.bucket.as_str(), s.prefix.as_str()), ("b.x-1", "a/b"));
        assert_eq!(s.root().unwrap().as_ref(), "a/b");
        assert_eq!(s.to_string(), "s3://b.x-1/a/b");
        for bad in [
            "s3://",
            "s3://A",
            "s3://ab",
            "/tmp/x",
            "s3://bucket/a//b",
            "s3://bucket/a/../b",
        ] {
            assert!(S3Source::parse(bad).is_err(), "{bad}");
        }
        assert!(S3Source::is_s3("s3://x") && !S3Source::is_s3("/s3://x"));
    }
}
