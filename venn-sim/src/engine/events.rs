//! The event queue: a binary min-heap of small `Copy` events keyed by
//! `(time, seq)`.
//!
//! Check-ins do not go through the heap: they arrive pre-sorted from the
//! replay iterator and the engine merges the two streams. The sequence number
//! makes ties deterministic (first pushed, first popped) and keeps the order
//! independent of the heap's internal layout.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What happens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EventKind {
    /// Job `job` (index into the job list) arrives and opens its first round.
    Arrival {
        /// Job index.
        job: u32,
    },
    /// An admitted job's planned launch: it registers and opens its first round.
    Launch {
        /// Job index.
        job: u32,
    },
    /// The end of an admission slot.
    Slot,
    /// The core's next round falls due (`ResourceManager::poll_timeout` when it was
    /// armed); stale when an earlier one was armed since.
    RoundTimer,
    /// A device's task ends: it reports its result (`ok`) or drops offline.
    TaskEnd {
        /// Job index.
        job: u32,
        /// Round attempt the task belongs to.
        attempt: u32,
        /// Whether the result arrives (false: the device went offline first).
        ok: bool,
        /// Device profile slot, for a re-check-in after the task.
        slot: u32,
        /// The device.
        device: u64,
        /// When the device goes offline.
        online_until: f64,
    },
}

/// One scheduled event.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    /// When, in simulated seconds.
    pub time: f64,
    /// Push order, breaking ties in time.
    pub seq: u64,
    /// What.
    pub kind: EventKind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Event {}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Event {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest event.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .total_cmp(&self.time)
            .then(other.seq.cmp(&self.seq))
    }
}

/// Min-heap of events by `(time, seq)`.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Event>,
    next_seq: u64,
}

impl EventQueue {
    /// An empty queue with room for `cap` events.
    pub fn with_capacity(cap: usize) -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(cap),
            next_seq: 0,
        }
    }

    /// Schedules `kind` at `time`.
    pub fn push(&mut self, time: f64, kind: EventKind) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Event { time, seq, kind });
    }

    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<f64> {
        self.heap.peek().map(|e| e.time)
    }

    /// Removes and returns the earliest event.
    pub fn pop(&mut self) -> Option<Event> {
        self.heap.pop()
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when nothing is scheduled.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_push_order() {
        let mut q = EventQueue::default();
        q.push(5.0, EventKind::Arrival { job: 0 });
        q.push(1.0, EventKind::Arrival { job: 1 });
        q.push(5.0, EventKind::Arrival { job: 2 });
        q.push(3.0, EventKind::Arrival { job: 3 });
        let order: Vec<u32> = std::iter::from_fn(|| q.pop())
            .map(|e| match e.kind {
                EventKind::Arrival { job } => job,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(order, vec![1, 3, 0, 2]);
        assert!(std::mem::size_of::<Event>() <= 64);
    }
}
