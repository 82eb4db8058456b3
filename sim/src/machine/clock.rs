//! True simulation time and the local clocks of servers and clients.
//!
//! madsim has one global clock and no per-node clocks (MADSIM.md, "Time").
//! True time (`now_us`) is what the checker judges by; node code reads time
//! only through its own [`LocalClock`], which drifts at `rate_ppm` and can be
//! stepped forward or backward. A local clock is a pure mapping from true time
//! to local time anchored at a pair of references; changing the rate or stepping
//! re-bases the references so the mapping stays continuous up to the change.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Parts per million in one.
const PPM_ONE: i128 = 1_000_000;

/// Slowest allowed rate: a clock must still move forward.
const RATE_PPM_MIN: i64 = -999_999;

/// Fastest allowed rate (100x true time); far beyond any drift the model draws.
const RATE_PPM_MAX: i64 = 99_000_000;

/// Sleepers registered on one clock; beyond this the oldest is forgotten
/// (it then wakes at its precomputed deadline instead of at the clock change).
const WAKERS_MAX: usize = 256;

/// Iterations of [`sleep_until_local`] before it gives up and returns; each
/// iteration is a clock change or a deadline, so this only bounds pathological runs.
const SLEEP_ITERATIONS_MAX: u32 = 10_000;

thread_local! {
    /// The time source of the run on this thread, while a [`TrueTime`]
    /// lives: every reading of the clock (several per message) then skips
    /// madsim's runtime lookup and the clone of its handle.
    static TRUE_TIME: RefCell<Option<RunClock>> = const { RefCell::new(None) };
}

/// madsim's shortest sleep: a sleep made for less ends this long after it was made.
pub const SLEEP_MIN: Duration = Duration::from_millis(1);

/// The run's clock at hand, and one madsim sleep that sets every timer
/// registered through [`wake_at`]: a timer set by a fresh `Sleep` also
/// cloned the handle and read the clock twice more, once per packet sent.
struct RunClock {
    time: madsim::time::TimeHandle,
    /// madsim's instant at true time zero.
    zero: madsim::time::Instant,
    /// A placeholder made for time zero: its deadline is reset to each
    /// timer's instant before it is polled ([`set_timer`]).
    setter: madsim::time::Sleep,
}

/// True simulated time in microseconds since the runtime started.
///
/// Derived from madsim's own clock (elapsed time since the runtime was built),
/// so it needs no per-run state and is deterministic. Panics outside a madsim runtime.
pub fn now_us() -> u64 {
    whole_us(elapsed())
}

/// A true time ([`elapsed`]'s) in whole microseconds, as [`now_us`] reads it.
pub fn whole_us(time: Duration) -> u64 {
    u64::try_from(time.as_micros()).expect("simulated time fits in u64 microseconds")
}

/// True simulated time since the runtime started, to the nanosecond
/// (madsim's own reading; [`now_us`] is it in whole microseconds).
pub fn elapsed() -> Duration {
    TRUE_TIME
        .with_borrow(|clock| clock.as_ref().map(|clock| clock.time.elapsed()))
        .unwrap_or_else(|| madsim::time::TimeHandle::current().elapsed())
}

/// A madsim sleep of `duration` in true time, made on the run's clock at
/// hand (what `madsim::time::sleep` does after looking the runtime up and
/// cloning its handle).
pub fn sleep(duration: Duration) -> madsim::time::Sleep {
    TRUE_TIME
        .with_borrow(|clock| clock.as_ref().map(|clock| clock.time.sleep(duration)))
        .unwrap_or_else(|| madsim::time::sleep(duration))
}

/// Sets a madsim timer that wakes `waker` once at true time `at` (since
/// the runtime started; still ahead): the timer a `Sleep` with that
/// deadline sets when first polled. Nothing is left to poll or drop. A
/// caller that owes madsim's shortest sleep ([`SLEEP_MIN`]) adds it when it
/// makes the instant, as madsim does when it makes a sleep, not here: a
/// deadline first polled later keeps its instant.
pub fn wake_at(at: Duration, waker: &Waker) {
    debug_assert!(at > elapsed(), "a timer is set for an instant still ahead");
    let mut cx = Context::from_waker(waker);
    let set_on_run_clock = TRUE_TIME.with_borrow_mut(|clock| {
        clock.as_mut().map(|clock| set_timer(&mut clock.setter, clock.zero + at, &mut cx)).is_some()
    });
    if !set_on_run_clock {
        let time = madsim::time::TimeHandle::current();
        let zero = time.now_instant() - time.elapsed();
        set_timer(&mut time.sleep_until(zero), zero + at, &mut cx);
    }
}

