//! `fencesim`: the madsim world around the `fencelock` core.
//!
//! The folders are the layers, each using only those listed before it:
//! the model and the history (what a run is asked to do and what it
//! records), the simulated machine (clocks, timers, disks, the wire and the
//! network), the fault plan, the nodes (servers, the resource, workers), the
//! world that plays the plan, the checker, running seeds, scripted stories,
//! shrinking failures, and the command line.

#[cfg(not(madsim))]
compile_error!(
    "fencesim must be built with `--cfg madsim` (set in .cargo/config.toml). \
     A RUSTFLAGS environment variable replaces that setting: unset RUSTFLAGS, \
     or add `--cfg madsim` to it."
);

pub mod actor;
pub mod alloc;
pub mod model;
pub mod streams;

pub mod machine;

pub mod faults;
pub mod history;
pub mod nodes;
pub mod world;

pub mod checker;

pub mod run;
pub mod script;
pub mod shrink;
pub mod signals;

pub mod real;

pub mod cli;

/// `1 seed`, `2 seeds`: a count and its noun, for every line people read.
pub fn plural(n: impl Into<u64>, noun: &str) -> String {
    match n.into() {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}
