//! The core skills every Herald has: `activate_skill`, `read_skill_file`,
//! `send_message` and `run_skill_script`. Each is a spec plus an `invoke`;
//! the toolbox has already checked the caller's rights and the arguments
//! against the schema when `invoke` runs, and the skills check again what
//! they alone know (the target conversation of `send_message`).

use std::sync::Arc;

use async_trait::async_trait;
use herald_core::{McpServerInfo, OutboundMessage, ToolOutput};
use serde_json::{Value, json};

use crate::activation::{Activation, activate_in_conversation};
use crate::catalog::{CoreSkill, Policy, SkillContext, SkillSpec, TurnView, quoted, target_conversation};
use crate::catalog::{Skill, skill_block};
use crate::error::SkillError;
use crate::execution::files::{MAX_PAGE_CHARS, read_skill_file};
use crate::execution::script::{ScriptFile, ScriptRequest, run_skill_script};
use crate::name::SkillName;
use crate::state;

mod script_files;

pub const ACTIVATE_SKILL: &str = "activate_skill";
pub const READ_SKILL_FILE: &str = "read_skill_file";
pub const SEND_MESSAGE: &str = "send_message";
pub const RUN_SKILL_SCRIPT: &str = "run_skill_script";

/// The four core skills.
pub fn core_skills() -> Vec<Arc<dyn CoreSkill>> {
    vec![
        Arc::new(ActivateSkill(spec(
            ACTIVATE_SKILL,
            "Load a skill's instructions into this conversation before doing a task it covers. \
             Returns its instructions, its folder and its bundled files.",
            json!({
                "type": "object",
                "properties": {"name": {"type": "string", "description": "A skill name from the catalog"}},
                "required": ["name"],
                "additionalProperties": false
            }),
            Policy::default(),
        ))),
        Arc::new(ReadSkillFile(spec(
            READ_SKILL_FILE,
            "Read a file bundled with a skill (references, templates), a page at a time.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The skill"},
                    "path": {"type": "string", "minLength": 1, "description": "Relative to the skill folder, e.g. references/guide.md"},
                    "offset": {"type": "integer", "minimum": 0, "description": "First character to read"},
                    "max_chars": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_CHARS}
                },
                "required": ["name", "path"],
                "additionalProperties": false
            }),
            Policy {
                parallel_safe: true,
                research: true,
                ..Policy::default()
            },
        ))),
        Arc::new(SendMessage(spec(
            SEND_MESSAGE,
            "Send a message to the user now, before the final answer (progress, a result worth sending \
             on its own), with files your scripts left in out/ attached.",
            json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 1, "maxLength": 20000},
                    "attachments": {
                        "type": "array",
                        "items": {"type": "string", "minLength": 1, "maxLength": 300},
                        "maxItems": 10,
                        "description": "Files your scripts left in out/ during this task, by name (report.csv)"
                    },
                    "conversation": {"type": "string", "description": "Another conversation's id (admins only); default: this one"}
                },
                "required": ["text"],
                "additionalProperties": false
            }),
            Policy {
                side_effect: true,
                ..Policy::default()
            },
        ))),
        Arc::new(RunSkillScript(spec(
            RUN_SKILL_SCRIPT,
            "Run a script from a skill's scripts/ folder in a temporary copy of the skill. The files \
             of the message you are answering are in the folder named by $HERALD_FILES_DIR, under \
             their names made safe (/ and leading dots replaced); the result lists them. Needs an \
             admin's confirmation unless autonomy is full.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The skill"},
                    "script": {"type": "string", "minLength": 1, "description": "A file in the skill's scripts/"},
                    "args": {"type": "array", "items": {"type": "string"}, "maxItems": 32},
                    "stdin": {"type": "string", "maxLength": 100000}
                },
                "required": ["name", "script"],
                "additionalProperties": false
            }),
            Policy {
                side_effect: true,
                elevated: true,
                dangerous: true,
                ..Policy::default()
            },
        ))),
    ]
}

fn spec(name: &str, description: &str, parameters: Value, policy: Policy) -> SkillSpec {
    SkillSpec {
        name: SkillName::new(name).expect("core skill names are valid"),
        description: description.to_owned(),
        parameters,
        policy,
    }
}