/// Resets `setter` to `deadline` (no shortest sleep applied: that is done
/// when a sleep is made) and polls it, which sets its timer.
fn set_timer(setter: &mut madsim::time::Sleep, deadline: madsim::time::Instant, cx: &mut Context<'_>) {
    let mut setter = Pin::new(setter);
    setter.as_mut().reset(deadline);
    let polled = setter.poll(cx);
    debug_assert!(polled.is_pending(), "a timer ahead is set, not rung");
}

/// A run's hold on its true time, from [`init_true_time`] until dropped.
#[must_use = "true time is read from the run's clock only while the guard lives"]
pub struct TrueTime(());

impl Drop for TrueTime {
    fn drop(&mut self) {
        TRUE_TIME.set(None);
    }
}

/// Marks the start of a run's true time. True time counts from the runtime's
/// creation, so this checks that it is called inside a madsim runtime
/// (calling `now_us` anywhere else is a determinism bug) and keeps that
/// runtime's clock at hand for `now_us` until the guard is dropped, which the
/// run does as it ends (a later run on the thread, or a read outside any, never
/// sees this one's clock).
pub fn init_true_time() -> TrueTime {
    let time = madsim::time::TimeHandle::try_current()
        .expect("init_true_time must be called inside a madsim runtime's block_on");
    let zero = time.now_instant() - time.elapsed();
    let setter = time.sleep_until(zero);
    TRUE_TIME.set(Some(RunClock { time, zero, setter }));
    TrueTime(())
}

/// A local clock: `local = local_ref + (true - true_ref) * (1e6 + rate_ppm) / 1e6`.
#[derive(Debug)]
pub struct LocalClock {
    true_ref_us: u64,
    local_ref_us: u64,
    rate_ppm: i64,
    /// Counts rate changes and steps, so a sleeper can tell that its deadline moved.
    changes: u64,
    /// Sleepers to wake when the mapping changes.
    wakers: Vec<Waker>,
}

/// A clone is a copy of the mapping; the sleepers stay registered on the original only.
impl Clone for LocalClock {
    fn clone(&self) -> LocalClock {
        LocalClock {
            true_ref_us: self.true_ref_us,
            local_ref_us: self.local_ref_us,
            rate_ppm: self.rate_ppm,
            changes: self.changes,
            wakers: Vec::new(),
        }
    }
}

impl LocalClock {
    /// A clock that reads `local_us` at true instant `true_us` and drifts at `rate_ppm`.
    pub fn new(true_us: u64, local_us: u64, rate_ppm: i64) -> LocalClock {
        assert_rate(rate_ppm);
        LocalClock { true_ref_us: true_us, local_ref_us: local_us, rate_ppm, changes: 0, wakers: Vec::new() }
    }

    /// Local time at true instant `true_us` (saturating at 0).
    pub fn local_us(&self, true_us: u64) -> u64 {
        let elapsed_true = i128::from(true_us) - i128::from(self.true_ref_us);
        // Floor division keeps the mapping monotonic for instants before the reference too.
        let elapsed_local = match (i64::try_from(elapsed_true).ok())
            .and_then(|elapsed| elapsed.checked_mul(PPM_ONE as i64 + self.rate_ppm))
        {
            // The common case in 64 bits: 128-bit division is a library call, and this runs on every clock read.
            Some(scaled) => i128::from(scaled.div_euclid(PPM_ONE as i64)),
            None => (elapsed_true * (PPM_ONE + i128::from(self.rate_ppm))).div_euclid(PPM_ONE),
        };
        let local = i128::from(self.local_ref_us) + elapsed_local;
        u64::try_from(local.max(0)).unwrap_or(u64::MAX)
    }

    /// The earliest true instant at or after `now_true_us` at which this clock
    /// reads at least `local_us`, assuming the mapping does not change again.
    pub fn true_us_when(&self, local_us: u64, now_true_us: u64) -> u64 {
        if self.local_us(now_true_us) >= local_us {
            return now_true_us;
        }
        // Smallest d with floor(d * k / 1e6) >= target - local_ref, i.e. d * k >= (target - local_ref) * 1e6.
        let k = PPM_ONE + i128::from(self.rate_ppm);
        let needed = (i128::from(local_us) - i128::from(self.local_ref_us)) * PPM_ONE;
        let elapsed_true = match (i64::try_from(needed), i64::try_from(k)) {
            // 64 bits when they fit (always, in practice): see `local_us`.
            (Ok(needed), Ok(k)) => i128::from(-((-needed).div_euclid(k))),
            _ => ceil_div(needed, k),
        };
        let at = i128::from(self.true_ref_us) + elapsed_true;
        let at = u64::try_from(at.max(0)).unwrap_or(u64::MAX).max(now_true_us);
        // Held by `true_us_when_is_the_earliest_instant` over rates and
        // targets; checked here in debug builds (a read per server round).
        debug_assert!(self.local_us(at) >= local_us, "true_us_when must reach the local target");
        at
    }

