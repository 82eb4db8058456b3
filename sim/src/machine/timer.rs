//! A deadline that registers its timer once, a receive raced against it,
//! and a wake-up set for another task (`wake_after`).
//!
//! madsim 0.2.34's `Sleep` adds a timer on every poll while it is pending and
//! never removes one. A sleep raced against a busy mailbox is polled on every
//! delivery, so its deadline piles up timers that each wake the task again
//! for nothing (and every loop round that builds a fresh `timeout` adds one
//! more). [`Deadline`] sets its timer once, on its first poll (the timer a
//! sleep ending then sets, through the run's one reused sleep:
//! `clock::wake_at`), and afterwards only reads the clock; a loop keeps one
//! `Deadline` for as long as its instant stays the same.

use crate::machine::clock::{elapsed, wake_at, whole_us, SLEEP_MIN};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Resolves at a true instant (at least madsim's shortest sleep after it was
/// made, as madsim's sleeps do). Poll it from one task only: the first
/// poll's waker is the one the timer wakes.
pub struct Deadline {
    /// When it resolves, in true time since the runtime started: the
    /// instant asked for, or madsim's shortest sleep after it was made.
    at: Duration,
    registered: bool,
    /// The true instant asked for (µs), which names the deadline in [`refresh`].
    at_us: u64,
}

impl Deadline {
    /// At true instant `at_us`, or [`SLEEP_MIN`] from now if that is later
    /// (fixed now, as madsim fixes a sleep's when it makes it).
    pub fn at_us(at_us: u64) -> Deadline {
        let now = elapsed();
        let asked = Duration::from_micros(at_us.saturating_sub(whole_us(now)));
        Deadline { at: now + asked.max(SLEEP_MIN), registered: false, at_us }
    }

    pub fn passed(&self) -> bool {
        elapsed() >= self.at
    }
}

impl Future for Deadline {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.passed() {
            return Poll::Ready(());
        }
        if !self.registered {
            self.registered = true;
            wake_at(self.at, cx.waker());
        }
        Poll::Pending
    }
}

/// Keeps `slot` a deadline at true instant `at_us`, rebuilding it only when
/// the instant changes (a rebuilt deadline registers anew).
pub fn refresh(slot: &mut Option<Deadline>, at_us: u64) -> &mut Deadline {
    if slot.as_ref().is_none_or(|deadline| deadline.at_us != at_us) {
        *slot = Some(Deadline::at_us(at_us));
    }
    slot.as_mut().expect("just filled")
}

/// Keeps `slot` a deadline at or before true instant `at_us`: one still
/// ahead and no later than `at_us` is kept (its timer is registered and will
/// wake the task anyway; the task then looks again), else it is rebuilt for
/// `at_us`. For a wake-up instant that moves later often (a follower's
/// election timer, pushed back by every heartbeat): each move would
/// otherwise leave a timer behind to wake the task for nothing.
pub fn keep_earliest(slot: &mut Option<Deadline>, at_us: u64) -> &mut Deadline {
    if slot.as_ref().is_none_or(|deadline| deadline.passed() || deadline.at_us > at_us) {
        *slot = Some(Deadline::at_us(at_us));
    }
    slot.as_mut().expect("just filled")
}

/// Has madsim wake `waker` in `after_us` (madsim's shortest sleep,
/// [`SLEEP_MIN`], at the soonest, as for a sleep made now), with nothing
/// left to poll. For a task woken on another's behalf (a packet's
/// receiver, armed by its sender).
pub fn wake_after(waker: &Waker, after_us: u64) {
    wake_at(elapsed() + Duration::from_micros(after_us).max(SLEEP_MIN), waker);
}

