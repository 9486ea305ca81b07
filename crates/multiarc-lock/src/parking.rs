//! The portable futex fallback for targets without a futex system call: a
//! fixed table of buckets, each a `std` `Mutex` (the addresses of the words
//! its threads sleep on) and a `Condvar`, chosen by hashing the word's address.
//!
//! A waiter checks the word under its bucket's mutex and stays registered
//! until it sleeps on the condvar; a waker takes the same mutex before
//! notifying. So a wake-up issued after the word changed cannot slip between
//! a waiter's check and its sleep: that is the futex guarantee. Because a
//! bucket is shared by several addresses, wakers notify all of the bucket's
//! sleepers; those woken for another word return spuriously and re-check.
//!
//! It is compiled on every target (outside loom) so that its tests run on
//! Linux as well, where the locks themselves use the system call.
#![cfg_attr(all(target_os = "linux", not(test)), allow(dead_code))]
#![cfg(not(loom))]

use crate::futex::Futex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Number of buckets: enough that unrelated locks rarely share one.
const BUCKETS: usize = 64;

struct Bucket {
    /// Addresses of the words the bucket's sleepers wait on (a multiset).
    sleepers: Mutex<Vec<usize>>,
    wakeup: Condvar,
}

static TABLE: [Bucket; BUCKETS] = [const {
    Bucket {
        sleepers: Mutex::new(Vec::new()),
        wakeup: Condvar::new(),
    }
}; BUCKETS];

fn bucket(addr: usize) -> &'static Bucket {
    // Fibonacci hashing of the word index: neighbouring locks spread out.
    let hash = ((addr >> 2) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    &TABLE[(hash >> 58) as usize % BUCKETS]
}

fn lock_sleepers(bucket: &Bucket) -> MutexGuard<'_, Vec<usize>> {
    // The table holds no invariant a panic could break: ignore poisoning.
    bucket
        .sleepers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The futex emulation of targets without `futex(2)`.
pub(crate) struct ParkingFutex;

impl Futex for ParkingFutex {
    fn wait(word: &AtomicU32, expected: u32) {
        let addr = word as *const AtomicU32 as usize;
        let bucket = bucket(addr);
        let mut sleepers = lock_sleepers(bucket);
        if word.load(Ordering::SeqCst) != expected {
            return;
        }
        sleepers.push(addr);
        let mut sleepers = bucket
            .wakeup
            .wait(sleepers)
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(pos) = sleepers.iter().position(|&a| a == addr) {
            sleepers.swap_remove(pos);
        }
    }

    fn wake_one(word: &AtomicU32) -> bool {
        let addr = word as *const AtomicU32 as usize;
        let bucket = bucket(addr);
        let any = lock_sleepers(bucket).contains(&addr);
        if any {
            bucket.wakeup.notify_all();
        }
        any
    }

    fn wake_all(word: &AtomicU32) {
        Self::wake_one(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn wait_returns_at_once_when_the_word_differs() {
        let word = AtomicU32::new(1);
        ParkingFutex::wait(&word, 0);
    }

    #[test]
    fn wake_one_without_sleepers_reports_none() {
        let word = AtomicU32::new(0);
        assert!(!ParkingFutex::wake_one(&word));
    }

    #[test]
    fn a_sleeper_is_woken_after_the_word_changes() {
        let word = Arc::new(AtomicU32::new(0));
        let sleeper = {
            let word = Arc::clone(&word);
            std::thread::spawn(move || {
                while word.load(Ordering::SeqCst) == 0 {
                    ParkingFutex::wait(&word, 0);
                }
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        word.store(1, Ordering::SeqCst);
        ParkingFutex::wake_all(&word);
        sleeper.join().unwrap();
    }
}
