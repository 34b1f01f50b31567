//! Dangerous calls waiting for an admin: a short code, the call it stands
//! for, and the texts Herald shows. Stored in the `skill_confirmations`
//! scope so a restart does not lose a pending question.
//!
//! The question shows the call whole ([`CoreSkill::describe_call`]) in one
//! chat message, or is not asked: an admin never approves an argument they
//! were not shown. A hash of what was shown is kept with the call.

use std::sync::Arc;

use herald_core::{ActorId, ConversationRef, MessageFile, TaskId, Timestamp, ToolOutput, TurnOrigin, TurnScope};
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::catalog::{CoreSkill, Services, TurnView, quoted};
use crate::name::SkillName;
use crate::state;

/// Letters and digits that cannot be mistaken for one another.
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
const CODE_LENGTH: usize = 6;
/// The longest question, in UTF-16 units (which are never fewer than
/// characters): Discord's 2,000 characters, the smallest message of the
/// platforms Herald serves (Telegram allows 4,096 UTF-16 units).
pub const MAX_QUESTION_UTF16: usize = 2000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    pub code: String,
    pub task: TaskId,
    pub conversation: ConversationRef,
    pub actor: Option<ActorId>,
    pub reply_to: Option<String>,
    pub skill: SkillName,
    pub arguments: Value,
    /// The canonical text of `arguments`, for deduplication.
    pub canonical: String,
    /// The occurrence of the call in its turn (stored as `ordinal` before).
    #[serde(alias = "ordinal")]
    pub occurrence: u32,
    pub expires_at: Timestamp,
    /// SHA-256 of what the admin was shown, in hex.
    #[serde(default)]
    pub shown_hash: String,
    /// The stored files of the message the asking turn answered: the call
    /// runs with them once approved, as it would have then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<MessageFile>,
}

impl PendingCall {
    /// The scope the call runs in once approved: the turn that asked for it,
    /// set going again by the person who typed `/approve`.
    pub fn scope(&self) -> TurnScope {
        TurnScope {
            task: self.task,
            conversation: self.conversation.clone(),
            actor: self.actor.clone(),
            is_admin: true,
            reply_to: self.reply_to.clone(),
            origin: TurnOrigin::Person,
            files: self.files.clone(),
        }
    }
}

/// The question for the call described as `shown`, under `code`.
fn question(shown: &str, code: &str, valid_for: &str) -> String {
    format!("{shown}\nReply /approve {code} to run it or /deny {code} to refuse (valid {valid_for}).")
}

/// What an admin is shown of a call: the skill's own description, and the
/// message's files when the call gets them, each name quoted.
pub(crate) fn shown_call(skill: &dyn CoreSkill, view: &TurnView, arguments: &Value, files: &[MessageFile]) -> String {
    let mut shown = skill.describe_call(view, arguments);
    if skill.takes_message_files() && !files.is_empty() {
        let names: Vec<String> = files.iter().map(|file| quoted(&file.name)).collect();
        shown.push_str(&format!("\nFiles of the message, given to it: {}", names.join(", ")));
    }
    shown
}

/// The hash kept of what an admin was shown.
pub(crate) fn shown_hash(shown: &str) -> String {
    hex::encode(Sha256::digest(shown.as_bytes()))
}

pub fn new_code() -> String {
    let mut rng = rand::thread_rng();
    (0..CODE_LENGTH)
        .map(|_| CODE_ALPHABET[rng.gen_range(0..CODE_ALPHABET.len())] as char)
        .collect()
}

