//! `fencesim bench`: simulation speed and memory, measured in one process
//! (the long runs each in a child process of their own, (d)).
//!
//! (a) the baseline: bare madsim message passing, 5 nodes each sending one
//! message per simulated ms for 60 simulated s through madsim's `Endpoint`;
//! (b) the full stack on the standard model: messages per second,
//! simulated-to-real speedup and seeds per second on one thread;
//! (c) `overhead_ratio` = baseline ÷ full-stack messages per second.
//! (a) and (b) are timed in the process's CPU seconds (both run on one
//! thread at a time), in `ROUNDS` interleaved rounds, and each figure is the
//! rounds' median: on a shared machine the speed drifts by tens of percent
//! within seconds, and a baseline timed in a fast moment against a stack
//! timed in a slow one made the ratio swing from 1.1 to 1.9 on one tree;
//! (d) peak memory (VmHWM) of one run of 10 simulated minutes, one of an
//!     hour and one of four hours, each in a process of its own (this
//!     binary started again, `bench --long-run-minutes M`), so a peak is its
//!     run's as `/usr/bin/time` reads it: in one process, what an earlier
//!     run left in the allocator's free lists stayed resident under a later
//!     run's peak; each with its address space laid out the same every time
//!     (`one_layout`). Memory flat in a run's length shows as three equal
//!     figures;
//! (e) what the `linearizable` check adds to a run: the same seeds run again,
//!     each history checked a second time by that family alone, timed apart.

use crate::checker::{check_linearizable, CheckConfig};
use crate::cli::args::{parse_seeds, BenchArgs, InputError};
use crate::model::Model;
use crate::plural;
use crate::run::seed::{run_seed, run_seed_streamed};
use crate::run::sweep::sweep;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BASELINE_NODES: u8 = 5;
const BASELINE_SIM_S: u64 = 60;
/// Every node sends one message per simulated ms.
const BASELINE_MESSAGES: u64 = BASELINE_NODES as u64 * BASELINE_SIM_S * 1_000;
/// Interleaved rounds of the baseline and the full stack (see the module's doc).
const ROUNDS: usize = 5;

