//! Errors of block fetches, and how a shared one is handed to each reader
//! with its kind (`NotFound`, `Precondition`, ...) kept.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

/// The name the cached store gives in `object_store::Error::Generic`.
pub(crate) const STORE: &str = "CachedStore";

/// Why a block fetch (or a metadata fetch) gave no bytes.
#[derive(Debug)]
pub(crate) enum FetchError {
    /// The object is not the version the read started with: a conditional
    /// fetch failed, or the response's ETag, version, size or length
    /// differed. The read starts again with fresh metadata.
    Changed(String),
    /// The store's error.
    Store(Arc<object_store::Error>),
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::Changed(why) => write!(f, "the object changed during the read: {why}"),
            FetchError::Store(e) => e.fmt(f),
        }
    }
}

/// The source of a shared store error, as each reader's own error gets it:
/// displays (and chains to) the original's source.
struct SharedSource(Arc<object_store::Error>);

impl fmt::Debug for SharedSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for SharedSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.source() {
            Some(source) => fmt::Display::fmt(source, f),
            None => fmt::Display::fmt(&*self.0, f),
        }
    }
}

impl StdError for SharedSource {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source().and_then(|s| s.source())
    }
}

/// An `object_store::Error` of the same kind as `shared`, for one of the
/// readers that share it (the error itself is not `Clone`).
pub(crate) fn share(shared: &Arc<object_store::Error>) -> object_store::Error {
    use object_store::Error as E;
    let source = || -> Box<dyn StdError + Send + Sync> { Box::new(SharedSource(shared.clone())) };
    match &**shared {
        E::Generic { store, .. } => E::Generic {
            store,
            source: source(),
        },
        E::NotFound { path, .. } => E::NotFound {
            path: path.clone(),
            source: source(),
        },
        E::NotSupported { .. } => E::NotSupported { source: source() },
        E::AlreadyExists { path, .. } => E::AlreadyExists {
            path: path.clone(),
            source: source(),
        },
        E::Precondition { path, .. } => E::Precondition {
            path: path.clone(),
            source: source(),
        },
        E::NotModified { path, .. } => E::NotModified {
            path: path.clone(),
            source: source(),
        },
        E::NotImplemented {
            operation,
            implementer,
        } => E::NotImplemented {
            operation: operation.clone(),
            implementer: implementer.clone(),
        },
        E::PermissionDenied { path, .. } => E::PermissionDenied {
            path: path.clone(),
            source: source(),
        },
        E::Unauthenticated { path, .. } => E::Unauthenticated {
            path: path.clone(),
            source: source(),
        },
        E::UnknownConfigurationKey { store, key } => E::UnknownConfigurationKey {
            store,
            key: key.clone(),
        },
        // InvalidPath, JoinError and kinds added later: kept as the message.
        _ => E::Generic {
            store: STORE,
            source: Box::new(SharedSource(shared.clone())),
        },
    }
}

/// A `Generic` error of the cached store.
pub(crate) fn generic(source: impl Into<Box<dyn StdError + Send + Sync>>) -> object_store::Error {
    object_store::Error::Generic {
        store: STORE,
        source: source.into(),
    }
}
