//! The scenario tests, the regression seeds and the checks of the docs, as
//! one test target: one binary to build and link instead of one per file.
//! Each module is one file of this folder; `cargo test --release -p
//! fencesim-tests --test suite regression::` runs one of them.

mod build;
mod code_map;
mod coverage;
mod determinism;
mod model_semantics;
mod regression;
mod scenarios;
mod shrink;
mod timeline;
mod world;