pub fn bench(args: &BenchArgs) -> Result<ExitCode, InputError> {
    if let Some(minutes) = args.long_run_minutes {
        return long_run_here(minutes);
    }
    let seeds = parse_seeds(&args.seeds)?;
    let seed_count = seeds.end - seeds.start;
    // The long runs go first, shortest first: measured in this process (the
    // fallback), what an earlier, shorter run left allocated is below a later one's peak.
    let long_runs = || Ok::<_, String>([long_run_apart(10)?, long_run_apart(60)?, long_run_apart(240)?]);
    let [ten_minutes, hour, four_hours] = match long_runs() {
        Ok(runs) => runs,
        Err(why) => {
            eprintln!("bench: {why}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let model = Model::default();
    let rounds: Vec<Round> = (0..ROUNDS).map(|_| round(&model, seeds.clone())).collect();
    let median = |figure: fn(&Round) -> f64| median(rounds.iter().map(figure).collect());
    let baseline_msgs_per_s = median(|r| r.baseline_msgs_per_s);
    let stack_msgs_per_s = median(|r| r.stack_msgs_per_s);
    let seeds_per_s = median(|r| r.seeds_per_s);
    let sim_speedup = median(|r| r.sim_speedup);
    let ratio = |r: &Round| r.baseline_msgs_per_s / r.stack_msgs_per_s.max(1e-9);
    let overhead_ratio = median(ratio);
    // The spread says how far to trust the median on this machine.
    let ratios: Vec<f64> = rounds.iter().map(|r| (ratio(r) * 100.0).round() / 100.0).collect();
    let linearizable_pct = linearizable_share(&model, seeds);
    // Read from KiB: whole MiB would round a 10 % growth away or double it.
    // `None` where the peaks are unknown (not Linux).
    let peak_growth = growth(ten_minutes.peak_kib, four_hours.peak_kib);
    let heap_kib = |run: &LongRun| run.heap_peak_kib.unwrap_or(0);
    let heap_growth = growth(heap_kib(&ten_minutes), heap_kib(&four_hours));
    if args.json {
        crate::outln!(
            "{}",
            serde_json::json!({
                "baseline_msgs_per_s": baseline_msgs_per_s.round(),
                "stack_msgs_per_s": stack_msgs_per_s.round(),
                "overhead_ratio": (overhead_ratio * 100.0).round() / 100.0,
                "overhead_ratio_rounds": ratios,
                "sim_speedup": sim_speedup.round(),
                "seeds_per_s": (seeds_per_s * 100.0).round() / 100.0,
                "seeds": seed_count,
                "hour_run_peak_mib": hour.peak_mib(),
                "hour_run_wall_s": (hour.wall_s * 10.0).round() / 10.0,
                "hour_run_messages": hour.messages,
                "ten_minute_run_peak_mib": ten_minutes.peak_mib(),
                "four_hour_run_peak_mib": four_hours.peak_mib(),
                "four_hour_run_wall_s": (four_hours.wall_s * 10.0).round() / 10.0,
                "four_hour_over_ten_minute_peak": peak_growth,
                "ten_minute_run_heap_peak_kib": ten_minutes.heap_peak_kib,
                "hour_run_heap_peak_kib": hour.heap_peak_kib,
                "four_hour_run_heap_peak_kib": four_hours.heap_peak_kib,
                "four_hour_over_ten_minute_heap_peak": heap_growth,
                "linearizable_check_pct": (linearizable_pct * 10.0).round() / 10.0,
            })
        );
    } else {
        crate::outln!("baseline (madsim Endpoint, {BASELINE_NODES} nodes x 1 msg/ms x {BASELINE_SIM_S} s): {baseline_msgs_per_s:.0} messages/s");
        crate::outln!(
            "full stack (standard model, {}, 1 thread): {stack_msgs_per_s:.0} messages/s, {sim_speedup:.0}x real time, {seeds_per_s:.2} seeds/s",
            plural(seed_count, "seed")
        );
        let spread: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        crate::outln!("overhead_ratio: {overhead_ratio:.2} (median of {ROUNDS} rounds: {})", spread.join(", "));
        crate::outln!(
            "one simulated hour: peak memory {} MiB, {:.1} s wall, {} messages",
            hour.peak_mib(),
            hour.wall_s,
            hour.messages
        );
        crate::outln!(
            "peak memory by run length: 10 simulated minutes {} MiB, 1 hour {} MiB, 4 hours {} MiB ({:.1} s wall; 4 hours / 10 minutes {})",
            ten_minutes.peak_mib(),
            hour.peak_mib(),
            four_hours.peak_mib(),
            four_hours.wall_s,
            peak_growth.map_or("unknown".to_string(), |growth| format!("{growth:.2}"))
        );
        let heap = |run: &LongRun| run.heap_peak_kib.map_or("unknown".to_string(), |kib| format!("{kib} KiB"));
        crate::outln!(
            "heap held at its peak by run length: 10 simulated minutes {}, 1 hour {}, 4 hours {} (4 hours / 10 minutes {})",
            heap(&ten_minutes),
            heap(&hour),
            heap(&four_hours),
            heap_growth.map_or("unknown".to_string(), |growth| format!("{growth:.2}"))
        );
        crate::outln!("linearizable check: adds {linearizable_pct:.1}% to a run's wall time");
    }
    Ok(ExitCode::SUCCESS)
}

/// One round of the speed figures: the baseline, then the full stack on `seeds`.
struct Round {
    baseline_msgs_per_s: f64,
    stack_msgs_per_s: f64,
    seeds_per_s: f64,
    sim_speedup: f64,
}

fn round(model: &Model, seeds: std::ops::Range<u64>) -> Round {
    let seed_count = seeds.end - seeds.start;
    let (baseline_messages, baseline_s) = baseline();
    let started = cpu_s();
    let results = sweep(seeds, model, 1, false, None);
    let stack_s = (cpu_s() - started).max(1e-9);
    let sim_s: f64 = results.iter().map(|r| r.sim_ms as f64 / 1_000.0).sum();
    let messages: u64 = results.iter().map(|r| r.messages).sum();
    Round {
        baseline_msgs_per_s: baseline_messages as f64 / baseline_s,
        stack_msgs_per_s: messages as f64 / stack_s,
        seeds_per_s: seed_count as f64 / stack_s,
        sim_speedup: sim_s / stack_s,
    }
}

fn median(mut figures: Vec<f64>) -> f64 {
    figures.sort_by(f64::total_cmp);
    figures[figures.len() / 2]
}

/// The CPU seconds this process has used (every thread's), or wall seconds
/// since the first call where the system cannot say.
fn cpu_s() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `clock_gettime` writes one `timespec` through the pointer,
        // which points at a live local of that type.
        #[allow(unsafe_code)]
        let read = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut time) };
        if read == 0 {
            return time.tv_sec as f64 + time.tv_nsec as f64 / 1e9;
        }
    }
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// What the `linearizable` check adds to a standard run's wall time, in
/// percent: each of `seeds` runs (checks included) is timed, then its history
/// is checked again by that family alone; the family's time is compared with
/// the rest of the run.
fn linearizable_share(model: &Model, seeds: std::ops::Range<u64>) -> f64 {
    let (mut run_s, mut check_s) = (0.0, 0.0);
    for seed in seeds {
        let started = Instant::now();
        let outcome = run_seed(seed, model);
        run_s += started.elapsed().as_secs_f64();
        let config = CheckConfig { run_end_us: outcome.sim_ms * 1_000, ..CheckConfig::for_model(model) };
        let started = Instant::now();
        let verdict = check_linearizable(&outcome.history, config);
        check_s += started.elapsed().as_secs_f64();
        std::hint::black_box(verdict);
    }
    100.0 * check_s / (run_s - check_s).max(1e-9)
}

