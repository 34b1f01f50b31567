//! Dangerous calls waiting for an admin: a short code, the call it stands
//! for, and the texts Herald shows. Stored in the `skill_confirmations`
//! scope so a restart does not lose a pending question.

use herald_core::{ActorId, ConversationRef, TaskId, Timestamp, TurnOrigin, TurnScope};
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::name::SkillName;

/// Letters and digits that cannot be mistaken for one another.
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
const CODE_LENGTH: usize = 6;
/// Arguments are shown to the admin up to this many characters.
const SHOWN_ARGUMENT_CHARS: usize = 600;

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
    pub ordinal: u32,
    pub expires_at: Timestamp,
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
        }
    }

    /// What the admin is asked.
    pub fn question(&self, valid_for: &str) -> String {
        let mut shown: String = self.canonical.chars().take(SHOWN_ARGUMENT_CHARS).collect();
        if self.canonical.chars().count() > SHOWN_ARGUMENT_CHARS {
            shown.push('…');
        }
        format!(
            "Confirm: Herald wants to run `{}` with {shown}\nReply /approve {code} to run it or /deny {code} to refuse (valid {valid_for}).",
            self.skill,
            code = self.code
        )
    }
}

pub fn new_code() -> String {
    let mut rng = rand::thread_rng();
    (0..CODE_LENGTH)
        .map(|_| CODE_ALPHABET[rng.gen_range(0..CODE_ALPHABET.len())] as char)
        .collect()
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