/// Skill names a tool schema lists as an `enum`; with more, the name stays
/// a string checked when the tool runs. Every name in every turn's tool
/// schemas would otherwise cost more than the catalog it must stay under
/// (10,000 skills made 280,000 characters of schema per turn).
pub const MAX_NAME_ENUM: usize = 64;

/// The schema with `properties.name` narrowed to `names`, when they are few.
fn with_name_enum(parameters: &Value, names: Vec<Value>) -> Value {
    let mut parameters = parameters.clone();
    if names.len() <= MAX_NAME_ENUM
        && let Some(name) = parameters.pointer_mut("/properties/name")
    {
        name["enum"] = Value::Array(names);
    }
    parameters
}

fn visible<'v>(view: &'v TurnView, arguments: &Value) -> Result<&'v Arc<Skill>, SkillError> {
    let name = arguments["name"].as_str().unwrap_or_default();
    view.get(name).ok_or_else(|| SkillError::NotFound(name.to_owned()))
}

struct ActivateSkill(SkillSpec);

#[async_trait]
impl CoreSkill for ActivateSkill {
    fn spec(&self) -> &SkillSpec {
        &self.0
    }

    fn parameters(&self, view: &TurnView) -> Value {
        with_name_enum(&self.0.parameters, view.activatable_names())
    }

    fn offered(&self, view: &TurnView) -> bool {
        (!view.eager && !view.visible.is_empty()) || view.mcp.iter().any(|server| !server.eager)
    }

    async fn invoke(&self, context: &SkillContext<'_>, arguments: Value) -> Result<ToolOutput, SkillError> {
        let name = arguments["name"].as_str().unwrap_or_default();
        if context.view.get(name).is_none()
            && let Some(server) = context.view.mcp_server(name)
        {
            return activate_mcp_server(context, server).await;
        }
        let skill = visible(context.view, &arguments)?;
        let outcome = activate_in_conversation(
            context.services,
            &context.scope.conversation.id,
            context.view,
            &skill.name,
        )
        .await?;
        if let Activation::Refused(refusal) = &outcome {
            return Err(SkillError::refused(format!(
                "skill `{}` was not activated: {}",
                skill.name,
                refusal.reason()
            )));
        }
        let mut text = skill_block(skill.name.as_str(), skill.body());
        text.push_str(&format!("\nFolder: {}", skill.folder.display()));
        if skill.files.is_empty() {
            text.push_str("\nFiles: none");
        } else {
            text.push_str(&format!(
                "\nFiles (read with read_skill_file): {}",
                skill.files.join(", ")
            ));
        }
        if let Some(notice) = outcome.notice(&skill.name) {
            text.push('\n');
            text.push_str(&notice);
        }
        Ok(ToolOutput::ok(text))
    }
}

/// Activates an MCP server: its tools are offered in this conversation
/// from the model's next step, counted against the caps by the size of
/// their schemas.
async fn activate_mcp_server(context: &SkillContext<'_>, server: &McpServerInfo) -> Result<ToolOutput, SkillError> {
    let Some(servers) = &context.services.mcp else {
        return Err(SkillError::NotFound(server.name.clone()));
    };
    if server.eager {
        return Ok(ToolOutput::ok(format!(
            "The tools of `{}` are offered in every turn already.",
            server.name
        )));
    }
    let tools = servers
        .tools(&server.name, crate::catalog::WHOLE_LISTING)
        .await
        .map_err(|err| SkillError::refused(format!("`{}` was not activated: {err}", server.name)))?;
    let name = SkillName::new(server.name.clone()).map_err(SkillError::InvalidArguments)?;
    let mut view = context.view.clone();
    view.mcp_sizes.insert(
        server.name.clone(),
        tools.iter().map(crate::catalog::mcp_schema_chars).sum(),
    );
    let outcome = activate_in_conversation(context.services, &context.scope.conversation.id, &view, &name).await?;
    if let Activation::Refused(refusal) = &outcome {
        return Err(SkillError::refused(format!(
            "`{name}` was not activated: {}",
            refusal.reason()
        )));
    }
    let listed: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    let mut text = format!(
        "The MCP server `{name}` is active in this conversation: {}\nIts tools, offered from your next step: {}",
        server.description,
        if listed.is_empty() {
            "none".to_owned()
        } else {
            listed.join(", ")
        }
    );
    if let Some(notice) = outcome.notice(&name) {
        text.push('\n');
        text.push_str(&notice);
    }
    Ok(ToolOutput::ok(text))
}

