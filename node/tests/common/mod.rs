//! Helpers for the real-process tests: a cluster started by the
//! `fencelock-node` binary in a temporary directory, and a guard whose Drop
//! kills every process the test started (by PID), even when the test fails.

#![allow(dead_code)]

use fencelock::NodeId;
use fencelock_node::cluster;
use fencelock_node::config::Cluster;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

/// The longest any test may run.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(120);

/// Tests share two cores. Those that start processes come in three kinds:
/// - a real run of `fencesim real` ([`planned_run`]) sleeps between its
///   planned faults (its servers and workers use a few per cent of a core),
///   and so do the B-1042 stories (each holds an idle cluster for a second,
///   most of it asleep past a lease, and times nothing): they run beside
///   anything;
/// - a test that drives a cluster itself (it times an election, stops a
///   leader) runs beside those, but beside no other such test, [`serial`];
/// - the load test keeps a cluster busy with clients: it is timed by
///   nobody, so it runs beside the real runs and the stories, but beside no
///   test that times a cluster (the load holds [`serial`]'s lock).
///
/// The tests of `in_process` start no process and take no guard: they use
/// the cores while the real runs sleep. In a whole run of the binary the
/// real runs, the load and the differential runs against the databases
/// start with its first test, in the background ([`start_background`]), so
/// that the tests before theirs in name order take their turn meanwhile,
/// and the binary takes about as long as its longest real run.
static DRIVEN: Mutex<()> = Mutex::new(());

/// No other cluster-driving test, nor the load, runs until the guard is dropped.
pub fn serial() -> MutexGuard<'static, ()> {
    start_background();
    DRIVEN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a test's work said: its report line, or its panic's message and place.
pub type Report = Result<String, String>;

/// The work of a test done once, by the first caller: the test itself, or
/// the background of a whole run ([`start_background`]) before it asks.
/// Later callers wait for it and get the same report. A panic's message
/// keeps where it happened: in the background its own output goes to the
/// test that started the background, not to the one that fails.
pub fn done_once(cell: &'static OnceLock<Report>, work: fn() -> String) -> &'static Report {
    record_panic_places();
    cell.get_or_init(|| {
        std::panic::catch_unwind(work).map_err(|panic| {
            let place = PANICKED_AT.take().map(|at| format!(" (panicked at {at})")).unwrap_or_default();
            format!("{}{place}", panic_message(&*panic))
        })
    })
}

/// [`done_once`] for the test itself: its report line, or a panic that
/// names `what` failed and why.
pub fn report_once(cell: &'static OnceLock<Report>, work: fn() -> String, what: &str) -> String {
    start_background();
    match done_once(cell, work) {
        Ok(report) => report.clone(),
        Err(message) => panic!("{what} failed: {message}"),
    }
}

thread_local! {
    /// Where the last panic on this thread happened ([`record_panic_places`]).
    static PANICKED_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Adds to the panic hook a note of where each panic happened, for [`done_once`].
fn record_panic_places() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED_AT.set(info.location().map(ToString::to_string));
            previous(info);
        }));
    });
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let message = panic.downcast_ref::<String>().map(String::as_str).or_else(|| panic.downcast_ref::<&str>().copied());
    message.unwrap_or("a panic without a message").to_string()
}

/// Runs `test` on a two-thread runtime (the machine has two cores), bounded
/// by [`TEST_TIMEOUT`]: on a timeout the test's future is dropped, and with it
/// its `TestCluster`, whose Drop kills the processes.
pub fn bounded<T>(test: impl std::future::Future<Output = T>) -> T {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime
        .block_on(async { tokio::time::timeout(TEST_TIMEOUT, test).await.expect("the test ends within TEST_TIMEOUT") })
}

pub fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fencelock-node"))
}

/// Runs the binary with `args`, bounded in time.
pub fn run(args: &[&str]) -> Output {
    let mut child = Command::new(exe())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let start = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A running cluster in a temporary directory; dropping it kills every
/// process recorded in its PID file (and any PID added by the test).
pub struct TestCluster {
    pub dir: tempfile::TempDir,
    pub cluster: Cluster,
    /// Every PID this cluster has had, across restarts.
    pub pids: Vec<(NodeId, i32)>,
    /// The `cluster up` line "elected in N ms".
    pub election_ms: u64,
}

/// Every live [`TestCluster`]'s processes, across its restarts: what a
/// signal to this binary stops before it ends it ([`stop_clusters_on_signal`]).
static CLUSTER_PIDS: Mutex<Vec<(NodeId, i32)>> = Mutex::new(Vec::new());

/// On Ctrl-C (SIGINT), SIGTERM or SIGHUP: stops every live cluster's
/// processes by PID, then ends the binary with 128 + the signal. A
/// cluster's servers run in process groups of their own (as `cluster up`
/// starts them for a service), so the terminal's Ctrl-C does not reach
/// them, and a binary ended by a signal runs no `Drop`. The real runs'
/// processes die with the binary by themselves (`fencesim::real`).
fn stop_clusters_on_signal() {
    static WATCH: OnceLock<()> = OnceLock::new();
    WATCH.get_or_init(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]).expect("signal handlers");
        std::thread::spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let pids = CLUSTER_PIDS.lock().unwrap_or_else(PoisonError::into_inner).clone();
                cluster::stop(&pids, Duration::from_millis(500));
                std::process::exit(128 + signal);
            }
        });
    });
}

