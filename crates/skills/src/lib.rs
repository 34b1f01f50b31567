//! Herald's skill registry: the interface between the model and the world,
//! and the place Herald's safety lives.
//!
//! It owns two kinds of skill. Core skills are written in Rust, each a spec
//! (name, description, JSON schema, policy flags) plus an `invoke`. Agent
//! Skills are folders with a `SKILL.md`: discovered, validated, listed in a
//! budgeted catalog and activated per conversation within caps.
//!
//! The crate is four parts behind this one surface:
//! - `catalog`: what skills exist (discovery, `SKILL.md`, gating, switches,
//!   the prompt catalog) and where their files may be;
//! - `activation`: which instructions a conversation carries (mentions,
//!   caps, the active set);
//! - `execution`: running a tool call (the policy at invoke, the core
//!   skills, confirmation, side-effect dedup, scripts, file reads);
//! - `admin`: operating the registry (chat commands, listing, install,
//!   validation).
//!
//! [`SkillToolbox`] joins them for the agent.
//!
//! Architecture invariant: every policy (who may run what, deduplication of
//! side effects, confirmation of dangerous calls) is enforced when a call
//! runs, never only by what the prompt shows. YAML is read in one private
//! module and nowhere else.

mod activation;
mod admin;
mod budget;
mod catalog;
mod config;
mod error;
mod execution;
mod name;
mod state;
#[cfg(test)]
mod test_support;
mod toolbox;
mod yaml;

pub use admin::{
    Installed, SkillInfo, Validation, format_info, format_list, format_reload, format_validation, validate_paths,
};
pub use catalog::{
    CATALOG_HEADER, Diagnostic, DiagnosticKind, Discovery, Environment, FixedEnvironment, ProcessEnvironment,
    ReloadReport, RenderedCatalog, ScanLimits, Skill, SkillEntry, SkillKind, discover, render_catalog,
};
pub use catalog::{CoreSkill, Policy, Services, SkillContext, SkillSpec, TurnView, quoted, target_conversation};
pub use config::{Autonomy, CapLimits, InstallLimits, OnCap, ScriptContainment, SkillsConfig};
pub use error::SkillError;
pub use execution::script::{
    FILES_DIR_VARIABLE, SUPERVISOR_ARG, ScriptFile, ScriptReceipt, ScriptRequest, run_skill_script,
    script_supervisor_entry,
};
pub use name::SkillName;

/// The `SKILL.md` checks on their own: what `herald skills validate` runs,
/// open to the fuzz targets that feed them hostile files.
pub mod spec {
    pub use crate::catalog::spec::{
        Checked, Finding, Level, MAX_COMPATIBILITY_CHARS, MAX_DESCRIPTION_CHARS, Mode, SkillDocument, check,
    };
    pub use crate::name::agent_skill_name_problems;
}
pub use toolbox::{SkillToolbox, SkillToolboxBuilder};
