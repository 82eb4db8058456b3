//! The processes a real run starts: each server and each worker, by PID.
//!
//! Every process is started in its own process group (a Ctrl-C at the
//! terminal reaches the runner, which stops them) and is killed by its PID
//! when the run ends or the table is dropped — on success, failure, an
//! error or a panic of the runner.

use crate::actor::Actor;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One started process.
struct Running {
    child: Child,
    /// Stopped by the runner (a pause) or by itself (a worker's stall).
    stopped: bool,
}

/// The live processes of a run, one per actor.
pub struct Procs {
    exe: PathBuf,
    logs: PathBuf,
    running: BTreeMap<Actor, Running>,
    /// Every process started, for the report.
    pub started: u64,
}

/// Starts `exe args…` in its own process group (a Ctrl-C at the terminal
/// reaches the runner alone, which stops it by PID), its output appended to
/// `log`. The process is killed when the thread that started it ends
/// ([`die_with_the_starting_thread`]): the runner's, which stops every
/// process of its run before it ends, so only a runner killed or aborted
/// (a test binary killed mid-run, a crash) leaves them to this.
pub fn spawn_logged(exe: &Path, args: &[String], log: &Path) -> Result<Child, String> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: cannot open: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| format!("{}: {e}", log.display()))?;
    let mut command = Command::new(exe);
    command.args(args).env_remove("RUST_LOG").stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
    die_with_the_starting_thread(&mut command);
    command.spawn().map_err(|e| format!("cannot start {}: {e}", exe.display()))
}

