//! [`ObjectStore013`]: an object_store **0.13** `ObjectStore` over an
//! object_store **0.14** one, such as [`CachedStore`](crate::CachedStore).
//! DataFusion 55 (and parquet 59) take 0.13's trait; this crate is on 0.14
//! (parquet 60). The two traits have the same methods with the same
//! signatures; the crates' types are distinct, and 0.14's results carry
//! `extensions` 0.13's have no place for. So the wrapper converts values,
//! one to one, and calls the inner store (its `get_ranges` too: the cached
//! store serves several ranges of one object from one version check).
//!
//! With the `object-store-013` feature:
//!
//! ```ignore
//! use multiarc_object_store::{CachedStore, object_store_013::ObjectStore013};
//! let s3 = object_store::aws::AmazonS3Builder::from_env().with_bucket_name("tpch").build()?;
//! let cached = CachedStore::builder(s3).max_bytes(4 << 30).build()?;
//! let store = Arc::new(ObjectStore013::new(Arc::new(cached)));
//! ctx.register_object_store(&url::Url::parse("s3://tpch")?, store); // DataFusion 55
//! ```

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};

use object_store as os14;
use object_store_013 as os13;

const STORE: &str = "ObjectStore013";

/// An object_store 0.13 `ObjectStore` that forwards every call to an object_store 0.14 one.
pub struct ObjectStore013<S: ?Sized> {
    inner: Arc<S>,
}

impl<S: os14::ObjectStore + ?Sized> ObjectStore013<S> {
    /// `inner` as an object_store 0.13 store.
    pub fn new(inner: Arc<S>) -> Self {
        ObjectStore013 { inner }
    }

    /// The 0.14 store (e.g. to read `CachedStore::stats()` after a query).
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }
}

impl<S: os14::ObjectStore + ?Sized> fmt::Display for ObjectStore013<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectStore013({})", self.inner)
    }
}

impl<S: os14::ObjectStore + ?Sized> fmt::Debug for ObjectStore013<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStore013")
            .field("inner", &self.inner)
            .finish()
    }
}

#[async_trait]
impl<S: os14::ObjectStore + ?Sized> os13::ObjectStore for ObjectStore013<S> {
    async fn put_opts(
        &self,
        location: &os13::path::Path,
        payload: os13::PutPayload,
        opts: os13::PutOptions,
    ) -> os13::Result<os13::PutResult> {
        let location = path_to_14(location)?;
        let opts = put_options_to_14(opts)?;
        let result = self
            .inner
            .put_opts(&location, payload_to_14(payload), opts)
            .await;
        result.map(put_result_to_13).map_err(err_to_13)
    }

    async fn put_multipart_opts(
        &self,
        location: &os13::path::Path,
        opts: os13::PutMultipartOptions,
    ) -> os13::Result<Box<dyn os13::MultipartUpload>> {
        let location = path_to_14(location)?;
        let opts = os14::PutMultipartOptions {
            tags: tags_to_14(&opts.tags),
            attributes: attributes_to_14(&opts.attributes)?,
            extensions: opts.extensions,
        };
        let upload = self
            .inner
            .put_multipart_opts(&location, opts)
            .await
            .map_err(err_to_13)?;
        Ok(Box::new(Upload013 { inner: upload }))
    }

    async fn get_opts(
        &self,
        location: &os13::path::Path,
        options: os13::GetOptions,
    ) -> os13::Result<os13::GetResult> {
        let location = path_to_14(location)?;
        let result = self
            .inner
            .get_opts(&location, get_options_to_14(options))
            .await
            .map_err(err_to_13)?;
        get_result_to_13(result)
    }

