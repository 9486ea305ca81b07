//! TEMPORARY std-backed stand-in with the lock module's API, replaced by the
//! futex lock when the lock branch is merged.
#![allow(missing_docs)]

pub use std::sync::MutexGuard;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LockId {
    pub class: &'static str,
    pub index: u32,
}

#[derive(Default)]
pub struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub const fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.0.try_lock().ok()
    }
    pub fn set_lockstat(&self, _id: Option<LockId>) {}
}
