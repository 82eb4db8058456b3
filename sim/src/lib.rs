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

pub mod checker;
pub mod clock;
pub mod disk;
pub mod faults;
pub mod history;
pub mod model;
pub mod net;
pub mod wire;