    // Forwarded, not left to the 0.13 default (which would split into get_range calls and coalesce):
    // CachedStore serves several ranges of one object from one version check and adjacent blocks.
    async fn get_ranges(
        &self,
        location: &os13::path::Path,
        ranges: &[Range<u64>],
    ) -> os13::Result<Vec<Bytes>> {
        let location = path_to_14(location)?;
        self.inner
            .get_ranges(&location, ranges)
            .await
            .map_err(err_to_13)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, os13::Result<os13::path::Path>>,
    ) -> BoxStream<'static, os13::Result<os13::path::Path>> {
        let locations = locations
            .map(|item| match item {
                Ok(p) => path_to_14(&p).map_err(err_to_14),
                Err(e) => Err(err_to_14(e)),
            })
            .boxed();
        self.inner
            .delete_stream(locations)
            .map(|item| item.map_err(err_to_13).and_then(|p| path_to_13(&p)))
            .boxed()
    }

    fn list(
        &self,
        prefix: Option<&os13::path::Path>,
    ) -> BoxStream<'static, os13::Result<os13::ObjectMeta>> {
        let prefix = match prefix.map(path_to_14).transpose() {
            Ok(p) => p,
            Err(e) => return stream::once(async move { Err(e) }).boxed(),
        };
        self.inner
            .list(prefix.as_ref())
            .map(|m| m.map_err(err_to_13).and_then(meta_to_13))
            .boxed()
    }

    fn list_with_offset(
        &self,
        prefix: Option<&os13::path::Path>,
        offset: &os13::path::Path,
    ) -> BoxStream<'static, os13::Result<os13::ObjectMeta>> {
        let (prefix, offset) = match (prefix.map(path_to_14).transpose(), path_to_14(offset)) {
            (Ok(p), Ok(o)) => (p, o),
            (Err(e), _) | (_, Err(e)) => return stream::once(async move { Err(e) }).boxed(),
        };
        self.inner
            .list_with_offset(prefix.as_ref(), &offset)
            .map(|m| m.map_err(err_to_13).and_then(meta_to_13))
            .boxed()
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&os13::path::Path>,
    ) -> os13::Result<os13::ListResult> {
        let prefix = prefix.map(path_to_14).transpose()?;
        let result = self
            .inner
            .list_with_delimiter(prefix.as_ref())
            .await
            .map_err(err_to_13)?;
        Ok(os13::ListResult {
            common_prefixes: result
                .common_prefixes
                .iter()
                .map(path_to_13)
                .collect::<os13::Result<_>>()?,
            objects: result
                .objects
                .into_iter()
                .map(meta_to_13)
                .collect::<os13::Result<_>>()?,
        })
    }

    async fn copy_opts(
        &self,
        from: &os13::path::Path,
        to: &os13::path::Path,
        options: os13::CopyOptions,
    ) -> os13::Result<()> {
        let (from, to) = (path_to_14(from)?, path_to_14(to)?);
        let mode = match options.mode {
            os13::CopyMode::Overwrite => os14::CopyMode::Overwrite,
            os13::CopyMode::Create => os14::CopyMode::Create,
        };
        let options = os14::CopyOptions {
            mode,
            extensions: options.extensions,
        };
        self.inner
            .copy_opts(&from, &to, options)
            .await
            .map_err(err_to_13)
    }

    // Forwarded so the inner store's own rename (CachedStore invalidates both paths) is used.
    async fn rename_opts(
        &self,
        from: &os13::path::Path,
        to: &os13::path::Path,
        options: os13::RenameOptions,
    ) -> os13::Result<()> {
        let (from, to) = (path_to_14(from)?, path_to_14(to)?);
        let target_mode = match options.target_mode {
            os13::RenameTargetMode::Overwrite => os14::RenameTargetMode::Overwrite,
            os13::RenameTargetMode::Create => os14::RenameTargetMode::Create,
        };
        let options = os14::RenameOptions {
            target_mode,
            extensions: options.extensions,
        };
        self.inner
            .rename_opts(&from, &to, options)
            .await
            .map_err(err_to_13)
    }
}

/// A 0.14 multipart upload seen as a 0.13 one.
#[derive(Debug)]
struct Upload013 {
    inner: Box<dyn os14::MultipartUpload>,
}