/// `future`'s output, or `None` once `deadline` passes first (`future` is
/// polled first, as `madsim::time::timeout` does).
pub async fn race<F: Future>(future: F, deadline: &mut Deadline) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        match Pin::new(&mut *deadline).poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::{race, refresh, wake_after, Deadline};
    use crate::machine::clock::{elapsed, init_true_time, now_us};
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Wake, Waker};
    use std::time::Duration;

    fn run<F: Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
        std::thread::spawn(move || {
            madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default()).block_on(f())
        })
        .join()
        .expect("simulation thread");
    }

    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Polls `future` `polls` times by hand, lets 10 ms pass, and counts the wake-ups.
    fn wakes_after_polls(mut future: Pin<&mut impl Future<Output = ()>>, polls: usize) -> usize {
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        for _ in 0..polls {
            assert!(future.as_mut().poll(&mut cx).is_pending());
        }
        madsim::time::TimeHandle::current().advance(Duration::from_millis(10));
        assert!(future.as_mut().poll(&mut cx).is_ready());
        counter.0.load(Ordering::SeqCst)
    }

    #[test]
    fn a_deadline_polled_often_wakes_its_task_once() {
        run(|| async {
            let deadline = std::pin::pin!(Deadline::at_us(now_us() + 5_000));
            assert_eq!(wakes_after_polls(deadline, 50), 1);
            // What it replaces: madsim's sleep wakes once per poll.
            let sleep = std::pin::pin!(madsim::time::sleep(Duration::from_millis(5)));
            assert_eq!(wakes_after_polls(sleep, 50), 50);
        });
    }

    /// A waker that counts its wake-ups, and that count.
    fn counted() -> (Waker, Arc<Counter>) {
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        (Waker::from(counter.clone()), counter)
    }

    /// Whether `counter` was woken once exactly at `at` (true time since the
    /// runtime started), not a nanosecond sooner, and not again for 10 ms.
    fn rings_once_at(counter: &Counter, at: Duration) -> bool {
        let time = madsim::time::TimeHandle::current();
        time.advance(at - elapsed() - Duration::from_nanos(1));
        let before = counter.0.load(Ordering::SeqCst);
        time.advance(Duration::from_nanos(1));
        let at_it = counter.0.load(Ordering::SeqCst);
        time.advance(Duration::from_millis(10));
        (before, at_it, counter.0.load(Ordering::SeqCst)) == (0, 1, 1)
    }

    /// What determinism rests on: a wake-up and a deadline set through the
    /// run's reused sleep ring once, to the nanosecond, when a madsim sleep
    /// made and polled at the same moments rings, madsim's shortest sleep
    /// included and a deadline first polled late keeping its instant; with
    /// the run's clock at hand or without it.
    #[test]
    fn timers_ring_when_madsims_own_sleeps_ring() {
        for with_run_clock in [false, true] {
            run(move || async move {
                let _run_clock = with_run_clock.then(init_true_time);
                let time = madsim::time::TimeHandle::current();
                time.advance(Duration::from_nanos(12_345_678));
                for span_us in [0, 1, 999, 1_000, 1_001, 4_321] {
                    // Where a madsim sleep made at `made` for the span ends.
                    let ends = |made: Duration| made + Duration::from_micros(span_us).max(Duration::from_millis(1));
                    let made = elapsed();
                    let (waker, counter) = counted();
                    let mut sleep = std::pin::pin!(madsim::time::sleep(Duration::from_micros(span_us)));
                    assert!(sleep.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
                    assert!(rings_once_at(&counter, ends(made)), "a madsim sleep of {span_us} µs");

                    let made = elapsed();
                    let (waker, counter) = counted();
                    wake_after(&waker, span_us);
                    assert!(rings_once_at(&counter, ends(made)), "wake_after({span_us} µs)");

                    // A deadline made now and first polled 0.6 ms later, as
                    // a round that found a delivery first polls it later.
                    let made = elapsed();
                    let (waker, counter) = counted();
                    let mut deadline = Box::pin(Deadline::at_us(now_us() + span_us));
                    time.advance(Duration::from_micros(600));
                    assert!(deadline.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
                    assert!(deadline.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
                    assert!(rings_once_at(&counter, ends(made)), "a deadline {span_us} µs ahead, polled late");
                }
            });
        }
    }

    #[test]
    fn race_returns_the_future_first_and_none_at_the_deadline() {
        run(|| async {
            let mut deadline = Deadline::at_us(now_us() + 5_000);
            assert_eq!(race(async { 7 }, &mut deadline).await, Some(7));
            assert!(!deadline.passed());
            assert_eq!(race(std::future::pending::<u8>(), &mut deadline).await, None);
            assert!(deadline.passed());
            assert_eq!(now_us(), 5_000);
        });
    }

    #[test]
    fn refresh_keeps_a_deadline_until_its_instant_changes() {
        run(|| async {
            let mut slot = None;
            refresh(&mut slot, 5_000).registered = true;
            assert!(refresh(&mut slot, 5_000).registered, "same instant: the same deadline");
            assert!(!refresh(&mut slot, 6_000).registered, "a new instant: a new deadline");
        });
    }
}