struct ReadSkillFile(SkillSpec);

#[async_trait]
impl CoreSkill for ReadSkillFile {
    fn spec(&self) -> &SkillSpec {
        &self.0
    }

    fn parameters(&self, view: &TurnView) -> Value {
        with_name_enum(&self.0.parameters, view.names())
    }

    fn offered(&self, view: &TurnView) -> bool {
        !view.visible.is_empty()
    }

    async fn invoke(&self, context: &SkillContext<'_>, arguments: Value) -> Result<ToolOutput, SkillError> {
        let skill = visible(context.view, &arguments)?;
        let folder = skill.folder.clone();
        let path = arguments["path"].as_str().unwrap_or_default().to_owned();
        let offset = arguments["offset"].as_u64().unwrap_or(0) as usize;
        let max_chars = arguments["max_chars"].as_u64().map(|n| n as usize);
        let page = tokio::task::spawn_blocking(move || read_skill_file(&folder, &path, offset, max_chars))
            .await
            .map_err(|err| SkillError::refused(format!("reading the file failed: {err}")))??;
        Ok(ToolOutput::ok(page.render()))
    }
}

struct SendMessage(SkillSpec);

#[async_trait]
impl CoreSkill for SendMessage {
    fn spec(&self) -> &SkillSpec {
        &self.0
    }

    fn parameters(&self, view: &TurnView) -> Value {
        let mut parameters = self.0.parameters.clone();
        if !view.is_admin
            && let Some(properties) = parameters.get_mut("properties").and_then(Value::as_object_mut)
        {
            properties.remove("conversation");
        }
        parameters
    }

    async fn invoke(&self, context: &SkillContext<'_>, arguments: Value) -> Result<ToolOutput, SkillError> {
        let text = arguments["text"].as_str().unwrap_or_default().to_owned();
        let current = &context.scope.conversation;
        let target = target_conversation(
            context.scope,
            context.is_admin,
            arguments.get("conversation").and_then(Value::as_str),
            context.services.store.as_ref(),
            "send to",
            "nothing was sent",
        )
        .await?;
        let names: Vec<&str> = arguments["attachments"]
            .as_array()
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let (files, notes) = script_files::attach(context, &names, &target).await?;
        // The person learns, with the text, of a file that could not come.
        let text = if notes.is_empty() {
            text
        } else {
            format!("{text}\n\n({}.)", notes.join("; "))
        };
        let attached: Vec<String> = files.iter().map(|file| file.name.clone()).collect();
        let sent = context
            .services
            .outbound
            .send_in_turn(
                context.scope,
                &OutboundMessage {
                    conversation: target.clone(),
                    text: text.clone(),
                    reply_to: None,
                    idempotency_key: Some(format!("task:{}:{}", context.scope.task, context.call_key)),
                    files,
                },
            )
            .await?;
        let same = target.id == current.id;
        let mut content = format!(
            "Sent to {} ({} message{}).",
            if same {
                "this conversation".to_owned()
            } else {
                target.id.to_string()
            },
            sent.platform_message_ids.len(),
            if sent.platform_message_ids.len() == 1 { "" } else { "s" }
        );
        if !attached.is_empty() {
            content.push_str(&format!(" Attached: {}.", attached.join(", ")));
        }
        for note in &notes {
            content.push_str(&format!(" {note}; the person was told."));
        }
        let delivered = if attached.is_empty() {
            text
        } else {
            format!("{text}\n[files sent: {}]", attached.join(", "))
        };
        Ok(ToolOutput {
            content,
            is_error: false,
            delivered_to_conversation: same.then_some(delivered),
        })
    }
}

struct RunSkillScript(SkillSpec);

#[async_trait]
impl CoreSkill for RunSkillScript {
    fn spec(&self) -> &SkillSpec {
        &self.0
    }

    fn parameters(&self, view: &TurnView) -> Value {
        let names = view
            .visible
            .iter()
            .filter(|s| s.scripts().next().is_some())
            .map(|s| Value::from(s.name.as_str()))
            .collect();
        with_name_enum(&self.0.parameters, names)
    }

