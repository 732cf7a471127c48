//! The one door to atomics and locks. Every atomic and lock in the crate
//! comes from here, so that under `cfg(loom)` the loom model checker sees
//! every one of them (as Tokio's `loom` module and crossbeam do).
//!
//! Outside loom the lock is `spin::Mutex`: the scheduler runs where there is
//! no OS to block on, and its critical sections are a few instructions (a
//! queue push or pop, a joiner list).

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// A mutual-exclusion lock with a guard, the same API under loom and not.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T> {
    #[cfg(not(loom))]
    inner: spin::Mutex<T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
}

#[cfg(not(loom))]
pub(crate) type MutexGuard<'a, T> = spin::MutexGuard<'a, T>;
#[cfg(loom)]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Mutex<T> {
        Mutex {
            #[cfg(not(loom))]
            inner: spin::Mutex::new(value),
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(value),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(not(loom))]
        {
            self.inner.lock()
        }
        #[cfg(loom)]
        {
            self.inner
                .lock()
                .expect("a loom mutex is never poisoned here")
        }
    }
}

/// One turn of a wait for another CPU to finish a step it has begun (a
/// parker storing the entity its waker will take). Under loom, a yield, so
/// the model runs the other thread.
pub(crate) fn spin_wait() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