/// Bare madsim: every node sends one message per simulated ms to the next
/// node through `Endpoint` for `BASELINE_SIM_S`, and drains what it receives.
/// Returns the messages handed to the network (counted like the full stack's
/// `messages`: every send) and the CPU seconds taken.
fn baseline() -> (u64, f64) {
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    let counter_main = sent.clone();
    let started = cpu_s();
    std::thread::spawn(move || {
        let runtime = madsim::runtime::Runtime::with_seed_and_config(1, madsim::Config::default());
        runtime.block_on(async move {
            let handle = madsim::runtime::Handle::current();
            let addr = |n: u8| SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, n + 1)), 1);
            let mut nodes = Vec::new();
            for n in 0..BASELINE_NODES {
                let counter = counter.clone();
                let node = handle
                    .create_node()
                    .ip(addr(n).ip())
                    .init(move || {
                        let counter = counter.clone();
                        async move {
                            let endpoint = Arc::new(madsim::net::Endpoint::bind(addr(n)).await.expect("bind"));
                            let receiver = endpoint.clone();
                            madsim::task::spawn(async move {
                                let mut buffer = [0u8; 64];
                                while receiver.recv_from(0, &mut buffer).await.is_ok() {}
                            });
                            let to = addr((n + 1) % BASELINE_NODES);
                            let start = madsim::time::Instant::now();
                            for k in 1..=BASELINE_SIM_S * 1_000 {
                                // `send_to` itself sleeps madsim's minimum of 1 ms, so
                                // the pace holds; sleep only if a send was quicker.
                                let _ = endpoint.send_to(to, 0, b"ping").await;
                                counter.fetch_add(1, Ordering::Relaxed);
                                let due = start + Duration::from_millis(k);
                                if madsim::time::Instant::now() < due {
                                    madsim::time::sleep_until(due).await;
                                }
                            }
                            std::future::pending::<()>().await;
                        }
                    })
                    .build();
                nodes.push(node);
            }
            madsim::time::sleep(Duration::from_secs(BASELINE_SIM_S)).await;
            // Until every node has finished its schedule (a bounded grace period).
            for _ in 0..BASELINE_SIM_S * 1_000 {
                if counter_main.load(Ordering::Relaxed) >= BASELINE_MESSAGES {
                    break;
                }
                madsim::time::sleep(Duration::from_millis(1)).await;
            }
            drop(nodes);
        });
    })
    .join()
    .expect("the baseline run does not panic");
    let messages = sent.load(Ordering::Relaxed);
    assert_eq!(messages, BASELINE_MESSAGES, "the baseline sends one message per node per simulated ms");
    (messages, (cpu_s() - started).max(1e-9))
}

/// One long run's figures; `bench --long-run-minutes` prints them as JSON.
#[derive(Serialize, Deserialize)]
struct LongRun {
    peak_kib: u64,
    /// The most the run held on the heap at once (`alloc::Counting`),
    /// where the binary counts it.
    #[serde(default)]
    heap_peak_kib: Option<u64>,
    wall_s: f64,
    messages: u64,
}

impl LongRun {
    fn peak_mib(&self) -> u64 {
        self.peak_kib / 1024
    }
}

