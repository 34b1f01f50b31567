//! Herald's skill registry: the interface between the model and the world,
//! and the place Herald's safety lives.
//!
//! It owns two kinds of skill. Core skills are written in Rust, each a spec
//! (name, description, JSON schema, policy flags) plus an `invoke`. Agent
//! Skills are folders with a `SKILL.md`: discovered, validated, listed in a
//! budgeted catalog and activated per conversation within caps.
//!
//! Architecture invariant: every policy (who may run what, deduplication of
//! side effects, confirmation of dangerous calls) is enforced in
//! [`SkillToolbox::invoke`](toolbox::SkillToolbox), at execution, never only by
//! what the prompt shows. YAML is read in [`yaml`] and nowhere else.

pub mod caps;
pub mod catalog;
pub mod config;
pub mod discovery;
pub mod error;
pub mod files;
pub mod gating;
pub mod install;
pub mod mention;
pub mod name;
pub mod script;
pub mod skill;
pub mod spec;
#[cfg(test)]
mod test_support;
mod yaml;

pub use config::{Autonomy, InstallLimits, OnCap, SkillsConfig};
pub use error::SkillError;
pub use name::SkillName;
pub use spec::{Checked, Finding, Level, Mode, SkillDocument};
pub use discovery::{Diagnostic, DiagnosticKind, Discovery, ReloadReport, ScanLimits, compare, discover};
pub use gating::{Availability, Environment, FixedEnvironment, ProcessEnvironment, Requirements};
pub use skill::Skill;
