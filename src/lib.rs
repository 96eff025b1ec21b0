//! skillhost: hosts Agent Skills for MCP clients.
//!
//! [`Host`] is the core: it owns the [`registry`] and answers `list`, `load`
//! and `read`. The CLI ([`cli`]) and the MCP server ([`mcp`]) are thin faces
//! over it.

pub mod access;
pub mod api;
pub mod cli;
pub mod config;
pub mod error;
pub mod exec;
pub mod fsguard;
pub mod host;
pub mod http;
pub mod listing;
pub mod manage;
pub mod mcp;
pub mod metrics;
pub mod registry;
pub mod scaffold;
pub mod skill;
pub mod store;
pub mod validate;
mod watch;

pub use config::{HostConfig, Limits, SourceKind};
pub use error::{ErrorKind, HostError};
pub use host::Host;
