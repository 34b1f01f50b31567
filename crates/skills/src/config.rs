//! The `skills:` section of Herald's configuration. The binary composes it
//! into its own config file; this crate only says what the keys mean and what
//! they default to.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The longest a skill script may ever run, whatever the configuration says.
pub const MAX_SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SkillsConfig {
    /// Where Agent Skills are found, highest priority first. Each entry is a
    /// skill folder itself or a folder of skill folders.
    pub dirs: Vec<PathBuf>,
    /// How deep below a root a `SKILL.md` is looked for.
    pub max_depth: usize,
    /// At most this many skills are loaded; the rest are reported.
    pub max_skills: usize,
    /// Characters the prompt catalog (names and descriptions) may take.
    pub catalog_chars: usize,
    /// Put every visible skill body in the prompt and offer no activation
    /// tool: for a handful of small skills.
    pub eager: bool,
    /// Instruction sets active at once in one conversation.
    pub max_active: usize,
    /// Share of `llm.context_chars` the active bodies may take together.
    pub max_active_fraction: f64,
    /// What reaching a cap does.
    pub on_cap: OnCap,
    /// Whether dangerous skills wait for an admin's `/approve`.
    pub autonomy: Autonomy,
    /// How long a skill script may run (at most 60s).
    #[serde(with = "herald_core::duration::serde")]
    pub script_timeout: Duration,
    /// Where `herald skills install` puts skills; the first of `dirs` when unset.
    pub install_dir: Option<PathBuf>,
    pub install_limits: InstallLimits,
    /// Whether skills' `metadata.triggers` patterns may activate them.
    pub triggers: bool,
    /// How often a turn checks the skill folders for changes; `0` means only
    /// on `/skills reload`.
    #[serde(with = "herald_core::duration::serde")]
    pub rescan_every: Duration,
    /// How long a confirmation code stays valid.
    #[serde(with = "herald_core::duration::serde")]
    pub confirm_timeout: Duration,
    /// The user scripts run as when Herald runs as root: `nobody` when
    /// unset; running them as root takes `root` written here. Herald not
    /// running as root runs scripts as its own user.
    pub script_user: Option<String>,
    /// How all of a script's processes are held and ended.
    pub script_containment: ScriptContainment,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        Self {
            dirs: vec![PathBuf::from("skills"), PathBuf::from(".agents/skills")],
            max_depth: 3,
            max_skills: 200,
            catalog_chars: 4000,
            eager: false,
            max_active: 8,
            max_active_fraction: 0.5,
            on_cap: OnCap::Evict,
            autonomy: Autonomy::Supervised,
            script_timeout: Duration::from_secs(30),
            install_dir: None,
            install_limits: InstallLimits::default(),
            triggers: true,
            rescan_every: Duration::from_secs(5),
            confirm_timeout: Duration::from_secs(600),
            script_user: None,
            script_containment: ScriptContainment::Auto,
        }
    }
}

impl SkillsConfig {
    /// Values that parse but cannot work, each as `key: reason`.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !(self.max_active_fraction > 0.0 && self.max_active_fraction <= 1.0) {
            problems.push(format!(
                "skills.max_active_fraction: {} is not in (0, 1]",
                self.max_active_fraction
            ));
        }
        if self.max_active == 0 {
            problems.push("skills.max_active: must be at least 1".into());
        }
        if self.script_timeout.is_zero() || self.script_timeout > MAX_SCRIPT_TIMEOUT {
            problems.push(format!(
                "skills.script_timeout: {} is not between 1ms and 60s",
                herald_core::duration::format(self.script_timeout)
            ));
        }
        if self.dirs.is_empty() && self.install_dir.is_none() {
            problems.push("skills.dirs: empty, and no skills.install_dir is set".into());
        }
        problems
    }

    /// The folder installed skills go to.
    pub fn install_dir(&self) -> PathBuf {
        self.install_dir
            .clone()
            .or_else(|| self.dirs.first().cloned())
            .unwrap_or_else(|| PathBuf::from("skills"))
    }

    /// The script timeout, never above 60s.
    pub fn effective_script_timeout(&self) -> Duration {
        self.script_timeout.min(MAX_SCRIPT_TIMEOUT)
    }

    /// Makes relative `dirs` and `install_dir` relative to `base` (the
    /// folder of the configuration file, or the working directory).
    pub fn resolved_against(mut self, base: &std::path::Path) -> Self {
        for dir in &mut self.dirs {
            if dir.is_relative() {
                *dir = base.join(&*dir);
            }
        }
        if let Some(dir) = &mut self.install_dir
            && dir.is_relative()
        {
            *dir = base.join(&*dir);
        }
        self
    }
}

