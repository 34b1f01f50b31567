//! The toolbox as the agent uses it: what a turn offers, and what a call does.

mod commands;
mod confirmation;
mod hostile_folders;
mod mcp;
mod offering;
mod policy;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use herald_core::{
    ActorId, ConversationStore, ManualClock, Outbound, TaskId, ToolCall, ToolOutput, Toolbox, TurnPreparation,
    TurnScope,
};
use serde_json::{Value, json};

use super::*;
use crate::catalog::{Policy, SkillContext, SkillSpec};
use crate::test_support::{MemoryStore, RecordingChannel, conversation, write_skill};
use crate::{Autonomy, SkillName};

struct Fixture {
    _dir: tempfile::TempDir,
    skills_dir: std::path::PathBuf,
    store: Arc<MemoryStore>,
    channel: Arc<RecordingChannel>,
    effects: Arc<AtomicUsize>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let skills_dir = dir.path().join("skills");
        std::fs::create_dir_all(&skills_dir).unwrap();
        // Scripts run as `nobody` when the tests run as root: they must be
        // able to leave the markers the tests look for.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        std::fs::create_dir_all(dir.path().join("markers")).unwrap();
        std::fs::set_permissions(dir.path().join("markers"), std::fs::Permissions::from_mode(0o777)).unwrap();
        Self {
            _dir: dir,
            skills_dir,
            store: Arc::new(MemoryStore::default()),
            channel: Arc::new(RecordingChannel::new("local")),
            effects: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Where a script may leave a file for the test to find.
    fn marker(&self, name: &str) -> std::path::PathBuf {
        self.skills_dir.parent().unwrap().join("markers").join(name)
    }

    fn with_example_skills(self) -> Self {
        write_skill(
            &self.skills_dir,
            "notes",
            "Keep short notes.",
            "NOTES BODY: write bullet points.",
        );
        write_skill(
            &self.skills_dir,
            "weather",
            "Weather reports.",
            "WEATHER BODY: ask wttr.in.",
        );
        let ops = self.skills_dir.join("ops");
        std::fs::create_dir_all(ops.join("scripts")).unwrap();
        std::fs::write(
            ops.join("SKILL.md"),
            "---\nname: ops\ndescription: Server chores.\nmetadata:\n  elevated: 'true'\n---\nOPS BODY",
        )
        .unwrap();
        std::fs::write(ops.join("scripts/touch.sh"), "touch \"$1\"; echo touched").unwrap();
        self
    }

    fn config(&self) -> SkillsConfig {
        SkillsConfig {
            dirs: vec![self.skills_dir.clone()],
            rescan_every: Duration::ZERO,
            install_dir: Some(self.skills_dir.clone()),
            ..SkillsConfig::default()
        }
    }

    async fn toolbox(&self) -> SkillToolbox {
        self.toolbox_with(self.config()).await
    }

    /// A toolbox with `autonomy: full`: dangerous skills run without asking.
    async fn autonomous_toolbox(&self) -> SkillToolbox {
        self.toolbox_with(SkillsConfig {
            autonomy: Autonomy::Full,
            ..self.config()
        })
        .await
    }

    async fn toolbox_with(&self, config: SkillsConfig) -> SkillToolbox {
        self.toolbox_with_admins(config, &[ADMIN]).await
    }

    async fn toolbox_with_admins(&self, config: SkillsConfig, admins: &[&str]) -> SkillToolbox {
        SkillToolbox::builder(config, Arc::clone(&self.store) as Arc<dyn ConversationStore>, 10_000)
            .outbound(Outbound::new().with(Arc::clone(&self.channel) as Arc<dyn herald_core::ChannelOutbound>))
            .admins(herald_core::Admins::new(admins.iter().map(|id| ActorId::new(*id))))
            .skill(Arc::new(CountingEffect {
                spec: SkillSpec {
                    name: SkillName::new("charge_card").unwrap(),
                    description: "Charges a card (test).".into(),
                    parameters: json!({"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]}),
                    policy: Policy {
                        side_effect: true,
                        ..Policy::default()
                    },
                },
                count: Arc::clone(&self.effects),
            }))
            .skill(Arc::new(CountingEffect {
                spec: SkillSpec {
                    name: SkillName::new("reboot").unwrap(),
                    description: "Reboots (test).".into(),
                    parameters: json!({"type": "object"}),
                    policy: Policy {
                        elevated: true,
                        ..Policy::default()
                    },
                },
                count: Arc::clone(&self.effects),
            }))
            .build()
            .await
            .unwrap()
    }
}

/// A core skill whose effect is counting.
struct CountingEffect {
    spec: SkillSpec,
    count: Arc<AtomicUsize>,
}

#[async_trait]
impl crate::CoreSkill for CountingEffect {
    fn spec(&self) -> &SkillSpec {
        &self.spec
    }

    async fn invoke(&self, _: &SkillContext<'_>, arguments: Value) -> Result<ToolOutput, SkillError> {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(ToolOutput::ok(format!("effect #{n} with {arguments}")))
    }
}

/// Configured admins of the fixture's toolboxes.
const ADMIN: &str = "local:owner";

/// A turn in the shared conversation `local:alice`: the admin's when
/// `admin`, else alice's.
fn scope(task: i64, admin: bool) -> TurnScope {
    let actor = if admin { ADMIN } else { "local:alice" };
    TurnScope {
        task: TaskId(task),
        conversation: conversation("local:alice"),
        actor: Some(ActorId::new(actor)),
        is_admin: admin,
        reply_to: None,
        origin: herald_core::TurnOrigin::Person,
        files: Vec::new(),
    }
}

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: "call-1".into(),
        name: name.into(),
        arguments: arguments.to_string(),
    }
}

/// `ops`'s `touch.sh`, which leaves `marker`.
fn touch(marker: &std::path::Path) -> ToolCall {
    call(
        "run_skill_script",
        json!({"name": "ops", "script": "touch.sh", "args": [marker.display().to_string()]}),
    )
}

/// A skill folder to install, `jokes`, outside the skills folder.
fn jokes_source() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let source = write_skill(dir.path(), "jokes", "Tells jokes.", "JOKES BODY");
    (dir, source)
}

fn tool_names(preparation: &TurnPreparation) -> Vec<&str> {
    preparation.tools.iter().map(|t| t.name.as_str()).collect()
}

fn prompt(preparation: &TurnPreparation) -> String {
    preparation
        .sections
        .iter()
        .map(|s| s.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn activate_enum(preparation: &TurnPreparation) -> Vec<String> {
    let tool = preparation.tools.iter().find(|t| t.name == "activate_skill").unwrap();
    tool.parameters["properties"]["name"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}