#[async_trait]
impl os13::MultipartUpload for Upload013 {
    fn put_part(&mut self, data: os13::PutPayload) -> os13::UploadPart {
        let part = self.inner.put_part(payload_to_14(data));
        Box::pin(async move { part.await.map_err(err_to_13) })
    }

    async fn complete(&mut self) -> os13::Result<os13::PutResult> {
        self.inner
            .complete()
            .await
            .map(put_result_to_13)
            .map_err(err_to_13)
    }

    async fn abort(&mut self) -> os13::Result<()> {
        self.inner.abort().await.map_err(err_to_13)
    }
}

// ---- paths ------------------------------------------------------------------------------------
// `Path` keeps its already-encoded string; both versions validate it with the same rules (src/path is
// byte-identical in 0.13.2 and 0.14.1), so re-parsing the raw string is an identity.

fn path_to_14(p: &os13::path::Path) -> os13::Result<os14::path::Path> {
    os14::path::Path::parse(p).map_err(generic_13)
}

fn path_to_13(p: &os14::path::Path) -> os13::Result<os13::path::Path> {
    os13::path::Path::parse(p).map_err(generic_13)
}

// ---- requests (0.13 -> 0.14) ------------------------------------------------------------------

fn payload_to_14(payload: os13::PutPayload) -> os14::PutPayload {
    // Both are an Arc<[Bytes]>; this moves the Bytes handles, not the data.
    payload.into_iter().collect()
}

fn get_options_to_14(o: os13::GetOptions) -> os14::GetOptions {
    os14::GetOptions {
        if_match: o.if_match,
        if_none_match: o.if_none_match,
        if_modified_since: o.if_modified_since,
        if_unmodified_since: o.if_unmodified_since,
        range: o.range.map(|r| match r {
            os13::GetRange::Bounded(r) => os14::GetRange::Bounded(r),
            os13::GetRange::Offset(o) => os14::GetRange::Offset(o),
            os13::GetRange::Suffix(n) => os14::GetRange::Suffix(n),
        }),
        version: o.version,
        head: o.head,
        // http::Extensions: the same type in both (both depend on http 1.x).
        extensions: o.extensions,
    }
}

fn put_options_to_14(o: os13::PutOptions) -> os13::Result<os14::PutOptions> {
    let mode = match o.mode {
        os13::PutMode::Overwrite => os14::PutMode::Overwrite,
        os13::PutMode::Create => os14::PutMode::Create,
        os13::PutMode::Update(v) => os14::PutMode::Update(os14::UpdateVersion {
            e_tag: v.e_tag,
            version: v.version,
        }),
    };
    Ok(os14::PutOptions {
        mode,
        tags: tags_to_14(&o.tags),
        attributes: attributes_to_14(&o.attributes)?,
        extensions: o.extensions,
    })
}

fn tags_to_14(tags: &os13::TagSet) -> os14::TagSet {
    let mut out = os14::TagSet::default();
    for (k, v) in form_urlencoded::parse(tags.encoded().as_bytes()) {
        out.push(&k, &v);
    }
    out
}

fn attributes_to_14(attributes: &os13::Attributes) -> os13::Result<os14::Attributes> {
    let mut out = os14::Attributes::with_capacity(attributes.len());
    for (k, v) in attributes.iter() {
        let key = match k {
            os13::Attribute::ContentDisposition => os14::Attribute::ContentDisposition,
            os13::Attribute::ContentEncoding => os14::Attribute::ContentEncoding,
            os13::Attribute::ContentLanguage => os14::Attribute::ContentLanguage,
            os13::Attribute::ContentType => os14::Attribute::ContentType,
            os13::Attribute::CacheControl => os14::Attribute::CacheControl,
            os13::Attribute::StorageClass => os14::Attribute::StorageClass,
            os13::Attribute::Metadata(m) => os14::Attribute::Metadata(m.clone()),
            // Attribute is #[non_exhaustive]: refuse what this adapter cannot carry rather than drop it.
            other => {
                return Err(os13::Error::NotSupported {
                    source: format!("{STORE}: attribute {other:?}").into(),
                });
            }
        };
        out.insert(
            key,
            os14::AttributeValue::from(AsRef::<str>::as_ref(v).to_owned()),
        );
    }
    Ok(out)
}