/// `longer` over `shorter`, rounded to hundredths; `None` where either is unknown (0).
fn growth(shorter: u64, longer: u64) -> Option<f64> {
    (shorter > 0 && longer > 0).then(|| (longer as f64 / shorter as f64 * 100.0).round() / 100.0)
}

/// `bench --long-run-minutes M`: one long run in this process, its figures
/// as one JSON object on stdout (what [`long_run_apart`] reads).
fn long_run_here(minutes: u64) -> Result<ExitCode, InputError> {
    if !(2..=LONG_RUN_MINUTES_MAX).contains(&minutes) {
        return Err(InputError(format!(
            "--long-run-minutes {minutes}: a long run takes 2 to {LONG_RUN_MINUTES_MAX} simulated minutes (the last minute is its liveness phase)"
        )));
    }
    crate::outln!("{}", serde_json::to_string(&long_run(minutes)).expect("figures serialize"));
    Ok(ExitCode::SUCCESS)
}

/// The longest run `--long-run-minutes` takes: a simulated day.
const LONG_RUN_MINUTES_MAX: u64 = 24 * 60;

/// One long run in a process of its own (this binary, `bench
/// --long-run-minutes`), so its peak is its own run's and nothing an earlier
/// run left behind. Where the binary cannot be started again, the run is
/// measured here, from a peak reset before it, and stderr says so; a child
/// that started and failed (a panic, a signal, output that is not its
/// figures) is an error, not measured twice.
fn long_run_apart(minutes: u64) -> Result<LongRun, String> {
    let started = std::env::current_exe().and_then(|exe| {
        let mut command = std::process::Command::new(exe);
        command.args(["bench", "--long-run-minutes", &minutes.to_string()]).stderr(std::process::Stdio::inherit());
        one_layout(&mut command);
        command.output()
    });
    let output = match started {
        Ok(output) => output,
        Err(error) => {
            eprintln!(
                "bench: the {minutes}-minute run cannot start a process of its own ({error}): measured in this one"
            );
            // Here the frees of what the bench held before count against the
            // run: its heap is not known, only the resident peak.
            return Ok(LongRun { heap_peak_kib: None, ..long_run(minutes) });
        }
    };
    if !output.status.success() {
        return Err(format!("the {minutes}-minute run's process ended with {}", output.status));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|error| format!("the {minutes}-minute run's process printed no figures: {error}"))
}

/// Starts `command` with its address space laid out the same every time:
/// Linux's address randomization off, as `setarch -R` does. A run's heap is
/// the same from run to run, but with the binary and the C library mapped
/// at random places, the kernel's fault-around brought a different share of
/// their pages in: a length's peak moved by up to half a MiB between runs
/// (0.05 of the 4-hour over 10-minute ratio), and with one layout it moves
/// by a few pages. Where the persona cannot be set, the run starts as it is.
#[cfg(target_os = "linux")]
fn one_layout(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec the closure makes two `personality`
    // calls, which are async-signal-safe and allocate nothing.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(|| {
            // 0xffffffff reads the persona without changing it.
            let persona = libc::personality(0xffff_ffff);
            if let Ok(persona) = libc::c_ulong::try_from(persona) {
                libc::personality(persona | libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn one_layout(_command: &mut std::process::Command) {}

/// One run of `minutes` simulated minutes of the standard model (the last
/// minute its liveness phase), with the process's peak memory reset first.
fn long_run(minutes: u64) -> LongRun {
    let liveness_ms = 60_000;
    let model = Model { safety_ms: minutes * 60_000 - liveness_ms, liveness_ms, ..Model::default() };
    reset_peak_rss();
    crate::alloc::count_from_here();
    let started = Instant::now();
    let outcome = run_seed_streamed(0, &model);
    let heap_peak_kib = crate::alloc::heap_peak_bytes().map(|bytes| bytes.div_ceil(1024));
    LongRun {
        peak_kib: peak_rss_kib(),
        heap_peak_kib,
        wall_s: started.elapsed().as_secs_f64(),
        messages: outcome.messages,
    }
}

/// Sets the process's peak resident set size back to what it holds now
/// (Linux: `5` into `/proc/self/clear_refs`); elsewhere nothing happens,
/// and a peak then covers the runs before it too.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The process's peak resident set size (Linux `VmHWM`), 0 where unknown.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