impl TestCluster {
    pub fn up(nodes: usize) -> TestCluster {
        stop_clusters_on_signal();
        let dir = tempfile::tempdir().expect("a temporary directory");
        // The cluster file (admin requests on) is written here, not by
        // `cluster up`: this process then never gives two of its clusters
        // one port, not even one a stopped cluster will bind again when the
        // test restarts it.
        cluster::write_cluster_file(dir.path(), nodes, true, false).expect("a cluster file");
        let mut cluster = TestCluster { cluster: placeholder(), dir, pids: Vec::new(), election_ms: 0 };
        cluster.start(nodes);
        cluster
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn dir_arg(&self) -> String {
        self.path().display().to_string()
    }

    /// `cluster up` on this directory's cluster file (first start or restart from disk).
    pub fn start(&mut self, nodes: usize) {
        let dir = self.dir_arg();
        let output = run(&["cluster", "up", "--nodes", &nodes.to_string(), "--dir", &dir]);
        // Record the PIDs before judging, so a failed start is still cleaned up.
        if let Ok(pids) = cluster::read_pids(self.path()) {
            CLUSTER_PIDS.lock().unwrap_or_else(PoisonError::into_inner).extend(&pids);
            self.pids.extend(pids);
        }
        assert!(output.status.success(), "cluster up failed: {}", stderr(&output));
        let out = stdout(&output);
        self.election_ms = out
            .split("elected in ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|ms| ms.parse().ok())
            .unwrap_or_else(|| panic!("no election time in {out:?}"));
        self.cluster = Cluster::load(&self.path().join(cluster::CLUSTER_FILE)).expect("the cluster file loads");
    }

    /// The recorded PID of node `id` in its current life.
    pub fn pid(&self, id: NodeId) -> i32 {
        self.pids.iter().rev().find(|(n, _)| *n == id).map(|(_, p)| *p).expect("a recorded node")
    }

    pub fn kill9(&self, id: NodeId) {
        let pid = self.pid(id);
        assert!(cluster::is_our_live_process(pid), "node {} (pid {pid}) is running", id.0);
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).expect("kill -9");
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        cluster::stop(&self.pids, Duration::from_millis(500));
        CLUSTER_PIDS.lock().unwrap_or_else(PoisonError::into_inner).retain(|pid| !self.pids.contains(pid));
    }
}

fn placeholder() -> Cluster {
    Cluster {
        file: PathBuf::new(),
        cluster_id: String::new(),
        lease_ms: 0,
        heartbeat_ms: 0,
        election_ms_min: 0,
        election_ms_max: 0,
        drift_ppm_max: 0,
        admin: false,
        history: None,
        variant: fencelock::Variant::Default,
        nodes: Vec::new(),
    }
}

/// PIDs of live processes whose command line names `dir`.
pub fn processes_naming(dir: &Path) -> Vec<u32> {
    let needle = dir.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| String::from_utf8_lossy(&line).replace('\0', " ").contains(&needle))
        })
        .collect()
}

