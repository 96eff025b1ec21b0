//! The bound on runs executing at once, shared by every runtime: a counting
//! semaphore whose waiters give up at their deadline or on cancellation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often a waiting run checks for cancellation.
const CANCEL_POLL: Duration = Duration::from_millis(20);

pub(crate) struct Slots {
    count: usize,
    free: Mutex<usize>,
    freed: Condvar,
    /// Runs allowed to wait for a slot; more are refused at once.
    max_waiting: usize,
    waiting: std::sync::atomic::AtomicUsize,
}

/// Why no slot was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoSlot {
    Deadline,
    Cancelled,
    /// The queue of waiting runs is full.
    Full,
}

pub(crate) struct SlotGuard<'a>(&'a Slots);

impl Slots {
    pub(crate) fn new(count: usize, max_waiting: usize) -> Self {
        Slots {
            count: count.max(1),
            free: Mutex::new(count.max(1)),
            freed: Condvar::new(),
            max_waiting,
            waiting: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Runs executing now and runs waiting for a slot.
    pub(crate) fn occupancy(&self) -> (usize, usize) {
        let free = *self.free.lock().unwrap_or_else(|e| e.into_inner());
        (self.count - free, self.waiting.load(Ordering::SeqCst))
    }

    /// Wait for a free slot until `deadline`, giving up early when `cancel` is set.
    pub(crate) fn acquire(
        &self,
        deadline: Instant,
        cancel: Option<&AtomicBool>,
    ) -> Result<SlotGuard<'_>, NoSlot> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if *free == 0 {
            if self.waiting.load(Ordering::SeqCst) >= self.max_waiting {
                return Err(NoSlot::Full);
            }
            self.waiting.fetch_add(1, Ordering::SeqCst);
        } else {
            *free -= 1;
            return Ok(SlotGuard(self));
        }
        let _waiting = Waiting(&self.waiting);
        while *free == 0 {
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                return Err(NoSlot::Cancelled);
            }
            let left = deadline
                .checked_duration_since(Instant::now())
                .ok_or(NoSlot::Deadline)?;
            free = self
                .freed
                .wait_timeout(free, left.min(CANCEL_POLL))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        *free -= 1;
        Ok(SlotGuard(self))
    }
}

/// Counts a waiter out however it stops waiting.
struct Waiting<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}