/// Stores the call under a new code (or finds the one asked for already) and
/// asks the conversation; the model is told only that it waits.
pub(crate) async fn ask(
    services: &Services,
    scope: &TurnScope,
    skill: &Arc<dyn CoreSkill>,
    view: &TurnView,
    arguments: Value,
    canonical: String,
    occurrence: u32,
) -> ToolOutput {
    let store = services.store.as_ref();
    let name = &skill.spec().name;
    let now = services.clock.now();
    let valid_for = herald_core::duration::format(services.config.confirm_timeout);
    let shown = shown_call(skill.as_ref(), view, &arguments, &scope.files);
    let length = question(&shown, &"X".repeat(CODE_LENGTH), &valid_for)
        .encode_utf16()
        .count();
    if length > MAX_QUESTION_UTF16 {
        tracing::info!(skill = %name, task = %scope.task, length, "dangerous call too long to show; not asked");
        return ToolOutput::error(format!(
            "this call of `{name}` is too long to show an admin in one chat message ({length} characters with \
             the question, at most {MAX_QUESTION_UTF16}); nothing was run and nobody was asked. Shorten the \
             arguments or the input."
        ));
    }
    let existing = match store.list_state(state::CONFIRMATIONS).await {
        Ok(entries) => {
            let mut found = None;
            for (code, value) in entries {
                match serde_json::from_value::<PendingCall>(value) {
                    Ok(pending) if pending.expires_at >= now => {
                        if pending.task == scope.task && &pending.skill == name && pending.canonical == canonical {
                            found = Some(pending);
                        }
                    }
                    // Expired or unreadable questions are dropped as they are met.
                    _ => {
                        if let Err(err) = store.delete_state(state::CONFIRMATIONS, &code).await {
                            tracing::debug!(error = %err, "stale confirmation not removed");
                        }
                    }
                }
            }
            found
        }
        Err(err) => {
            tracing::warn!(error = %err, skill = %name, "confirmations unreadable; not asking");
            return ToolOutput::error(format!("storage is unavailable, so `{name}` was not run"));
        }
    };
    if existing.is_none() {
        let timeout = chrono::Duration::from_std(services.config.confirm_timeout)
            .unwrap_or_else(|_| chrono::Duration::minutes(10));
        let pending = PendingCall {
            code: new_code(),
            task: scope.task,
            conversation: scope.conversation.clone(),
            actor: scope.actor.clone(),
            reply_to: scope.reply_to.clone(),
            skill: name.clone(),
            arguments,
            canonical,
            occurrence,
            expires_at: now + timeout,
            shown_hash: shown_hash(&shown),
            files: scope.files.clone(),
        };
        let value = serde_json::to_value(&pending).unwrap_or_default();
        if let Err(err) = store.put_state(state::CONFIRMATIONS, &pending.code, &value).await {
            tracing::warn!(error = %err, skill = %name, "confirmation not stored; not asking");
            return ToolOutput::error(format!("storage is unavailable, so `{name}` was not run"));
        }
        let question = herald_core::OutboundMessage {
            conversation: scope.conversation.clone(),
            text: question(&shown, &pending.code, &valid_for),
            reply_to: scope.reply_to.clone(),
            idempotency_key: None,
            files: Vec::new(),
        };
        if let Err(err) = services.outbound.send_in_turn(scope, &question).await {
            tracing::warn!(error = %err, skill = %name, "confirmation question not sent");
        }
        tracing::info!(skill = %name, task = %scope.task, "dangerous skill waits for confirmation");
    }
    // The code goes to the people in the conversation only: a model that
    // read it could get it typed back to Herald (a scheduled instruction,
    // a quoted message) and approve its own call.
    ToolOutput::ok(format!(
        "Not run yet: `{name}` needs an admin's confirmation, which was asked for in this conversation \
         (valid {valid_for}); it runs when an admin approves. Tell the user and do not call it again."
    ))
}

/// Removes and returns the pending call of `code`, or the reply saying why not.
pub(crate) async fn take(services: &Services, code: &str) -> Result<PendingCall, String> {
    let store = services.store.as_ref();
    let unknown = || format!("No request is waiting for code {code}.");
    let value = match store.get_state(state::CONFIRMATIONS, code).await {
        Ok(Some(value)) => value,
        Ok(None) => return Err(unknown()),
        Err(err) => return Err(format!("Storage is unavailable ({err}); try again.")),
    };
    let pending: PendingCall = serde_json::from_value(value).map_err(|_| unknown())?;
    if let Err(err) = store.delete_state(state::CONFIRMATIONS, code).await {
        return Err(format!("Storage is unavailable ({err}); try again."));
    }
    if pending.expires_at < services.clock.now() {
        return Err(format!("Code {code} has expired; `{}` was not run.", pending.skill));
    }
    Ok(pending)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_short_and_unambiguous() {
        for _ in 0..50 {
            let code = new_code();
            assert_eq!(code.len(), CODE_LENGTH);
            assert!(code.bytes().all(|b| CODE_ALPHABET.contains(&b)), "{code}");
            assert!(!code.contains('O') && !code.contains('0') && !code.contains('I') && !code.contains('1'));
        }
    }
}