/// One real run of `plan` on `model` (`fencesim real`'s library) in a new
/// temporary directory, with no process of it left when it returns: the
/// directory (kept until the first value is dropped), its path and the run.
/// The directory is made in cargo's temporary folder for this package's
/// tests (`target/tmp`), not the system's: a filtered test run leaves the
/// runs no selected test took (`planned_run`) there, for `cargo clean`.
pub fn real_run(
    seed: u64,
    model: fencesim::model::Model,
    plan: Vec<fencesim::faults::FaultEvent>,
) -> (tempfile::TempDir, PathBuf, fencesim::real::RealRun) {
    let temp = tempfile::Builder::new()
        .prefix("real-run-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("a temporary directory in target/tmp");
    let dir = temp.path().join("run");
    let options = fencesim::real::RealOptions {
        seed,
        model,
        resource: None,
        dir: dir.clone(),
        node_bin: exe(),
        plan: Some(plan),
        stop: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    };
    let run = fencesim::real::run(&options).expect("the run starts and ends");
    for violation in &run.outcome.violations {
        eprintln!("VIOLATION {violation}");
    }
    assert!(processes_naming(&dir).is_empty(), "every process of the run is stopped, tools included");
    (temp, dir, run)
}

/// A real run a test judges: the test's name, and the run's seed, model and plan.
pub struct Planned {
    pub test: &'static str,
    pub seed: u64,
    pub model: fencesim::model::Model,
    pub plan: Vec<fencesim::faults::FaultEvent>,
}

/// A real run as [`real_run`] returns it.
pub type Ran = (tempfile::TempDir, PathBuf, fencesim::real::RealRun);

/// Every real run of this binary, each kept until its test takes it.
static REAL_RUNS: OnceLock<Mutex<BTreeMap<&'static str, std::thread::Result<Ran>>>> = OnceLock::new();

/// The real run planned for `test`. The first test to ask (or
/// [`start_background`], before it) starts every planned run of this binary
/// (`real_run::planned`, `real_restore::planned`) side by side, and every
/// test that asks waits for them all: each mostly sleeps between its
/// faults, so together they take as long as the longest, where one after
/// another they took their sum. A test run alone waits for them all too;
/// every process of every run is stopped by its PID before any test goes on.
pub fn planned_run(test: &str) -> Ran {
    start_background();
    let taken = real_runs().lock().unwrap_or_else(PoisonError::into_inner).remove(test);
    match taken {
        Some(Ok(ran)) => ran,
        Some(Err(panic)) => panic!("the real run of {test} failed: {}", panic_message(&*panic)),
        None => panic!("no real run is planned for {test}, or another test took it"),
    }
}

/// Every planned real run, played the first time any caller asks; later
/// callers wait until they have all ended.
fn real_runs() -> &'static Mutex<BTreeMap<&'static str, std::thread::Result<Ran>>> {
    REAL_RUNS.get_or_init(|| {
        let planned: Vec<Planned> =
            crate::real_run::planned().into_iter().chain(crate::real_restore::planned()).collect();
        let ran = std::thread::scope(|scope| {
            let running: Vec<_> =
                planned.into_iter().map(|p| (p.test, scope.spawn(move || real_run(p.seed, p.model, p.plan)))).collect();
            running.into_iter().map(|(test, run)| (test, run.join())).collect()
        });
        Mutex::new(ran)
    })
}

/// In a whole run of this binary (no test names, no `--skip`, only the
/// options [`whole_run`] knows), starts the real runs, the load and the
/// differential runs in the background; in any other, does nothing, and
/// the first test that asks for a real run starts them (a load or
/// differential test plays its own). Only a whole run is sure to take
/// every such test, and so to wait for the runs (and their processes'
/// ends) before it exits. Every test that starts processes or takes a
/// background run's report calls it (a B-1042 story directly, the others
/// through [`serial`], [`planned_run`] or [`report_once`]), so the background
/// starts with the first of them, whatever the order of the tests.
pub fn start_background() {
    static BACKGROUND: OnceLock<()> = OnceLock::new();
    BACKGROUND.get_or_init(|| {
        // A name that is not UTF-8 is a filter this file cannot read: not a whole run.
        let args: Option<Vec<String>> = std::env::args_os().skip(1).map(|arg| arg.into_string().ok()).collect();
        if args.is_some_and(|args| whole_run(args.into_iter())) {
            std::thread::spawn(real_runs);
            std::thread::spawn(crate::throughput::play);
            std::thread::spawn(crate::in_process::resource_differential::play_all);
        }
    });
}

/// Whether a test binary's arguments select every test: each is an
/// option that selects none, or the value such an option takes.
fn whole_run(mut args: impl Iterator<Item = String>) -> bool {
    const FLAGS: &[&str] = &["--nocapture", "--no-capture", "--show-output", "-q", "--quiet", "--report-time"];
    const WITH_VALUE: &[&str] = &["--test-threads", "--color", "--format", "-Z"];
    while let Some(arg) = args.next() {
        let value_inline = arg.split_once('=').is_some_and(|(name, _)| WITH_VALUE.contains(&name));
        if FLAGS.contains(&arg.as_str()) || value_inline {
            continue;
        }
        if !WITH_VALUE.contains(&arg.as_str()) || args.next().is_none() {
            return false;
        }
    }
    true
}

/// Only arguments that select every test make a whole run: a name, a
/// `--skip` or an option this file does not know leaves the real runs to
/// the first test that asks for one.
#[test]
fn a_whole_run_is_told_by_its_arguments() {
    let whole = |args: &[&str]| whole_run(args.iter().map(|arg| arg.to_string()));
    assert!(whole(&[]));
    assert!(whole(&["--nocapture", "--test-threads", "2", "-q", "--color=never"]));
    assert!(whole(&["-Z", "unstable-options", "--report-time", "--format", "json"]));
    assert!(!whole(&["real_run::"]));
    assert!(!whole(&["--test-threads", "2", "cluster"]));
    assert!(!whole(&["--skip", "real_run"]));
    assert!(!whole(&["--exact"]));
    assert!(!whole(&["--ignored"]));
    assert!(!whole(&["--test-threads"]), "an option without its value");
}
