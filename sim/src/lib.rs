//! `fencesim`: the madsim world around the `fencelock` core.
//!
//! Nodes, the simulated wire, local clocks, disks, faults, the workload, the
//! history and its checker, and the command line.

#[cfg(not(madsim))]
compile_error!(
    "fencesim must be built with `--cfg madsim` (set in .cargo/config.toml). \
     A RUSTFLAGS environment variable replaces that setting: unset RUSTFLAGS, \
     or add `--cfg madsim` to it."
);

pub mod bench;
pub mod checker;
pub mod cli;
pub mod clock;
pub mod context;
pub mod disk;
pub mod envelope;
pub mod faults;
pub mod history;
pub mod hunt;
pub mod model;
pub mod net;
pub mod resource_node;
pub mod run;
pub mod scenario;
pub mod script;
pub mod server;
pub mod timer;
pub mod trace;
pub mod wire;
pub mod workload;
pub mod world;
