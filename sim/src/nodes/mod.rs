//! The processes of a run: Raft servers running the lock service, the
//! protected resource, and the workers (with the commands a scripted story
//! sends them). What they share is the run's [`context::Ctx`].

pub mod commands;
pub mod context;
pub mod resource;
pub mod server;
pub mod worker;
