//! Files scripts leave for the conversation, from `out/` to the platform:
//! `run_skill_script` stores them in the file store and keeps their
//! references in its receipt; `send_message` attaches them by name.
//!
//! Architecture invariant: `send_message` attaches only files a script of
//! the same task left, looked up by exact name in that task's receipts. A
//! name is never a path, and no other stored file (a person's photo, another
//! task's output) can be sent by naming it.

use herald_core::{ConversationRef, FileRef, InlineBytes, OutboundFile, human_size};
use serde_json::{Value, json};

use crate::catalog::SkillContext;
use crate::error::SkillError;
use crate::execution::script::ScriptFiles;
use crate::state;

/// Stores the files a run left; returns the references for its receipt and
/// the lines that tell the model about them.
pub(super) async fn store(context: &SkillContext<'_>, files: &ScriptFiles) -> (Value, String) {
    let mut kept = Vec::new();
    let mut lines = Vec::new();
    let mut passed_over = files.passed_over.clone();
    for file in &files.kept {
        let Some(store) = &context.services.files else {
            passed_over.push(format!("{} (this Herald keeps no files)", file.name));
            continue;
        };
        match store
            .put(&file.content_type, &file.bytes, context.services.clock.now())
            .await
        {
            Ok(stored) => {
                lines.push(format!(
                    "out/{} ({}, {})",
                    file.name,
                    file.content_type,
                    human_size(stored.size)
                ));
                kept.push(json!({"name": file.name, "file": stored}));
            }
            Err(err) => {
                tracing::warn!(error = %err, "a script's output file was not stored");
                passed_over.push(format!("{} (not stored: {err})", file.name));
            }
        }
    }
    let mut text = String::new();
    if !lines.is_empty() {
        text.push_str(&format!(
            "\nFiles left in out/ (send them with send_message's attachments): {}",
            lines.join(", ")
        ));
    }
    if !passed_over.is_empty() {
        text.push_str(&format!("\nFiles in out/ not kept: {}", passed_over.join(", ")));
    }
    (Value::Array(kept), text)
}

/// The files scripts of this task left, by name; a later run's file wins
/// over an earlier one of the same name.
async fn left_by_this_task(context: &SkillContext<'_>) -> Result<Vec<(String, FileRef)>, SkillError> {
    let scope = state::receipts_scope(&context.scope.conversation.id);
    let prefix = format!("{}:", context.scope.task);
    let mut receipts: Vec<Value> = context
        .services
        .store
        .list_state(&scope)
        .await?
        .into_iter()
        .filter(|(key, _)| key.starts_with(&prefix))
        .map(|(_, receipt)| receipt)
        .collect();
    receipts.sort_by(|a, b| a["at"].as_str().cmp(&b["at"].as_str()));
    let mut files: Vec<(String, FileRef)> = Vec::new();
    for receipt in receipts {
        for entry in receipt["files"].as_array().into_iter().flatten() {
            let (Some(name), Ok(file)) = (
                entry["name"].as_str(),
                serde_json::from_value::<FileRef>(entry["file"].clone()),
            ) else {
                continue;
            };
            files.retain(|(known, _)| known != name);
            files.push((name.to_owned(), file));
        }
    }
    Ok(files)
}

/// The files `names` name, read from the file store, for a message to
/// `target`; and a note for each one the target's platform does not take
/// (too large). A name that is not a file this task's scripts left refuses
/// the whole message.
pub(super) async fn attach(
    context: &SkillContext<'_>,
    names: &[&str],
    target: &ConversationRef,
) -> Result<(Vec<OutboundFile>, Vec<String>), SkillError> {
    if names.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let left = left_by_this_task(context).await?;
    let mut chosen = Vec::new();
    for name in names {
        let wanted = name.strip_prefix("out/").unwrap_or(name);
        let Some((name, file)) = left.iter().find(|(left_name, _)| left_name == wanted) else {
            let known: Vec<&str> = left.iter().map(|(name, _)| name.as_str()).collect();
            return Err(SkillError::refused(format!(
                "`{name}` is not a file a script of this task left in out/ ({}); nothing was sent",
                if known.is_empty() {
                    "no script of this task left any".to_owned()
                } else {
                    format!("you may attach: {}", known.join(", "))
                }
            )));
        };
        if !chosen.iter().any(|(known, _): &(&String, &FileRef)| *known == name) {
            chosen.push((name, file));
        }
    }
    let channel = &target.channel;
    let Some(max_bytes) = context
        .services
        .outbound
        .get(channel)
        .and_then(|outbound| outbound.max_file_bytes())
    else {
        return Err(SkillError::refused(format!(
            "the {channel} channel cannot send files yet; nothing was sent"
        )));
    };
    let Some(store) = &context.services.files else {
        return Err(SkillError::refused("this Herald keeps no files; nothing was sent"));
    };
    let mut files = Vec::new();
    let mut notes = Vec::new();
    for (name, file) in chosen {
        if file.size > max_bytes {
            notes.push(format!(
                "{name} was not attached: it is {}, over what {channel} takes ({})",
                human_size(file.size),
                human_size(max_bytes)
            ));
            continue;
        }
        let Some(bytes) = store.get(&file.sha256).await? else {
            return Err(SkillError::refused(format!(
                "{name} is no longer stored; nothing was sent"
            )));
        };
        files.push(OutboundFile {
            name: name.clone(),
            content_type: file.content_type.clone(),
            bytes: InlineBytes(bytes.into()),
        });
    }
    Ok((files, notes))
}
