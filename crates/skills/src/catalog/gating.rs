//! Gating: a skill may say in its `metadata` that it needs programs on PATH
//! (`requires-bins`) or environment variables (`requires-env`). A skill whose
//! needs are missing is listed as unavailable and never offered to the model.
//!
//! The check asks an [`Environment`], so tests decide what exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What the process can see.
pub trait Environment: Send + Sync {
    fn has_binary(&self, name: &str) -> bool;
    fn has_var(&self, name: &str) -> bool;
}

/// The real process environment: `PATH` and the variables Herald runs with.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessEnvironment;

impl Environment for ProcessEnvironment {
    fn has_binary(&self, name: &str) -> bool {
        if name.contains('/') {
            return is_executable(Path::new(name));
        }
        let Some(path) = std::env::var_os("PATH") else {
            return false;
        };
        std::env::split_paths(&path).any(|dir| is_executable(&dir.join(name)))
    }

    fn has_var(&self, name: &str) -> bool {
        std::env::var_os(name).is_some_and(|v| !v.is_empty())
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A fixed environment, for tests and for `validate`.
#[derive(Clone, Debug, Default)]
pub struct FixedEnvironment {
    pub binaries: BTreeSet<String>,
    pub vars: BTreeSet<String>,
}

impl Environment for FixedEnvironment {
    fn has_binary(&self, name: &str) -> bool {
        self.binaries.contains(name)
    }

    fn has_var(&self, name: &str) -> bool {
        self.vars.contains(name)
    }
}

/// What a skill says it needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requirements {
    pub bins: Vec<String>,
    pub env: Vec<String>,
}

impl Requirements {
    pub fn from_metadata(metadata: &BTreeMap<String, String>) -> Self {
        let list = |key: &str| {
            metadata
                .get(key)
                .map(|value| {
                    value
                        .split(|c: char| c.is_whitespace() || c == ',')
                        .filter(|item| !item.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        Self {
            bins: list("requires-bins"),
            env: list("requires-env"),
        }
    }

    pub fn check(&self, environment: &dyn Environment) -> Availability {
        let missing_bins: Vec<String> = self
            .bins
            .iter()
            .filter(|b| !environment.has_binary(b))
            .cloned()
            .collect();
        let missing_env: Vec<String> = self.env.iter().filter(|v| !environment.has_var(v)).cloned().collect();
        if missing_bins.is_empty() && missing_env.is_empty() {
            Availability::Available
        } else {
            Availability::Unavailable {
                missing_bins,
                missing_env,
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Availability {
    Available,
    Unavailable {
        missing_bins: Vec<String>,
        missing_env: Vec<String>,
    },
}

impl Availability {
    pub fn is_available(&self) -> bool {
        matches!(self, Availability::Available)
    }

    /// `needs jq, $GITHUB_TOKEN`, for listings; empty when available.
    pub fn describe(&self) -> String {
        match self {
            Availability::Available => String::new(),
            Availability::Unavailable {
                missing_bins,
                missing_env,
            } => {
                let mut items: Vec<String> = missing_bins.clone();
                items.extend(missing_env.iter().map(|v| format!("${v}")));
                format!("needs {}", items.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binaries_or_variables_make_a_skill_unavailable() {
        let environment = FixedEnvironment {
            binaries: ["git".to_owned()].into(),
            vars: ["TOKEN".to_owned()].into(),
        };
        for (bins, env, expected) in [
            ("", "", ""),
            ("git", "TOKEN", ""),
            ("git jq", "", "needs jq"),
            ("git,jq, rg", "TOKEN KEY", "needs jq, rg, $KEY"),
            ("", "KEY", "needs $KEY"),
        ] {
            let metadata = BTreeMap::from([
                ("requires-bins".to_owned(), bins.to_owned()),
                ("requires-env".to_owned(), env.to_owned()),
            ]);
            let availability = Requirements::from_metadata(&metadata).check(&environment);
            assert_eq!(availability.describe(), expected, "{bins} / {env}");
            assert_eq!(availability.is_available(), expected.is_empty());
        }
    }

    #[test]
    fn the_process_environment_finds_sh() {
        assert!(ProcessEnvironment.has_binary("sh"));
        assert!(!ProcessEnvironment.has_binary("surely-no-such-program-herald"));
    }
}
