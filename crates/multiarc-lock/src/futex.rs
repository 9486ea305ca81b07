//! Sleeping on, and waking threads sleeping on, a 32-bit word.
//!
//! The locks are written against the [`Futex`] trait so the same state machine
//! runs on the Linux system call, on the portable fallback (`parking.rs`,
//! testable on Linux too), and on loom. Which one the locks use is chosen in
//! `platform.rs`.

use crate::sync::AtomicU32;

/// Futex semantics: `wait` sleeps only if the word still holds `expected`
/// (checked atomically with respect to `wake_*`), and may return spuriously;
/// callers always re-check their condition in a loop.
pub(crate) trait Futex {
    /// Sleeps while `word` holds `expected`, until woken (or spuriously).
    fn wait(word: &AtomicU32, expected: u32);
    /// Wakes one thread sleeping on `word` (the fallbacks may wake more).
    /// Returns true only if a sleeping thread was certainly woken.
    fn wake_one(word: &AtomicU32) -> bool;
    /// Wakes every thread sleeping on `word`.
    fn wake_all(word: &AtomicU32);
}

/// The Linux `futex(2)` system call, process-private.
#[cfg(all(target_os = "linux", not(loom)))]
pub(crate) struct LinuxFutex;

#[cfg(all(target_os = "linux", not(loom)))]
impl Futex for LinuxFutex {
    fn wait(word: &AtomicU32, expected: u32) {
        // SAFETY: FUTEX_WAIT reads the aligned 32-bit word at `word.as_ptr()`,
        // which is valid for the duration of the call because we borrow it;
        // the timeout pointer is null (no timeout). EINTR and EAGAIN are
        // spurious returns, which callers handle by re-checking.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                std::ptr::null::<libc::timespec>(),
            );
        }
    }

    fn wake_one(word: &AtomicU32) -> bool {
        // SAFETY: FUTEX_WAKE only uses the address as a key (it never reads
        // or writes memory), so even a word freed meanwhile would be harmless.
        let woken = unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1i32,
            )
        };
        woken > 0
    }

    fn wake_all(word: &AtomicU32) {
        // SAFETY: as in `wake_one`.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            );
        }
    }
}

/// A futex emulation on loom's `Mutex` and `Condvar`, faithful enough that a
/// lost wake-up shows up as a deadlock in the model checker: a waiter sleeps
/// until a `wake_*` call marks it woken, never merely because the word changed.
#[cfg(loom)]
pub(crate) mod loom_futex {
    use super::{AtomicU32, Futex};
    use loom::sync::{Condvar, Mutex};
    use std::sync::atomic::Ordering;

    /// One sleeping thread: the word's address, its ticket, whether woken.
    struct Sleeper {
        addr: usize,
        ticket: u64,
        woken: bool,
    }

    struct Queue {
        sleepers: Vec<Sleeper>,
        next_ticket: u64,
    }

    loom::lazy_static! {
        static ref QUEUE: (Mutex<Queue>, Condvar) = (
            Mutex::new(Queue { sleepers: Vec::new(), next_ticket: 0 }),
            Condvar::new(),
        );
    }

    /// The futex emulation used under `--cfg loom`.
    pub(crate) struct LoomFutex;

    impl Futex for LoomFutex {
        fn wait(word: &AtomicU32, expected: u32) {
            let addr = word as *const AtomicU32 as usize;
            let mut queue = QUEUE.0.lock().unwrap();
            if word.load(Ordering::SeqCst) != expected {
                return;
            }
            let ticket = queue.next_ticket;
            queue.next_ticket += 1;
            queue.sleepers.push(Sleeper {
                addr,
                ticket,
                woken: false,
            });
            loop {
                queue = QUEUE.1.wait(queue).unwrap();
                let pos = queue.sleepers.iter().position(|s| s.ticket == ticket);
                let pos = pos.expect("a sleeper is only removed by itself");
                if queue.sleepers[pos].woken {
                    queue.sleepers.remove(pos);
                    return;
                }
            }
        }

        fn wake_one(word: &AtomicU32) -> bool {
            let addr = word as *const AtomicU32 as usize;
            let mut queue = QUEUE.0.lock().unwrap();
            let found = queue
                .sleepers
                .iter_mut()
                .find(|s| s.addr == addr && !s.woken);
            let woke = match found {
                Some(sleeper) => {
                    sleeper.woken = true;
                    true
                }
                None => false,
            };
            drop(queue);
            if woke {
                QUEUE.1.notify_all();
            }
            woke
        }

        fn wake_all(word: &AtomicU32) {
            let addr = word as *const AtomicU32 as usize;
            let mut queue = QUEUE.0.lock().unwrap();
            for sleeper in queue.sleepers.iter_mut().filter(|s| s.addr == addr) {
                sleeper.woken = true;
            }
            drop(queue);
            QUEUE.1.notify_all();
        }
    }
}
