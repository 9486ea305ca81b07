//! A new object written through the mount: sequential writes, buffered up
//! to one part, then streamed as a multipart upload; made visible in the
//! store only when complete (a `put` or the upload's completion). A failed
//! upload is aborted, so no partial object is ever visible.

use crate::error::{store_errno, Errno};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, PutResult, WriteMultipart};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UploadState {
    /// Taking writes.
    Open,
    /// Uploaded (at a flush, fsync or release): further writes are refused.
    Done,
    /// Failed and aborted: every further write or flush gets `EIO`.
    Failed,
}

pub(crate) struct Upload {
    pub(crate) ino: u64,
    pub(crate) path: Path,
    /// Bytes written so far (the next write must start here).
    pub(crate) written: u64,
    pub(crate) state: UploadState,
    /// Whether the filesystem has counted (and cleaned up after) this
    /// upload's failure: a failed file's later flushes and release report
    /// the same `EIO` again, but it failed once.
    pub(crate) failure_seen: bool,
    /// Written bytes not yet handed to a multipart upload.
    buffer: Vec<u8>,
    multipart: Option<WriteMultipart>,
    part_size: usize,
    parts_in_flight: usize,
}

impl Upload {
    pub(crate) fn new(ino: u64, path: Path, part_size: usize, parts_in_flight: usize) -> Upload {
        Upload {
            ino,
            path,
            written: 0,
            state: UploadState::Open,
            failure_seen: false,
            buffer: Vec::new(),
            multipart: None,
            part_size,
            parts_in_flight,
        }
    }

    fn what(&self) -> String {
        format!("uploading {}", self.path)
    }

    /// Appends `data` written at `offset`: only at the end of what was
    /// written (`EINVAL` otherwise; nothing changes).
    pub(crate) async fn write(
        &mut self,
        store: &dyn ObjectStore,
        offset: u64,
        data: &[u8],
    ) -> Result<(), Errno> {
        match self.state {
            UploadState::Open => {}
            UploadState::Done => {
                log::warn!(
                    "{}: a write after the file was uploaded (at close or fsync) is refused",
                    self.path
                );
                return Err(Errno::EPERM);
            }
            UploadState::Failed => return Err(Errno::EIO),
        }
        if offset != self.written {
            log::warn!(
                "{}: a write at offset {offset}, but {} bytes were written: new files are written \
                 sequentially",
                self.path,
                self.written
            );
            return Err(Errno::EINVAL);
        }
        if let Some(multipart) = &mut self.multipart {
            if let Err(e) = multipart.wait_for_capacity(self.parts_in_flight).await {
                return Err(self.fail(&e).await);
            }
            multipart.write(data);
        } else {
            self.buffer.extend_from_slice(data);
            if self.buffer.len() >= self.part_size {
                let upload = match store.put_multipart(&self.path).await {
                    Ok(upload) => upload,
                    Err(e) => return Err(self.fail(&e).await),
                };
                let mut multipart = WriteMultipart::new_with_chunk_size(upload, self.part_size);
                multipart.write(&std::mem::take(&mut self.buffer));
                self.multipart = Some(multipart);
            }
        }
        self.written += data.len() as u64;
        Ok(())
    }

    /// Makes the object visible: one `put` of the buffer, or the multipart
    /// upload's remaining parts and completion. Returns the store's answer;
    /// a second call after success does nothing (`Ok(None)`).
    pub(crate) async fn complete(
        &mut self,
        store: &dyn ObjectStore,
    ) -> Result<Option<PutResult>, Errno> {
        match self.state {
            UploadState::Open => {}
            UploadState::Done => return Ok(None),
            UploadState::Failed => return Err(Errno::EIO),
        }
        let result = match self.multipart.take() {
            // `finish` aborts the upload itself when it fails.
            Some(multipart) => multipart.finish().await,
            None => {
                let payload = PutPayload::from(std::mem::take(&mut self.buffer));
                store.put(&self.path, payload).await
            }
        };
        match result {
            Ok(put) => {
                self.state = UploadState::Done;
                Ok(Some(put))
            }
            Err(e) => {
                self.state = UploadState::Failed;
                self.buffer = Vec::new();
                Err(store_errno(&self.what(), &e))
            }
        }
    }

    /// Gives up (the upload failed): aborts a multipart upload, so that no
    /// part of it stays in the store, and returns the errno for `e`.
    async fn fail(&mut self, e: &object_store::Error) -> Errno {
        let errno = store_errno(&self.what(), e);
        self.state = UploadState::Failed;
        self.buffer = Vec::new();
        if let Some(multipart) = self.multipart.take() {
            if let Err(abort) = multipart.abort().await {
                log::error!("{}: aborting the multipart upload: {abort}", self.path);
            }
        }
        errno
    }

    /// The handle goes away without its upload completing (the daemon
    /// stops): abort what was started.
    pub(crate) async fn abandon(&mut self) {
        if self.state == UploadState::Open {
            // Nothing of it was acknowledged (an upload is made visible
            // whole at the close of its writer), but say so: the writer
            // may still be waiting to close it.
            log::error!(
                "{}: not uploaded: the mount stopped while the file was open for writing \
                 ({} bytes written, none acknowledged)",
                self.path,
                self.written
            );
            self.state = UploadState::Failed;
            if let Some(multipart) = self.multipart.take() {
                if let Err(e) = multipart.abort().await {
                    log::error!("{}: aborting the multipart upload: {e}", self.path);
                }
            }
        }
    }
}
