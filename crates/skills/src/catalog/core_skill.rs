//! What a core skill is: a spec (name, description, argument schema,
//! policy flags) and an `invoke`, with the context a call runs in. Core
//! skills are written in Rust, here and in the binary (`schedule_task`).
//!
//! The toolbox has checked the caller's rights and the arguments against
//! the schema before `invoke` runs; a skill checks again only what it alone
//! knows (a target conversation, a file inside its folder).

use std::sync::Arc;

use async_trait::async_trait;
use herald_core::{
    ConversationId, ConversationRef, ConversationStore, FileStore, McpServerInfo, McpServers, Outbound, ToolOutput,
    TurnScope,
};
use serde_json::Value;

use crate::catalog::Skill;
use crate::config::{CapLimits, SkillsConfig};
use crate::error::SkillError;
use crate::name::SkillName;

/// How a skill may be run. Enforced when it is called, not only when offered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    /// It changes the world: run once per task and arguments, and never
    /// twice across a crash.
    pub side_effect: bool,
    /// Only admins see and run it.
    pub elevated: bool,
    /// It waits for an admin's `/approve` unless `autonomy: full`.
    pub dangerous: bool,
    /// It may run at the same time as other parallel-safe calls of one step.
    pub parallel_safe: bool,
    /// Looking things up: the loop guard allows it more repetitions.
    pub research: bool,
}

/// What the model is told about a core skill.
#[derive(Clone, Debug, PartialEq)]
pub struct SkillSpec {
    pub name: SkillName,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
    pub policy: Policy,
}

/// What a turn may see: the Agent Skills and MCP servers this sender may use.
#[derive(Clone, Debug, Default)]
pub struct TurnView {
    pub visible: Vec<Arc<Skill>>,
    pub is_admin: bool,
    pub eager: bool,
    /// MCP servers this sender may use.
    pub mcp: Vec<McpServerInfo>,
    /// Schema characters of each MCP server's tools, where known: what an
    /// active server costs against the caps.
    pub mcp_sizes: std::collections::BTreeMap<String, usize>,
}

impl TurnView {
    pub fn get(&self, name: &str) -> Option<&Arc<Skill>> {
        self.visible.iter().find(|s| s.name.as_str() == name)
    }

    pub fn names(&self) -> Vec<Value> {
        self.visible.iter().map(|s| Value::from(s.name.as_str())).collect()
    }

    pub fn mcp_server(&self, name: &str) -> Option<&McpServerInfo> {
        self.mcp.iter().find(|s| s.name == name)
    }

    /// Names `activate_skill` accepts: skills, then MCP servers that need activation.
    pub fn activatable_names(&self) -> Vec<Value> {
        let mut names = self.names();
        names.extend(
            self.mcp
                .iter()
                .filter(|s| !s.eager)
                .map(|s| Value::from(s.name.as_str())),
        );
        names
    }

    /// What an active skill or server takes of the caps' characters.
    pub fn size_of(&self, name: &SkillName) -> usize {
        match self.get(name.as_str()) {
            Some(skill) => skill.document.body_chars(),
            None => self.mcp_sizes.get(name.as_str()).copied().unwrap_or(0),
        }
    }
}

/// What every skill can reach while it runs.
pub struct Services {
    pub config: SkillsConfig,
    pub store: Arc<dyn ConversationStore>,
    pub outbound: Outbound,
    pub clock: Arc<dyn herald_core::Clock>,
    pub caps: CapLimits,
    /// The configured MCP servers, when there are any.
    pub mcp: Option<Arc<dyn McpServers>>,
    /// Where files are kept: the files of messages, for scripts to read,
    /// and scripts' output files, for `send_message`. Without it scripts
    /// get no files and their output files are not kept.
    pub files: Option<Arc<dyn FileStore>>,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("outbound", &self.outbound)
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

/// One call of a skill.
pub struct SkillContext<'a> {
    pub scope: &'a TurnScope,
    /// Whether the turn is an admin's (from configuration only).
    pub is_admin: bool,
    /// How many times this same call (skill and canonical arguments) was
    /// made in the turn, this one included.
    pub occurrence: u32,
    /// The call's name within its task, the same on every try of the task
    /// whatever order the model makes its calls in: skill, a hash of the
    /// canonical arguments and the occurrence. Idempotency keys and receipts
    /// are built on it, never on a call's position.
    pub call_key: &'a str,
    pub view: &'a TurnView,
    pub services: &'a Services,
}

