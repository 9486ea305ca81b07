//! `Mutex` and `RwLock` under `--cfg loom`: `lock_api`'s `new` copies the
//! constant `INIT`, whose loom atomics could then only be created on first
//! use, in whichever thread comes first, and loom requires an atomic's
//! creation to happen-before all its accesses. So under loom the two are thin
//! newtypes whose `new` builds the raw lock with its atomics created at once
//! (`lock_api`'s `from_raw`); everything else is `lock_api`'s, through `Deref`.

use crate::{RawMutex, RawRwLock};
use std::ops::{Deref, DerefMut};

/// `lock_api::Mutex<RawMutex, T>`, created with its loom atomic.
#[derive(Debug)]
pub struct Mutex<T: ?Sized>(lock_api::Mutex<RawMutex, T>);

impl<T> Mutex<T> {
    /// A new unlocked mutex holding `value`.
    pub fn new(value: T) -> Self {
        Mutex(lock_api::Mutex::from_raw(RawMutex::new_loom(), value))
    }

    /// Consumes the mutex and returns its data.
    pub fn into_inner(self) -> T {
        self.0.into_inner()
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T: ?Sized> Deref for Mutex<T> {
    type Target = lock_api::Mutex<RawMutex, T>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<T: ?Sized> DerefMut for Mutex<T> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// `lock_api::RwLock<RawRwLock, T>`, created with its loom atomics.
#[derive(Debug)]
pub struct RwLock<T: ?Sized>(lock_api::RwLock<RawRwLock, T>);

impl<T> RwLock<T> {
    /// A new unlocked lock holding `value`.
    pub fn new(value: T) -> Self {
        RwLock(lock_api::RwLock::from_raw(RawRwLock::new_loom(), value))
    }

    /// Consumes the lock and returns its data.
    pub fn into_inner(self) -> T {
        self.0.into_inner()
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T: ?Sized> Deref for RwLock<T> {
    type Target = lock_api::RwLock<RawRwLock, T>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<T: ?Sized> DerefMut for RwLock<T> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}
