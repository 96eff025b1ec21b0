//! The bound on runs executing at once, shared by every runtime: a counting
//! semaphore whose waiters give up at their deadline or on cancellation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often a waiting run checks for cancellation.
const CANCEL_POLL: Duration = Duration::from_millis(20);

pub(crate) struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

/// Why no slot was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoSlot {
    Deadline,
    Cancelled,
}

pub(crate) struct SlotGuard<'a>(&'a Slots);

impl Slots {
    pub(crate) fn new(count: usize) -> Self {
        Slots {
            free: Mutex::new(count.max(1)),
            freed: Condvar::new(),
        }
    }

    /// Wait for a free slot until `deadline`, giving up early when `cancel` is set.
    pub(crate) fn acquire(
        &self,
        deadline: Instant,
        cancel: Option<&AtomicBool>,
    ) -> Result<SlotGuard<'_>, NoSlot> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
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

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}