/// Has the kernel send SIGKILL to `command`'s process when the thread that
/// spawns it ends (Linux's parent-death signal, which follows the thread,
/// not the process).
#[cfg(target_os = "linux")]
fn die_with_the_starting_thread(command: &mut Command) {
    let parent = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it calls `prctl` and `getppid`,
    // and allocates nothing (an error is built from the OS's code alone).
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have ended before the signal was set.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_the_starting_thread(_command: &mut Command) {}

impl Procs {
    pub fn new(exe: &Path, logs: &Path) -> Procs {
        Procs { exe: exe.to_path_buf(), logs: logs.to_path_buf(), running: BTreeMap::new(), started: 0 }
    }

    /// Starts `exe args…` as `actor`, its output appended to the actor's log.
    pub fn start(&mut self, actor: Actor, args: &[String]) -> Result<u32, String> {
        if self.running.contains_key(&actor) {
            return Err(format!("{actor} is already running"));
        }
        let child = spawn_logged(&self.exe, args, &self.log_of(actor))?;
        let pid = child.id();
        self.running.insert(actor, Running { child, stopped: false });
        self.started += 1;
        Ok(pid)
    }

    pub fn log_of(&self, actor: Actor) -> PathBuf {
        self.logs.join(format!("{actor}.log"))
    }

    pub fn is_running(&self, actor: Actor) -> bool {
        self.running.contains_key(&actor)
    }

    /// SIGKILL and reap: a crash.
    pub fn kill(&mut self, actor: Actor) {
        if let Some(mut running) = self.running.remove(&actor) {
            let _ = running.child.kill();
            let _ = running.child.wait();
        }
    }

    /// SIGSTOP: a pause the runner takes. A worker's pause lands between
    /// its database transactions: stopped while it holds a lock on a file
    /// (`/proc/locks`: a SQLite write in progress), it runs on for
    /// [`STOP_RETRY_AFTER`] and is stopped again; the last of [`STOP_TRIES`]
    /// stops holds, in a write or not.
    /// In the simulator the resource is a process of its own, which no
    /// paused client can hold; a worker with SQLite embedded, stopped in a
    /// write, would hold every other writer and any restore of the file
    /// until it woke — a stall of the resource the model has no fault for.
    pub fn stop(&mut self, actor: Actor) -> bool {
        let Some(running) = self.running.get_mut(&actor) else { return false };
        if running.stopped {
            return false;
        }
        let pid = running.child.id();
        for tries_left in (0..STOP_TRIES).rev() {
            if !signal(&running.child, Signal::SIGSTOP) {
                return false;
            }
            let in_a_write = matches!(actor, Actor::Client(_)) && stopped_within(pid) && holds_file_locks(pid);
            if !in_a_write || tries_left == 0 {
                break;
            }
            signal(&running.child, Signal::SIGCONT);
            std::thread::sleep(STOP_RETRY_AFTER);
        }
        running.stopped = true;
        true
    }

    /// SIGCONT: the end of a pause or of a worker's own stall.
    pub fn resume(&mut self, actor: Actor) -> bool {
        let Some(running) = self.running.get_mut(&actor) else { return false };
        if !running.stopped {
            return false;
        }
        running.stopped = false;
        signal(&running.child, Signal::SIGCONT)
    }

    /// A worker stopped itself (`/proc/PID/stat` says `T`): the runner now owns its SIGCONT.
    pub fn stopped_itself(&mut self, actor: Actor) -> bool {
        let Some(running) = self.running.get_mut(&actor) else { return false };
        if running.stopped || !proc_stopped(running.child.id()) {
            return false;
        }
        running.stopped = true;
        true
    }

    /// Processes that ended on their own since the last look, with how.
    pub fn exited(&mut self) -> Vec<(Actor, String)> {
        let mut ended = Vec::new();
        for (actor, running) in &mut self.running {
            if let Ok(Some(status)) = running.child.try_wait() {
                ended.push((*actor, status.to_string()));
            }
        }
        for (actor, _) in &ended {
            self.running.remove(actor);
        }
        ended
    }

    /// Kills every process still running and reaps it; returns how many there were.
    pub fn kill_all(&mut self) -> usize {
        let actors: Vec<Actor> = self.running.keys().copied().collect();
        for actor in &actors {
            self.kill(*actor);
        }
        actors.len()
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        self.kill_all();
    }
}

fn signal(child: &Child, signal: Signal) -> bool {
    i32::try_from(child.id()).is_ok_and(|pid| kill(Pid::from_raw(pid), signal).is_ok())
}

/// How many times a worker's pause is tried before it is taken in a write.
const STOP_TRIES: u32 = 100;
/// How long a worker stopped in a write runs on before it is stopped again.
const STOP_RETRY_AFTER: Duration = Duration::from_millis(2);
/// How long a SIGSTOP may take to land (a process in a system call stops as it returns).
const STOP_LANDS_WITHIN: Duration = Duration::from_millis(200);

/// Whether the process is stopped within [`STOP_LANDS_WITHIN`].
fn stopped_within(pid: u32) -> bool {
    let start = std::time::Instant::now();
    while !proc_stopped(pid) {
        if start.elapsed() > STOP_LANDS_WITHIN {
            return false;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    true
}

/// Whether the process holds a lock on any file (`/proc/locks`).
fn holds_file_locks(pid: u32) -> bool {
    std::fs::read_to_string("/proc/locks").is_ok_and(|locks| names_a_lock_of(&locks, pid))
}

/// Whether `/proc/locks` text names a lock `pid` holds. A line is
/// `1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF`, the PID its fifth
/// field; a waiter's line (`1: -> POSIX …`) is not a lock held.
fn names_a_lock_of(locks: &str, pid: u32) -> bool {
    let pid = pid.to_string();
    locks.lines().any(|line| {
        let mut fields = line.split_whitespace();
        fields.nth(1) != Some("->") && fields.nth(2) == Some(pid.as_str())
    })
}

/// Whether `/proc/PID/stat` shows the process stopped by a signal.
fn proc_stopped(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // `PID (comm) S …`: the state follows the last ')', as comm may hold anything.
    stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
}

#[cfg(test)]
mod tests {
    use super::{holds_file_locks, names_a_lock_of, proc_stopped, spawn_logged, Procs};
    use crate::actor::Actor;
    use fencelock::ClientId;
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};

    /// A worker that never leaves its write (one process holding a file's
    /// lock, as SQLite does in a write) is stopped all the same, once its tries are spent.
    #[test]
    fn a_worker_that_holds_a_lock_through_every_try_is_stopped_at_the_last() {
        let dir = std::env::temp_dir().join(format!("fencesim-procs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let mut procs = Procs::new(std::path::Path::new("python3"), &dir);
        let lock = dir.join("held").display().to_string();
        let hold =
            format!("import fcntl, time; f = open({lock:?}, 'w'); fcntl.lockf(f, fcntl.LOCK_EX); time.sleep(30)");
        let worker = Actor::Client(ClientId(0));
        let pid = procs.start(worker, &["-c".into(), hold]).expect("python3 starts");
        let start = Instant::now();
        while !holds_file_locks(pid) {
            assert!(start.elapsed() < Duration::from_secs(10), "the worker took its lock");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(procs.stop(worker));
        assert!(proc_stopped(pid), "the last try's stop holds");
        assert!(holds_file_locks(pid), "stopped in its write");
        drop(procs);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A process started by a thread that then ends is killed with it, as a
    /// run's processes are when their runner is killed.
    #[test]
    fn a_process_dies_with_the_thread_that_started_it() {
        let log = std::env::temp_dir().join(format!("fencesim-orphan-{}.log", std::process::id()));
        let starter = {
            let log = log.clone();
            std::thread::spawn(move || spawn_logged(std::path::Path::new("sleep"), &["30".into()], &log))
        };
        let mut child = starter.join().expect("the starting thread").expect("sleep starts");
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break Some(status);
            }
            if start.elapsed() > Duration::from_secs(5) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let _ = std::fs::remove_file(&log);
        assert_eq!(status.and_then(|s| s.signal()), Some(libc::SIGKILL), "killed when its starting thread ended");
    }

    const LOCKS: &str = "1: POSIX  ADVISORY  WRITE 4242 08:01:5678 0 EOF\n\
                         1: -> POSIX  ADVISORY  WRITE 77 08:01:5678 0 EOF\n\
                         2: FLOCK  ADVISORY  WRITE 9 00:1a:42 0 EOF\n";

    #[test]
    fn a_lock_is_named_by_its_holders_pid_alone() {
        assert!(names_a_lock_of(LOCKS, 4242));
        assert!(names_a_lock_of(LOCKS, 9));
        assert!(!names_a_lock_of(LOCKS, 77), "a waiter holds nothing");
        assert!(!names_a_lock_of(LOCKS, 424), "a PID is a whole field");
        assert!(!names_a_lock_of(LOCKS, 1), "the line number is not a PID");
        assert!(!names_a_lock_of("", 4242));
    }
}