/// The caps on active skills, from the configuration and the context budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapLimits {
    pub max_active: usize,
    /// Characters all active bodies may take together.
    pub max_chars: usize,
    pub on_cap: OnCap,
}

impl CapLimits {
    pub fn new(config: &SkillsConfig, context_chars: usize) -> Self {
        Self {
            max_active: config.max_active.max(1),
            max_chars: (context_chars as f64 * config.max_active_fraction.clamp(0.0, 1.0)) as usize,
            on_cap: config.on_cap,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnCap {
    /// Deactivate the least recently used skill to make room.
    Evict,
    /// Refuse the new activation.
    Refuse,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Autonomy {
    /// Dangerous skills wait for an admin's confirmation.
    Supervised,
    /// Dangerous skills run without asking.
    Full,
}

/// How a script and every process it starts are kept together, so that all
/// of them end when the script does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScriptContainment {
    /// A cgroup when Herald can create one, otherwise the subreaper.
    #[default]
    Auto,
    /// A cgroup v2 of its own, ended with `cgroup.kill`; scripts do not run
    /// where Herald cannot create one.
    Cgroup,
    /// A supervisor process that adopts every orphaned descendant
    /// (`PR_SET_CHILD_SUBREAPER`) and kills and reaps them all.
    Subreaper,
}

/// What `install` accepts from a folder or an archive.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InstallLimits {
    pub max_files: usize,
    pub max_file_bytes: u64,
    pub max_total_bytes: u64,
    /// Entries of a `.zip` (folders included).
    pub max_entries: usize,
}

impl Default for InstallLimits {
    fn default() -> Self {
        Self {
            max_files: 200,
            max_file_bytes: 1024 * 1024,
            max_total_bytes: 8 * 1024 * 1024,
            max_entries: 500,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<SkillsConfig, String> {
        crate::yaml::from_str(yaml)
    }

    #[test]
    fn an_empty_section_is_the_documented_defaults() {
        let config = parse("{}").unwrap();
        assert_eq!(config, SkillsConfig::default());
        assert_eq!(
            config.dirs,
            vec![PathBuf::from("skills"), PathBuf::from(".agents/skills")]
        );
        assert_eq!(config.max_active, 8);
        assert_eq!(config.max_active_fraction, 0.5);
        assert_eq!(config.script_timeout, Duration::from_secs(30));
        assert!(config.problems().is_empty());
    }

    #[test]
    fn keys_parse_and_typos_are_named() {
        let config = parse("dirs: [a]\non_cap: refuse\nautonomy: full\nscript_timeout: 10s\neager: true\n").unwrap();
        assert_eq!(config.on_cap, OnCap::Refuse);
        assert_eq!(config.autonomy, Autonomy::Full);
        assert_eq!(config.script_timeout, Duration::from_secs(10));
        assert_eq!(config.install_dir(), PathBuf::from("a"));
        let err = parse("max_activ: 3\n").unwrap_err();
        assert!(err.contains("max_activ"), "{err}");
    }

    #[test]
    fn impossible_values_are_problems() {
        for (yaml, key) in [
            ("max_active_fraction: 0", "max_active_fraction"),
            ("max_active_fraction: 1.5", "max_active_fraction"),
            ("max_active: 0", "max_active"),
            ("script_timeout: 2m", "script_timeout"),
        ] {
            let problems = parse(yaml).unwrap().problems();
            assert!(problems.iter().any(|p| p.contains(key)), "{yaml}: {problems:?}");
        }
    }
}