/// A skill written in Rust.
#[async_trait]
pub trait CoreSkill: Send + Sync {
    fn spec(&self) -> &SkillSpec;

    /// The argument schema offered this turn; it is also what the arguments
    /// are checked against. `activate_skill` narrows its `name` to the
    /// visible skills here.
    fn parameters(&self, _view: &TurnView) -> Value {
        self.spec().parameters.clone()
    }

    /// Whether the tool is offered this turn at all.
    fn offered(&self, _view: &TurnView) -> bool {
        true
    }

    /// Whether a call gets the files of the message being answered
    /// (`run_skill_script` does): an admin asked to approve it is shown them.
    fn takes_message_files(&self) -> bool {
        false
    }

    /// What an admin asked to approve a call is shown: what runs, and every
    /// argument whole (through [`quoted`], so no argument can forge a line
    /// of the question). Approval compares a hash of this text, described
    /// again when the admin approves, so whatever changes it (the arguments,
    /// or what they refer to) voids the approval. The default names the
    /// skill and lists the arguments as JSON, one per line.
    fn describe_call(&self, _view: &TurnView, arguments: &Value) -> String {
        describe_arguments(
            &format!("Confirm: Herald wants to run `{}`.", self.spec().name),
            arguments,
        )
    }

    async fn invoke(&self, context: &SkillContext<'_>, arguments: Value) -> Result<ToolOutput, SkillError>;
}

/// `first_line`, then every argument whole, one per line, sorted by name
/// and quoted so that no argument can forge a line of the question.
pub fn describe_arguments(first_line: &str, arguments: &Value) -> String {
    let mut text = first_line.to_owned();
    match arguments.as_object() {
        Some(fields) if !fields.is_empty() => {
            text.push_str("\nArguments:");
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            for key in keys {
                text.push_str(&format!("\n- {}: {}", quoted(key), quoted(&fields[key].to_string())));
            }
        }
        _ => text.push_str("\nArguments: none"),
    }
    text
}

/// The conversation a call acts on (sends to, schedules into): the caller's
/// own, unless an admin names another conversation the store knows. `action`
/// completes "only admins may … another conversation" and `nothing` says
/// what did not happen, for the model to read.
pub async fn target_conversation(
    scope: &TurnScope,
    is_admin: bool,
    requested: Option<&str>,
    store: &dyn ConversationStore,
    action: &str,
    nothing: &str,
) -> Result<ConversationRef, SkillError> {
    let current = &scope.conversation;
    let id = match requested {
        None => return Ok(current.clone()),
        Some(id) if id == current.id.as_str() => return Ok(current.clone()),
        Some(id) => id,
    };
    if !is_admin {
        tracing::warn!(
            actor = ?scope.actor.as_ref().map(|a| a.as_str()),
            conversation = %current.id,
            task = %scope.task,
            "a non-admin's call aimed at another conversation was refused"
        );
        return Err(SkillError::refused(format!(
            "only admins may {action} another conversation; {nothing}"
        )));
    }
    store
        .conversation(&ConversationId::new(id))
        .await?
        .ok_or_else(|| SkillError::refused(format!("no known conversation `{id}`; {nothing}")))
}

/// `text` as a JSON string: quoted, with line breaks, control characters and
/// the invisible characters that reorder or hide text (bidirectional
/// overrides, zero-width spaces, line separators) written as escapes.
pub fn quoted(text: &str) -> String {
    let json = serde_json::to_string(text).expect("a string serialises");
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        let invisible =
            matches!(c as u32, 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x2064 | 0x2066..=0x2069 | 0xFEFF);
        if c.is_control() || invisible {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn quoted_text_cannot_break_lines_or_hide_characters() {
        for (text, shown) in [
            ("plain", r#""plain""#),
            ("two\nlines", r#""two\nlines""#),
            ("say \"hi\"", r#""say \"hi\"""#),
            ("\u{202e}txt.exe", r#""\u202etxt.exe""#),
            ("a\u{2028}b\u{200b}c", r#""a\u2028b\u200bc""#),
            ("nel\u{85}x", r#""nel\u0085x""#),
            ("tab\t", r#""tab\t""#),
        ] {
            assert_eq!(quoted(text), shown, "{text:?}");
        }
    }
}
