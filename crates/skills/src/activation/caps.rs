//! Per-conversation active skills and the caps on them: at most
//! `max_active` instruction sets, together at most `max_active_fraction` of
//! the context budget. Reaching a cap evicts the least recently used skill
//! (or refuses, with `on_cap: refuse`) and says which.
//!
//! Pure: the set is a value the toolbox loads from and saves to the store.

use serde::{Deserialize, Serialize};

use crate::config::{CapLimits, OnCap};
use crate::name::SkillName;

/// The skills active in one conversation, least recently used first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveSkills {
    skills: Vec<SkillName>,
}

/// What an activation did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Activation {
    /// It was active already; now it is the most recently used.
    AlreadyActive,
    Activated {
        evicted: Vec<SkillName>,
    },
    Refused(CapRefusal),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CapRefusal {
    /// The body alone is larger than all active bodies may be.
    TooLarge { chars: usize, max_chars: usize },
    /// `on_cap: refuse` and the count cap is reached.
    Count { max_active: usize },
    /// `on_cap: refuse` and the bodies would not fit.
    Chars { needed: usize, max_chars: usize },
}

impl Activation {
    /// A line for the user, or `None` when there is nothing worth saying.
    pub fn notice(&self, name: &SkillName) -> Option<String> {
        match self {
            Activation::AlreadyActive => None,
            Activation::Activated { evicted } if evicted.is_empty() => None,
            Activation::Activated { evicted } => {
                let list: Vec<String> = evicted.iter().map(|n| format!("`{n}`")).collect();
                Some(format!("Deactivated {} to make room for `{name}`.", list.join(", ")))
            }
            Activation::Refused(refusal) => Some(format!("Skill `{name}` was not activated: {}.", refusal.reason())),
        }
    }
}

impl CapRefusal {
    pub fn reason(&self) -> String {
        match self {
            CapRefusal::TooLarge { chars, max_chars } => {
                format!("its instructions take {chars} characters, more than the {max_chars} allowed for active skills")
            }
            CapRefusal::Count { max_active } => format!("{max_active} skills are active already, the most allowed"),
            CapRefusal::Chars { needed, max_chars } => {
                format!("active skills would take {needed} characters, more than the {max_chars} allowed")
            }
        }
    }
}

impl ActiveSkills {
    #[cfg(test)]
    pub fn from_names(skills: Vec<SkillName>) -> Self {
        Self { skills }
    }

    /// Least recently used first.
    pub fn names(&self) -> &[SkillName] {
        &self.skills
    }

