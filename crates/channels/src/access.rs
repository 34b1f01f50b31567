//! Who may talk to Herald, decided before anything is queued: admins from
//! configuration, senders an admin approved, and unknown senders by
//! `access.unknown` (allow, deny, or pair with a one-time code).
//!
//! The rules are pure ([`decide`]); the pairing codes and approved senders are
//! kept in the store's state so they survive restarts.
//!
//! A sender whose identity is unverified ([`ActorId::is_verified`]: mail
//! that no trusted server authenticated) is never an admin, never approved,
//! and never offered a code: approving a forgeable identity would let in
//! whoever forges it, and the code would be mailed to an address the sender
//! only claimed.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use herald_core::{ActorId, Admins, ConversationStore, StoreError, Timestamp};
use rand::Rng;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessConfig {
    /// What happens to senders that are neither admins nor approved.
    pub unknown: UnknownSenders,
    /// How long a pairing code can be approved.
    #[serde(with = "herald_core::duration::serde")]
    pub pairing_code_ttl: Duration,
    /// How many pairing replies one process sends in an hour, all senders
    /// together; beyond it unknown senders are not answered.
    pub pairing_replies_per_hour: u32,
}

impl Default for AccessConfig {
    fn default() -> Self {
        Self {
            unknown: UnknownSenders::Pair,
            pairing_code_ttl: Duration::from_secs(3600),
            pairing_replies_per_hour: 30,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownSenders {
    Allow,
    Deny,
    Pair,
}

/// What to do with a message, before it is queued.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
    /// Send the sender a pairing code and queue nothing.
    OfferPairing,
}

/// The local channel is whoever sits at this machine's terminal: trusted.
pub fn decide(sender: &ActorId, admins: &Admins, approved: bool, config: &AccessConfig) -> Decision {
    let verified = sender.is_verified();
    if admins.contains(sender) || (approved && verified) || sender.as_str().starts_with("local:") {
        return Decision::Allow;
    }
    match config.unknown {
        UnknownSenders::Allow => Decision::Allow,
        UnknownSenders::Deny => Decision::Deny,
        UnknownSenders::Pair if !verified => Decision::Deny,
        UnknownSenders::Pair => Decision::OfferPairing,
    }
}

/// The decision when an admin's approval cannot change it (an admin, the
/// local terminal, an unverified sender, or `unknown: allow`), so the store
/// need not be asked; `None` when it depends on the approval.
pub fn decided_without_approval(sender: &ActorId, admins: &Admins, config: &AccessConfig) -> Option<Decision> {
    let unapproved = decide(sender, admins, false, config);
    (unapproved == decide(sender, admins, true, config)).then_some(unapproved)
}

/// How many pairing replies may still go out: at most `per_hour` in any
/// hour, counted by the gateway's clock.
#[derive(Debug)]
pub struct PairingReplies {
    per_hour: u32,
    sent: Mutex<VecDeque<Timestamp>>,
}

impl PairingReplies {
    pub fn new(per_hour: u32) -> Self {
        Self {
            per_hour,
            sent: Mutex::new(VecDeque::new()),
        }
    }

    /// Takes one reply from the budget at `now`; `false` when it is used up.
    pub fn try_take(&self, now: Timestamp) -> bool {
        let mut sent = self.sent.lock().expect("pairing replies lock");
        let hour_ago = now - chrono::Duration::hours(1);
        while sent.front().is_some_and(|at| *at <= hour_ago) {
            sent.pop_front();
        }
        if sent.len() >= self.per_hour as usize {
            return false;
        }
        sent.push_back(now);
        true
    }
}

const APPROVED_SCOPE: &str = "access:approved";
const CODES_SCOPE: &str = "access:pairing";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingRequest {
    pub actor: ActorId,
    pub display_name: String,
    pub expires_at: Timestamp,
}

/// Approved senders and pending pairing codes, persisted.
pub struct Pairing<'a> {
    pub store: &'a dyn ConversationStore,
}

impl Pairing<'_> {
    /// Whether an admin approved `actor`; never for an unverified actor.
    pub async fn is_approved(&self, actor: &ActorId) -> Result<bool, StoreError> {
        if !actor.is_verified() {
            return Ok(false);
        }
        Ok(self.store.get_state(APPROVED_SCOPE, actor.as_str()).await?.is_some())
    }

    /// The code `actor` was given and that is still pending, if any.
    pub async fn pending_code_of(&self, actor: &ActorId, now: Timestamp) -> Result<Option<String>, StoreError> {
        Ok(self
            .pending(now)
            .await?
            .into_iter()
            .find(|(_, request)| &request.actor == actor)
            .map(|(code, _)| code))
    }

