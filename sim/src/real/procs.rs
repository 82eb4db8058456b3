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
/// reaches the runner alone, which stops it by PID), its output appended to `log`.
pub fn spawn_logged(exe: &Path, args: &[String], log: &Path) -> Result<Child, String> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: cannot open: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| format!("{}: {e}", log.display()))?;
    Command::new(exe)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))
}

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

    /// SIGSTOP: a pause the runner takes.
    pub fn stop(&mut self, actor: Actor) -> bool {
        let Some(running) = self.running.get_mut(&actor) else { return false };
        if running.stopped {
            return false;
        }
        running.stopped = signal(&running.child, Signal::SIGSTOP);
        running.stopped
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

/// Whether `/proc/PID/stat` shows the process stopped by a signal.
fn proc_stopped(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // `PID (comm) S …`: the state follows the last ')', as comm may hold anything.
    stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
}