    pub fn contains(&self, name: &SkillName) -> bool {
        self.skills.contains(name)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// Makes `name` active, within `limits`; `size_of` gives a skill's body characters.
    pub fn activate(
        &mut self,
        name: &SkillName,
        size_of: impl Fn(&SkillName) -> usize,
        limits: &CapLimits,
    ) -> Activation {
        if self.touch(name) {
            return Activation::AlreadyActive;
        }
        let chars = size_of(name);
        if chars > limits.max_chars {
            return Activation::Refused(CapRefusal::TooLarge {
                chars,
                max_chars: limits.max_chars,
            });
        }
        let total = |skills: &[SkillName]| skills.iter().map(&size_of).sum::<usize>();
        match limits.on_cap {
            OnCap::Refuse => {
                if self.skills.len() >= limits.max_active {
                    return Activation::Refused(CapRefusal::Count {
                        max_active: limits.max_active,
                    });
                }
                let needed = total(&self.skills) + chars;
                if needed > limits.max_chars {
                    return Activation::Refused(CapRefusal::Chars {
                        needed,
                        max_chars: limits.max_chars,
                    });
                }
                self.skills.push(name.clone());
                Activation::Activated { evicted: Vec::new() }
            }
            OnCap::Evict => {
                let mut evicted = Vec::new();
                while !self.skills.is_empty()
                    && (self.skills.len() >= limits.max_active || total(&self.skills) + chars > limits.max_chars)
                {
                    evicted.push(self.skills.remove(0));
                }
                self.skills.push(name.clone());
                Activation::Activated { evicted }
            }
        }
    }

    /// Marks an active skill as just used; `false` when it is not active.
    pub fn touch(&mut self, name: &SkillName) -> bool {
        match self.skills.iter().position(|n| n == name) {
            Some(index) => {
                let name = self.skills.remove(index);
                self.skills.push(name);
                true
            }
            None => false,
        }
    }

    /// Drops skills that no longer exist or may not be used; `true` if any went.
    pub fn retain(&mut self, keep: impl Fn(&SkillName) -> bool) -> bool {
        let before = self.skills.len();
        self.skills.retain(|n| keep(n));
        self.skills.len() != before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SkillsConfig;

    fn name(n: &str) -> SkillName {
        SkillName::new(n).unwrap()
    }

    fn names(active: &ActiveSkills) -> Vec<&str> {
        active.names().iter().map(SkillName::as_str).collect()
    }

    /// Sizes: a skill named `sN` has a body of N characters.
    fn size(n: &SkillName) -> usize {
        n.as_str().trim_start_matches('s').parse().unwrap()
    }

    fn limits(max_active: usize, max_chars: usize, on_cap: OnCap) -> CapLimits {
        CapLimits {
            max_active,
            max_chars,
            on_cap,
        }
    }

    /// Rows: activations in order, limits → active set (LRU first) and the
    /// outcome of the last activation.
    #[test]
    fn caps_by_count_and_by_characters() {
        let evicted = |names: &[&str]| Activation::Activated {
            evicted: names.iter().map(|n| name(n)).collect(),
        };
        for (activations, caps, active, last) in [
            (
                vec!["s1", "s2"],
                limits(8, 100, OnCap::Evict),
                vec!["s1", "s2"],
                evicted(&[]),
            ),
            (
                vec!["s1", "s2", "s3"],
                limits(2, 100, OnCap::Evict),
                vec!["s2", "s3"],
                evicted(&["s1"]),
            ),
            (
                vec!["s10", "s20", "s30"],
                limits(8, 50, OnCap::Evict),
                vec!["s20", "s30"],
                evicted(&["s10"]),
            ),
            (
                vec!["s10", "s20", "s45"],
                limits(8, 50, OnCap::Evict),
                vec!["s45"],
                evicted(&["s10", "s20"]),
            ),
            (
                vec!["s1", "s2", "s1", "s3"],
                limits(2, 100, OnCap::Evict),
                vec!["s1", "s3"],
                evicted(&["s2"]),
            ),
            (
                vec!["s1", "s2"],
                limits(8, 100, OnCap::Evict),
                vec!["s1", "s2"],
                evicted(&[]),
            ),
            (
                vec!["s1", "s1"],
                limits(8, 100, OnCap::Evict),
                vec!["s1"],
                Activation::AlreadyActive,
            ),
            (
                vec!["s1", "s2", "s3"],
                limits(2, 100, OnCap::Refuse),
                vec!["s1", "s2"],
                Activation::Refused(CapRefusal::Count { max_active: 2 }),
            ),
            (
                vec!["s30", "s30", "s40"],
                limits(8, 50, OnCap::Refuse),
                vec!["s30"],
                Activation::Refused(CapRefusal::Chars {
                    needed: 70,
                    max_chars: 50,
                }),
            ),
            (
                vec!["s1", "s60"],
                limits(8, 50, OnCap::Evict),
                vec!["s1"],
                Activation::Refused(CapRefusal::TooLarge {
                    chars: 60,
                    max_chars: 50,
                }),
            ),
        ] {
            let mut set = ActiveSkills::default();
            let mut outcome = Activation::AlreadyActive;
            for activation in &activations {
                outcome = set.activate(&name(activation), size, &caps);
            }
            assert_eq!(names(&set), active, "{activations:?}");
            assert_eq!(outcome, last, "{activations:?}");
        }
    }

    #[test]
    fn notices_say_what_was_deactivated_or_refused() {
        let new = name("new");
        assert_eq!(Activation::Activated { evicted: vec![] }.notice(&new), None);
        assert_eq!(
            Activation::Activated {
                evicted: vec![name("old"), name("older")]
            }
            .notice(&new)
            .unwrap(),
            "Deactivated `old`, `older` to make room for `new`."
        );
        let refused = Activation::Refused(CapRefusal::Count { max_active: 8 })
            .notice(&new)
            .unwrap();
        assert!(refused.contains("8 skills are active already"), "{refused}");
    }

    #[test]
    fn limits_come_from_config_and_the_context_budget() {
        let caps = CapLimits::new(&SkillsConfig::default(), 120_000);
        assert_eq!(caps, limits(8, 60_000, OnCap::Evict));
    }

    #[test]
    fn the_set_round_trips_through_json() {
        let mut set = ActiveSkills::default();
        set.activate(&name("s1"), size, &limits(8, 100, OnCap::Evict));
        let json = serde_json::to_value(&set).unwrap();
        assert_eq!(json, serde_json::json!({"skills": ["s1"]}));
        assert_eq!(serde_json::from_value::<ActiveSkills>(json).unwrap(), set);
    }
}