    /// The sender's pending code, or a new one. The same sender writing again
    /// gets the same code until it expires.
    pub async fn code_for(
        &self,
        actor: &ActorId,
        display_name: &str,
        now: Timestamp,
        ttl: Duration,
    ) -> Result<(String, bool), StoreError> {
        for (code, value) in self.store.list_state(CODES_SCOPE).await? {
            if let Ok(request) = serde_json::from_value::<PairingRequest>(value) {
                if request.expires_at <= now {
                    self.store.delete_state(CODES_SCOPE, &code).await?;
                } else if &request.actor == actor {
                    return Ok((code, false));
                }
            }
        }
        let code = new_code();
        let request = PairingRequest {
            actor: actor.clone(),
            display_name: display_name.to_owned(),
            expires_at: now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::hours(1)),
        };
        let value = serde_json::to_value(&request).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        self.store.put_state(CODES_SCOPE, &code, &value).await?;
        Ok((code, true))
    }

    /// Approves a pending code; returns who was approved.
    pub async fn approve(&self, code: &str, now: Timestamp) -> Result<Option<PairingRequest>, StoreError> {
        let code = code.trim().to_ascii_uppercase();
        let Some(value) = self.store.get_state(CODES_SCOPE, &code).await? else {
            return Ok(None);
        };
        self.store.delete_state(CODES_SCOPE, &code).await?;
        let Ok(request) = serde_json::from_value::<PairingRequest>(value) else {
            return Ok(None);
        };
        if request.expires_at <= now {
            return Ok(None);
        }
        let approved = serde_json::json!({ "display_name": request.display_name, "approved_at": now.to_rfc3339() });
        self.store
            .put_state(APPROVED_SCOPE, request.actor.as_str(), &approved)
            .await?;
        Ok(Some(request))
    }

    pub async fn pending(&self, now: Timestamp) -> Result<Vec<(String, PairingRequest)>, StoreError> {
        Ok(self
            .store
            .list_state(CODES_SCOPE)
            .await?
            .into_iter()
            .filter_map(|(code, value)| serde_json::from_value::<PairingRequest>(value).ok().map(|r| (code, r)))
            .filter(|(_, r)| r.expires_at > now)
            .collect())
    }
}

/// Six characters from an alphabet without look-alikes (no 0/O, 1/I/L).
fn new_code() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
    let mut rng = rand::thread_rng();
    (0..6)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approval_is_read_only_when_it_can_change_the_decision() {
        let admins = Admins::new([ActorId::new("telegram:1")]);
        let config = |unknown| AccessConfig {
            unknown,
            ..AccessConfig::default()
        };
        for (sender, unknown, expected) in [
            ("telegram:1", UnknownSenders::Pair, Some(Decision::Allow)),
            ("local:anyone", UnknownSenders::Deny, Some(Decision::Allow)),
            ("telegram:2", UnknownSenders::Allow, Some(Decision::Allow)),
            (
                "email:unverified:a@example.com",
                UnknownSenders::Pair,
                Some(Decision::Deny),
            ),
            // Approved senders are let in where others are not: read it.
            ("telegram:2", UnknownSenders::Pair, None),
            ("telegram:2", UnknownSenders::Deny, None),
        ] {
            assert_eq!(
                decided_without_approval(&ActorId::new(sender), &admins, &config(unknown)),
                expected,
                "{sender} {unknown:?}"
            );
        }
    }

    #[test]
    fn decisions_follow_the_table() {
        let admins = Admins::new([
            ActorId::new("telegram:1"),
            ActorId::new("email:alice@example.com"),
            ActorId::new("email:unverified:alice@example.com"),
        ]);
        let config = |unknown| AccessConfig {
            unknown,
            ..AccessConfig::default()
        };
        for (sender, approved, unknown, expected) in [
            ("telegram:1", false, UnknownSenders::Deny, Decision::Allow),
            ("telegram:2", true, UnknownSenders::Deny, Decision::Allow),
            ("telegram:2", false, UnknownSenders::Allow, Decision::Allow),
            ("telegram:2", false, UnknownSenders::Deny, Decision::Deny),
            ("telegram:2", false, UnknownSenders::Pair, Decision::OfferPairing),
            ("local:anyone", false, UnknownSenders::Deny, Decision::Allow),
            // An id that merely looks like an admin's on another channel is not one.
            ("discord:1", false, UnknownSenders::Deny, Decision::Deny),
            // A sender who only claims an identity: never an admin, never
            // approved, never sent a code; served only when everyone is.
            (
                "email:unverified:alice@example.com",
                true,
                UnknownSenders::Pair,
                Decision::Deny,
            ),
            (
                "email:unverified:alice@example.com",
                true,
                UnknownSenders::Deny,
                Decision::Deny,
            ),
            (
                "email:unverified:alice@example.com",
                false,
                UnknownSenders::Allow,
                Decision::Allow,
            ),
            ("email:alice@example.com", false, UnknownSenders::Deny, Decision::Allow),
        ] {
            assert_eq!(
                decide(&ActorId::new(sender), &admins, approved, &config(unknown)),
                expected,
                "{sender}"
            );
        }
    }

    #[test]
    fn the_pairing_reply_budget_refills_after_an_hour() {
        use chrono::TimeZone;
        let start = chrono::Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap();
        let budget = PairingReplies::new(2);
        let minutes = |m| start + chrono::Duration::minutes(m);
        let taken: Vec<bool> = [0, 10, 20, 59, 61, 70, 71]
            .into_iter()
            .map(|m| budget.try_take(minutes(m)))
            .collect();
        assert_eq!(taken, [true, true, false, false, true, true, false]);
    }

    #[test]
    fn codes_avoid_look_alike_characters() {
        for _ in 0..200 {
            let code = new_code();
            assert_eq!(code.len(), 6);
            assert!(!code.contains(['0', 'O', '1', 'I', 'L']), "{code}");
        }
    }
}