// ---- results (0.14 -> 0.13) -------------------------------------------------------------------

fn meta_to_13(m: os14::ObjectMeta) -> os13::Result<os13::ObjectMeta> {
    Ok(os13::ObjectMeta {
        location: path_to_13(&m.location)?,
        last_modified: m.last_modified,
        size: m.size,
        e_tag: m.e_tag,
        version: m.version,
    })
}

fn put_result_to_13(r: os14::PutResult) -> os13::PutResult {
    // 0.14's `extensions` has no place in 0.13.
    os13::PutResult {
        e_tag: r.e_tag,
        version: r.version,
    }
}

fn get_result_to_13(r: os14::GetResult) -> os13::Result<os13::GetResult> {
    let meta = meta_to_13(r.meta.clone())?;
    let range = r.range.clone();
    let attributes = attributes_to_13(&r.attributes);
    // into_stream() also turns a 0.14 `GetResultPayload::File` (only with its `fs` feature, e.g. a
    // LocalFileSystem inner) into a stream, so no cfg'd variant of the other crate is named here.
    let payload = r
        .into_stream()
        .map(|chunk| chunk.map_err(err_to_13))
        .boxed();
    Ok(os13::GetResult {
        payload: os13::GetResultPayload::Stream(payload),
        meta,
        range,
        attributes,
    })
}

fn attributes_to_13(attributes: &os14::Attributes) -> os13::Attributes {
    let mut out = os13::Attributes::with_capacity(attributes.len());
    for (k, v) in attributes.iter() {
        let key = match k {
            os14::Attribute::ContentDisposition => os13::Attribute::ContentDisposition,
            os14::Attribute::ContentEncoding => os13::Attribute::ContentEncoding,
            os14::Attribute::ContentLanguage => os13::Attribute::ContentLanguage,
            os14::Attribute::ContentType => os13::Attribute::ContentType,
            os14::Attribute::CacheControl => os13::Attribute::CacheControl,
            os14::Attribute::StorageClass => os13::Attribute::StorageClass,
            os14::Attribute::Metadata(m) => os13::Attribute::Metadata(m.clone()),
            _ => continue, // a newer 0.14 attribute 0.13 cannot name; readers here do not use it
        };
        out.insert(
            key,
            os13::AttributeValue::from(AsRef::<str>::as_ref(v).to_owned()),
        );
    }
    out
}

// ---- errors -----------------------------------------------------------------------------------
// Same variants in 0.13.2 and 0.14.1. `InvalidPath` holds the crate's own path::Error and `JoinError`
// exists only with the crate's `tokio` feature, so both (and future variants: the enum is
// #[non_exhaustive]) go through the `Generic` fallback with the original error as source.

fn generic_13(e: impl std::error::Error + Send + Sync + 'static) -> os13::Error {
    os13::Error::Generic {
        store: STORE,
        source: Box::new(e),
    }
}

fn err_to_13(e: os14::Error) -> os13::Error {
    use os13::Error as E13;
    use os14::Error as E14;
    match e {
        E14::Generic { store, source } => E13::Generic { store, source },
        E14::NotFound { path, source } => E13::NotFound { path, source },
        E14::NotSupported { source } => E13::NotSupported { source },
        E14::AlreadyExists { path, source } => E13::AlreadyExists { path, source },
        E14::Precondition { path, source } => E13::Precondition { path, source },
        E14::NotModified { path, source } => E13::NotModified { path, source },
        E14::NotImplemented {
            operation,
            implementer,
        } => E13::NotImplemented {
            operation,
            implementer,
        },
        E14::PermissionDenied { path, source } => E13::PermissionDenied { path, source },
        E14::Unauthenticated { path, source } => E13::Unauthenticated { path, source },
        E14::UnknownConfigurationKey { store, key } => E13::UnknownConfigurationKey { store, key },
        other => generic_13(other),
    }
}