    /// Changes the drift from true instant `true_us` on; local time stays continuous.
    pub fn set_rate(&mut self, true_us: u64, rate_ppm: i64) {
        assert_rate(rate_ppm);
        self.rebase(true_us, 0);
        self.rate_ppm = rate_ppm;
        self.changed();
    }

    /// Steps local time by `delta_us` (forward or backward) at true instant `true_us`.
    pub fn step(&mut self, true_us: u64, delta_us: i64) {
        self.rebase(true_us, delta_us);
        self.changed();
    }

    pub fn rate_ppm(&self) -> i64 {
        self.rate_ppm
    }

    /// The true instant of the current references (where the last change took effect).
    pub fn true_ref_us(&self) -> u64 {
        self.true_ref_us
    }

    /// Local time at [`LocalClock::true_ref_us`].
    pub fn local_ref_us(&self) -> u64 {
        self.local_ref_us
    }

    /// Whether the drift respects the bound the protocol assumes. Steps are
    /// recorded separately by whoever takes them; this judges only the rate.
    pub fn within_bound(&self, bound_ppm: u64) -> bool {
        self.rate_ppm.unsigned_abs() <= bound_ppm
    }

    /// How many rate changes and steps this clock has seen.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    fn rebase(&mut self, true_us: u64, delta_us: i64) {
        let local = i128::from(self.local_us(true_us)) + i128::from(delta_us);
        self.local_ref_us = u64::try_from(local.max(0)).unwrap_or(u64::MAX);
        self.true_ref_us = true_us;
    }

    fn changed(&mut self) {
        self.changes += 1;
        for waker in self.wakers.drain(..) {
            waker.wake();
        }
    }

    fn register(&mut self, waker: &Waker) {
        if self.wakers.iter().any(|w| w.will_wake(waker)) {
            return;
        }
        if self.wakers.len() >= WAKERS_MAX {
            self.wakers.remove(0);
        }
        self.wakers.push(waker.clone());
    }
}

fn assert_rate(rate_ppm: i64) {
    assert!(rate_ppm >= RATE_PPM_MIN, "a local clock must move forward (rate_ppm {rate_ppm})");
    assert!(rate_ppm <= RATE_PPM_MAX, "rate_ppm {rate_ppm} is beyond any modelled drift");
}

/// Ceiling of `a / b` for a positive `b`.
fn ceil_div(a: i128, b: i128) -> i128 {
    assert!(b > 0);
    -((-a).div_euclid(b))
}

/// A node's clock, shared between its tasks and the world (which drifts and steps it).
pub type SharedClock = Arc<Mutex<LocalClock>>;

/// The node's local time now.
pub fn local_now(clock: &SharedClock) -> u64 {
    local_at(clock, now_us())
}

/// The node's local time at true instant `true_us`, in the clock's mapping
/// as it is now (for a caller that has read true time in this instant).
pub fn local_at(clock: &SharedClock, true_us: u64) -> u64 {
    clock.lock().expect("clock lock").local_us(true_us)
}

/// Sleeps until the local clock reads at least `local_us`.
///
/// Converts the local deadline to a true one and sleeps; a rate change or a
/// step during the sleep wakes it to recompute. madsim sleeps at least 1 ms,
/// so the wake-up may be up to 1 ms late in true time.
pub async fn sleep_until_local(clock: &SharedClock, local_us: u64) {
    for _ in 0..SLEEP_ITERATIONS_MAX {
        let now = now_us();
        let (deadline_true_us, changes) = {
            let c = clock.lock().expect("clock lock");
            if c.local_us(now) >= local_us {
                return;
            }
            (c.true_us_when(local_us, now), c.changes)
        };
        assert!(deadline_true_us > now);
        let sleep = madsim::time::sleep(Duration::from_micros(deadline_true_us - now));
        let changed = ClockChanged { clock, changes };
        futures::future::select(Box::pin(sleep), changed).await;
    }
}

/// Resolves once the clock's mapping changes after `changes`.
struct ClockChanged<'a> {
    clock: &'a SharedClock,
    changes: u64,
}