    fn offered(&self, view: &TurnView) -> bool {
        view.visible.iter().any(|s| s.scripts().next().is_some())
    }

    fn takes_message_files(&self) -> bool {
        true
    }

    /// The skill and the script first, then every argument and the input,
    /// and the skill's revision, so a changed skill voids an approval.
    fn describe_call(&self, view: &TurnView, arguments: &Value) -> String {
        let name = arguments["name"].as_str().unwrap_or_default();
        let script = script_path(arguments["script"].as_str().unwrap_or_default());
        let mut text = format!(
            "Confirm: Herald wants to run script {} of skill {}.",
            code_or_quoted(&script),
            code_or_quoted(name)
        );
        match arguments["args"].as_array().filter(|args| !args.is_empty()) {
            Some(args) => {
                text.push_str("\nArguments:");
                for (index, arg) in args.iter().enumerate() {
                    text.push_str(&format!(
                        "\n{}. {}",
                        index + 1,
                        quoted(arg.as_str().unwrap_or_default())
                    ));
                }
            }
            None => text.push_str("\nArguments: none"),
        }
        if let Some(stdin) = arguments["stdin"].as_str() {
            text.push_str(&format!("\nInput: {}", quoted(stdin)));
        }
        if let Some(skill) = view.get(name) {
            text.push_str(&format!("\nSkill revision: {}", skill.revision));
        }
        text
    }

    async fn invoke(&self, context: &SkillContext<'_>, arguments: Value) -> Result<ToolOutput, SkillError> {
        let skill = visible(context.view, &arguments)?;
        let script = arguments["script"].as_str().unwrap_or_default();
        let args: Vec<String> = arguments["args"]
            .as_array()
            .map(|items| items.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let files = message_files(context).await;
        let receipt = run_skill_script(ScriptRequest {
            folder: &skill.folder,
            script,
            args: &args,
            stdin: arguments["stdin"].as_str(),
            timeout: context.services.config.effective_script_timeout(),
            script_user: context.services.config.script_user.as_deref(),
            containment: context.services.config.script_containment,
            files: &files,
        })
        .await?;
        tracing::info!(
            skill = %skill.name,
            script = %receipt.script,
            status = %receipt.status(),
            task = %context.scope.task,
            "skill script ran"
        );
        let (files, files_text) = script_files::store(context, &receipt.files).await;
        let mut stored = receipt.stored();
        stored["files"] = files;
        stored["skill"] = Value::from(skill.name.as_str());
        stored["at"] = Value::from(context.services.clock.now().to_rfc3339());
        let key = format!("{}:{}", context.scope.task, context.call_key);
        if let Err(err) = context
            .services
            .store
            .put_state(&state::receipts_scope(&context.scope.conversation.id), &key, &stored)
            .await
        {
            tracing::warn!(error = %err, skill = %skill.name, "script receipt not stored");
        }
        let text = receipt.for_model() + &files_text;
        Ok(if receipt.succeeded() {
            ToolOutput::ok(text)
        } else {
            ToolOutput::error(text)
        })
    }
}

/// The bytes of the files of the message the turn answers, read from the
/// file store. A file no longer stored (past the retention) or unreadable
/// just now is left out, and said so in the log.
async fn message_files(context: &SkillContext<'_>) -> Vec<ScriptFile> {
    let Some(store) = &context.services.files else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for file in &context.scope.files {
        match store.get(&file.file.sha256).await {
            Ok(Some(bytes)) => files.push(ScriptFile {
                name: file.name.clone(),
                bytes,
            }),
            Ok(None) => {
                tracing::info!(task = %context.scope.task, "a message file is no longer stored; not given to the script")
            }
            Err(err) => {
                tracing::warn!(error = %err, task = %context.scope.task, "a message file could not be read for a script")
            }
        }
    }
    files
}

/// `scripts/NAME` for a script named with or without that prefix.
fn script_path(script: &str) -> String {
    let script = script.trim_start_matches("./");
    format!("scripts/{}", script.strip_prefix("scripts/").unwrap_or(script))
}

/// A plain name in backticks; anything else quoted with its escapes.
fn code_or_quoted(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
    {
        format!("`{text}`")
    } else {
        quoted(text)
    }
}