fn err_to_14(e: os13::Error) -> os14::Error {
    use os13::Error as E13;
    use os14::Error as E14;
    match e {
        E13::Generic { store, source } => E14::Generic { store, source },
        E13::NotFound { path, source } => E14::NotFound { path, source },
        E13::NotSupported { source } => E14::NotSupported { source },
        E13::AlreadyExists { path, source } => E14::AlreadyExists { path, source },
        E13::Precondition { path, source } => E14::Precondition { path, source },
        E13::NotModified { path, source } => E14::NotModified { path, source },
        E13::NotImplemented {
            operation,
            implementer,
        } => E14::NotImplemented {
            operation,
            implementer,
        },
        E13::PermissionDenied { path, source } => E14::PermissionDenied { path, source },
        E13::Unauthenticated { path, source } => E14::Unauthenticated { path, source },
        E13::UnknownConfigurationKey { store, key } => E14::UnknownConfigurationKey { store, key },
        other => E14::Generic {
            store: STORE,
            source: Box::new(other),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store_013::{ObjectStore as _, ObjectStoreExt as _};

    fn run<F: std::future::Future>(f: F) -> F::Output {
        futures::executor::block_on(f)
    }

    #[test]
    fn reads_writes_and_lists_go_through_and_errors_keep_their_kind() {
        run(async {
            let inner = Arc::new(os14::memory::InMemory::new());
            let store = ObjectStore013::new(inner);
            let path = os13::path::Path::from("a/b.parquet");
            store
                .put(&path, Bytes::from_static(b"0123456789").into())
                .await
                .unwrap();
            let head = store.head(&path).await.unwrap();
            assert_eq!(head.size, 10);
            assert!(head.e_tag.is_some());
            let got = store.get_range(&path, 2..5).await.unwrap();
            assert_eq!(&got[..], b"234");
            let parts = os13::ObjectStore::get_ranges(&store, &path, &[0..1, 8..10])
                .await
                .unwrap();
            assert_eq!(
                parts,
                vec![Bytes::from_static(b"0"), Bytes::from_static(b"89")]
            );
            let listed = store
                .list_with_delimiter(Some(&os13::path::Path::from("a")))
                .await
                .unwrap();
            assert_eq!(listed.objects.len(), 1);
            let missing = store
                .head(&os13::path::Path::from("nope"))
                .await
                .unwrap_err();
            assert!(matches!(missing, os13::Error::NotFound { .. }), "{missing}");
            let stale = store
                .get_opts(
                    &path,
                    os13::GetOptions {
                        if_match: Some("\"not-it\"".into()),
                        ..Default::default()
                    },
                )
                .await
                .unwrap_err();
            assert!(matches!(stale, os13::Error::Precondition { .. }), "{stale}");
        });
    }

    #[test]
    fn a_cached_store_serves_through_the_wrapper_from_its_blocks() {
        run(async {
            let inner = os14::memory::InMemory::new();
            let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
            let path = os14::path::Path::from("t/f");
            os14::ObjectStoreExt::put(&inner, &path, Bytes::from(data.clone()).into())
                .await
                .unwrap();
            let cached = crate::CachedStore::builder(inner)
                .max_bytes(1 << 20)
                .block_size(4096)
                .build()
                .unwrap();
            let cached = Arc::new(cached);
            let store = ObjectStore013::new(Arc::clone(&cached));
            let p13 = os13::path::Path::from("t/f");
            for _ in 0..2 {
                let got = store.get_range(&p13, 5000..20_000).await.unwrap();
                assert_eq!(&got[..], &data[5000..20_000]);
            }
            let stats = cached.stats();
            assert!(stats.memory_hits > 0, "{stats:?}");
        });
    }
}