impl Future for ClockChanged<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if poll_changed(self.clock, self.changes, cx) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Whether `clock`'s mapping changed after its `changes`-th change; if not,
/// `cx` is woken at the next rate change or step.
pub fn poll_changed(clock: &SharedClock, changes: u64, cx: &mut Context<'_>) -> bool {
    let mut c = clock.lock().expect("clock lock");
    if c.changes != changes {
        return true;
    }
    c.register(cx.waker());
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_drift_is_identity_shifted() {
        let c = LocalClock::new(1_000, 50_000, 0);
        assert_eq!(c.local_us(1_000), 50_000);
        assert_eq!(c.local_us(11_000), 60_000);
        assert_eq!(c.true_us_when(60_000, 1_000), 11_000);
        assert_eq!(c.true_us_when(40_000, 5_000), 5_000);
    }

    #[test]
    fn drift_rates_scale_elapsed_time() {
        let fast = LocalClock::new(0, 0, 500);
        let slow = LocalClock::new(0, 0, -500);
        // 10 true seconds: +-5 ms.
        assert_eq!(fast.local_us(10_000_000), 10_005_000);
        assert_eq!(slow.local_us(10_000_000), 9_995_000);
        assert!(fast.within_bound(500));
        assert!(!fast.within_bound(499));
        assert!(slow.within_bound(500));
        let wild = LocalClock::new(0, 0, 50_000);
        assert_eq!(wild.local_us(1_000_000), 1_050_000);
        assert!(!wild.within_bound(500));
    }

    #[test]
    fn true_us_when_is_the_earliest_instant() {
        for rate in [-999_999, -30_000, -501, -1, 0, 1, 333, 7_919, 250_000] {
            let c = LocalClock::new(12_345, 777, rate);
            for target in [778, 1_000, 123_457, 9_999_999] {
                let at = c.true_us_when(target, 12_345);
                assert!(c.local_us(at) >= target, "rate {rate} target {target}");
                assert!(c.local_us(at - 1) < target, "rate {rate} target {target}: not the earliest");
            }
        }
    }

    #[test]
    fn set_rate_rebases_continuously() {
        let mut c = LocalClock::new(0, 0, 0);
        c.set_rate(1_000_000, 100_000);
        assert_eq!(c.local_us(1_000_000), 1_000_000);
        assert_eq!(c.local_us(2_000_000), 2_100_000);
        assert_eq!(c.rate_ppm(), 100_000);
        assert_eq!((c.true_ref_us(), c.local_ref_us()), (1_000_000, 1_000_000));
        assert_eq!(c.changes(), 1);
    }

    #[test]
    fn steps_go_both_ways_and_saturate() {
        let mut c = LocalClock::new(0, 0, 0);
        c.step(1_000, 5_000);
        assert_eq!(c.local_us(1_000), 6_000);
        c.step(2_000, -3_000);
        assert_eq!(c.local_us(2_000), 4_000);
        assert_eq!(c.local_us(3_000), 5_000);
        c.step(3_000, -1_000_000);
        assert_eq!(c.local_us(3_000), 0);
        assert_eq!(c.local_us(4_000), 1_000);
        // After a backward step, a target already passed once is ahead again.
        assert_eq!(c.true_us_when(2_000, 4_000), 5_000);
    }

    fn run<F: Future<Output = ()> + 'static>(seed: u64, f: impl FnOnce() -> F + Send + 'static) {
        std::thread::spawn(move || {
            let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
            rt.block_on(async move {
                let _time = init_true_time();
                f().await
            })
        })
        .join()
        .expect("simulation thread");
    }

    #[test]
    fn sleep_until_local_follows_drift() {
        run(1, || async {
            let start = now_us();
            let clock: SharedClock = Arc::new(Mutex::new(LocalClock::new(start, 0, -500_000)));
            sleep_until_local(&clock, 100_000).await;
            // Half speed: 100 ms local take 200 ms true (+1 ms madsim granularity).
            let elapsed = now_us() - start;
            assert!((200_000..=201_000).contains(&elapsed), "elapsed {elapsed}");
            assert!(local_now(&clock) >= 100_000);
        });
    }

    #[test]
    fn a_forward_step_mid_sleep_brings_the_deadline_in() {
        run(2, || async {
            let start = now_us();
            let clock: SharedClock = Arc::new(Mutex::new(LocalClock::new(start, 0, 0)));
            let stepper = clock.clone();
            madsim::task::spawn(async move {
                madsim::time::sleep(Duration::from_millis(100)).await;
                let now = now_us();
                stepper.lock().unwrap().step(now, 800_000);
            });
            sleep_until_local(&clock, 1_000_000).await;
            let elapsed = now_us() - start;
            // At 100 ms the clock jumps to 900 ms local, so 1 s local comes at 200 ms true,
            // not at the 1 s deadline computed before the step.
            assert!((200_000..=201_000).contains(&elapsed), "woke after {elapsed} us");
        });
    }

    #[test]
    fn a_backward_step_mid_sleep_extends_it() {
        run(3, || async {
            let start = now_us();
            let clock: SharedClock = Arc::new(Mutex::new(LocalClock::new(start, 0, 0)));
            let stepper = clock.clone();
            madsim::task::spawn(async move {
                madsim::time::sleep(Duration::from_millis(100)).await;
                let now = now_us();
                stepper.lock().unwrap().step(now, -50_000);
            });
            sleep_until_local(&clock, 200_000).await;
            let elapsed = now_us() - start;
            assert!((250_000..=251_000).contains(&elapsed), "elapsed {elapsed}");
        });
    }
}
