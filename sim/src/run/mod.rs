//! Running seeds: one run on its own thread and its verdict, sweeps of many,
//! the trace and its hash, what explains a run around it, how a traced run
//! is told (`log`) and filtered (`filter`), and scenario files.

pub mod coverage;
pub mod explain;
pub mod figures;
pub mod filter;
pub mod log;
pub mod scenario;
pub mod seed;
pub mod sweep;
pub mod timeline;
pub mod trace;
