//! [`forward_object_store!`](crate::forward_object_store): the
//! `ObjectStore` methods a wrapper passes straight to the store behind it,
//! written once for every wrapper (the counting store here, the tests'
//! stores that fail or hold back reads, the benchmark's foyer store).

/// Inside an `impl ObjectStore for Wrapper` (with `#[async_trait]`), the
/// methods named, each passing its call unchanged to the field named:
///
/// ```
/// use async_trait::async_trait;
/// use object_store::path::Path;
/// use object_store::{GetOptions, GetResult, ObjectStore, Result};
///
/// /// `S`, its reads logged.
/// #[derive(Debug)]
/// struct Logged<S> {
///     inner: S,
/// }
///
/// impl<S: ObjectStore> std::fmt::Display for Logged<S> {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         write!(f, "Logged({})", self.inner)
///     }
/// }
///
/// #[async_trait]
/// impl<S: ObjectStore> ObjectStore for Logged<S> {
///     async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
///         log::debug!("get {location}");
///         self.inner.get_opts(location, options).await
///     }
///
///     multiarc_store_tools::forward_object_store! {
///         inner: put_opts, put_multipart_opts, delete_stream, list, list_with_delimiter,
///         copy_opts, rename_opts
///     }
/// }
/// ```
///
/// The methods it can forward: `put_opts`, `put_multipart_opts`,
/// `get_opts`, `delete_stream`, `list`, `list_with_delimiter`, `copy_opts`
/// and `rename_opts`. The `async` ones are written as `#[async_trait]`
/// writes them (a boxed future), which is the inner store's own, returned
/// as it is.
#[macro_export]
macro_rules! forward_object_store {
    ($field:ident: $($method:ident),+ $(,)?) => {
        $($crate::forward_object_store!(@method $field $method);)+
    };
    (@method $field:ident put_opts) => {
        $crate::forward_object_store!(@boxed $field put_opts<'life1>(
            location: &'life1 $crate::__object_store::path::Path,
            payload: $crate::__object_store::PutPayload,
            options: $crate::__object_store::PutOptions,
        ) -> $crate::__object_store::PutResult);
    };
    (@method $field:ident put_multipart_opts) => {
        $crate::forward_object_store!(@boxed $field put_multipart_opts<'life1>(
            location: &'life1 $crate::__object_store::path::Path,
            options: $crate::__object_store::PutMultipartOptions,
        ) -> ::std::boxed::Box<dyn $crate::__object_store::MultipartUpload>);
    };
    (@method $field:ident get_opts) => {
        $crate::forward_object_store!(@boxed $field get_opts<'life1>(
            location: &'life1 $crate::__object_store::path::Path,
            options: $crate::__object_store::GetOptions,
        ) -> $crate::__object_store::GetResult);
    };
    (@method $field:ident delete_stream) => {
        fn delete_stream(
            &self,
            locations: $crate::__BoxStream<$crate::__object_store::path::Path>,
        ) -> $crate::__BoxStream<$crate::__object_store::path::Path> {
            self.$field.delete_stream(locations)
        }
    };
    (@method $field:ident list) => {
        fn list(
            &self,
            prefix: ::std::option::Option<&$crate::__object_store::path::Path>,
        ) -> $crate::__BoxStream<$crate::__object_store::ObjectMeta> {
            self.$field.list(prefix)
        }
    };
    (@method $field:ident list_with_delimiter) => {
        $crate::forward_object_store!(@boxed $field list_with_delimiter<'life1>(
            prefix: ::std::option::Option<&'life1 $crate::__object_store::path::Path>,
        ) -> $crate::__object_store::ListResult);
    };
    (@method $field:ident copy_opts) => {
        $crate::forward_object_store!(@boxed $field copy_opts<'life1, 'life2>(
            from: &'life1 $crate::__object_store::path::Path,
            to: &'life2 $crate::__object_store::path::Path,
            options: $crate::__object_store::CopyOptions,
        ) -> ());
    };
    (@method $field:ident rename_opts) => {
        $crate::forward_object_store!(@boxed $field rename_opts<'life1, 'life2>(
            from: &'life1 $crate::__object_store::path::Path,
            to: &'life2 $crate::__object_store::path::Path,
            options: $crate::__object_store::RenameOptions,
        ) -> ());
    };
    // An `async` method of the trait, as `#[async_trait]` writes it: every
    // borrow outlives the boxed future.
    (@boxed $field:ident $name:ident<$($life:lifetime),*>(
        $($arg:ident: $ty:ty),* $(,)?
    ) -> $output:ty) => {
        fn $name<'life0, $($life,)* 'async_trait>(
            &'life0 self,
            $($arg: $ty),*
        ) -> $crate::__BoxFuture<'async_trait, $output>
        where
            'life0: 'async_trait,
            $($life: 'async_trait,)*
            Self: 'async_trait,
        {
            self.$field.$name($($arg),*)
        }
    };
}

/// The future an `#[async_trait]` method of `ObjectStore` returns.
#[doc(hidden)]
pub type BoxFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = object_store::Result<T>> + Send + 'a>>;

/// The stream `ObjectStore::list` and `delete_stream` return.
#[doc(hidden)]
pub type BoxStream<T> = futures::stream::BoxStream<'static, object_store::Result<T>>;
