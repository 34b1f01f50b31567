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
//! [`SkillToolbox`]'s `invoke`, at execution, never only by
//! what the prompt shows. YAML is read in one private module and nowhere else.

pub mod admin;
pub mod builtins;
pub mod caps;
pub mod catalog;
pub mod command;
pub mod config;
pub mod confirm;
pub mod discovery;
mod effects;
pub mod error;
pub mod files;
pub mod gating;
pub mod install;
pub mod mention;
pub mod name;
pub mod registry;
pub mod schema;
pub mod script;
pub mod skill;
pub mod spec;
pub mod state;
#[cfg(test)]
mod test_support;
pub mod toolbox;
mod yaml;

pub use admin::{SkillInfo, Validation, format_info, format_list, format_reload, format_validation, validate_paths};
pub use caps::{Activation, ActiveSkills, CapLimits};
pub use command::{SkillCommand, parse_command};
pub use config::{Autonomy, InstallLimits, OnCap, SkillsConfig};
pub use discovery::{Diagnostic, DiagnosticKind, Discovery, ReloadReport, ScanLimits, compare, discover};
pub use error::SkillError;
pub use gating::{Availability, Environment, FixedEnvironment, ProcessEnvironment, Requirements};
pub use install::Installed;
pub use name::SkillName;
pub use registry::{
    CoreSkill, Policy, Services, SkillContext, SkillEntry, SkillKind, SkillRegistry, SkillSpec, TurnView,
};
pub use skill::Skill;
pub use spec::{Checked, Finding, Level, Mode, SkillDocument};
pub use toolbox::{SkillToolbox, SkillToolboxBuilder};
