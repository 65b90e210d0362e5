//! # zoolog-server
//!
//! Owns the client-facing side of a zoolog server: the client port, the handshake, sessions and
//! their expiry, the per-session FIFO pipeline, watch delivery, the four-letter words, the
//! AdminServer's HTTP commands and Prometheus /metrics, and the configuration a ZooKeeper user
//! already has. State changes go to an ordering layer
//! (`zoolog-log`) as commands and come back applied to the data tree (`zoolog-tree`).
//!
//! It must never decide the outcome of a write itself (that is the deterministic apply's job,
//! identical on every server), never block its core task on IO, and never let one client's bad
//! input or slowness affect another client.

pub mod admin;
pub mod auth;
pub mod config;
pub mod core;
pub mod ensemble;
pub mod four_letter;
mod http;
pub mod json;
pub mod metrics;
pub mod shell;
pub mod stats;

pub use config::ServerConfig;
