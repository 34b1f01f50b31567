//! What a finished turn leaves behind: the history entries to record and
//! the reply to send. Pure, so the heartbeat's quiet rule and the shape of
//! history are table-tested without a store.

use herald_core::heartbeat::strip_ok_token;
use herald_core::{ActorId, NewHistoryEntry, Role, TurnOrigin};

use crate::turn::TurnOutcome;

/// A turn's history entries and the reply still to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Recording {
    pub entries: Vec<NewHistoryEntry>,
    pub reply: Option<String>,
    /// Whether the prompt's accounting is worth keeping for `herald explain`.
    pub explain: bool,
}

/// What to record and send for `outcome`. `None`: a heartbeat found nothing
/// that needs attention, and nothing is sent or recorded.
///
/// A person's turn keeps what they said and what Herald answered (the reply,
/// or what tools already sent when there is no reply of its own). A
/// scheduled instruction is kept as the user side of its turn, so the model
/// later sees what it was asked. A heartbeat keeps only what it said —
/// alerts from tools first, its reply last, so a retry re-sends only the
/// reply — and never its checklist.
pub(crate) fn recording(
    origin: TurnOrigin,
    input: Option<&str>,
    actor: Option<&ActorId>,
    outcome: &TurnOutcome,
) -> Option<Recording> {
    let assistant = |text: String| NewHistoryEntry {
        role: Role::Assistant,
        actor: None,
        text,
    };
    if let Some(limit) = origin.quiet_limit() {
        let reply = outcome.reply_to_send().and_then(|text| strip_ok_token(text, limit));
        let entries: Vec<NewHistoryEntry> = outcome
            .delivered_by_tools
            .iter()
            .filter_map(|text| strip_ok_token(text, limit))
            .chain(reply.clone())
            .map(assistant)
            .collect();
        return (!entries.is_empty()).then_some(Recording {
            entries,
            reply,
            explain: false,
        });
    }
    let reply = outcome.reply_to_send().map(str::to_owned);
    let answered = reply.clone().unwrap_or_else(|| {
        if outcome.text.trim().is_empty() && !outcome.delivered_by_tools.is_empty() {
            outcome.delivered_by_tools.join("\n\n")
        } else {
            outcome.text.clone()
        }
    });
    let mut entries = Vec::with_capacity(2);
    if let Some(text) = input {
        entries.push(NewHistoryEntry {
            role: Role::User,
            actor: actor.cloned(),
            text: text.to_owned(),
        });
    }
    entries.push(assistant(answered));
    Some(Recording {
        entries,
        reply,
        explain: !outcome.direct,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::PromptAccounting;

    fn outcome(text: &str, delivered: &[&str], direct: bool) -> TurnOutcome {
        TurnOutcome {
            text: text.into(),
            notices: Vec::new(),
            delivered_by_tools: delivered.iter().map(|t| (*t).to_owned()).collect(),
            accounting: PromptAccounting::default(),
            model_calls: 1,
            tool_calls: delivered.len() as u32,
            direct,
        }
    }

    /// Entries as `U:text` / `A:text`, the reply, and whether to explain.
    type Summary<'a> = (Vec<&'a str>, Option<&'a str>, bool);

    fn summary(recording: Option<Recording>) -> Option<(Vec<String>, Option<String>, bool)> {
        recording.map(|r| {
            let entries = r
                .entries
                .iter()
                .map(|e| format!("{}:{}", if e.role == Role::User { "U" } else { "A" }, e.text))
                .collect();
            (entries, r.reply, r.explain)
        })
    }

    #[test]
    fn each_kind_of_turn_records_what_it_should() {
        let ann = ActorId::new("local:ann");
        let heartbeat = TurnOrigin::Heartbeat { ack_max_chars: 300 };
        let cases: Vec<(TurnOrigin, &str, TurnOutcome, Option<Summary>)> = vec![
            (
                TurnOrigin::Person,
                "hi",
                outcome("Hello!", &[], false),
                Some((vec!["U:hi", "A:Hello!"], Some("Hello!"), true)),
            ),
            // A chat command's answer is recorded but explains no prompt.
            (
                TurnOrigin::Person,
                "/skills",
                outcome("No skills.", &[], true),
                Some((vec!["U:/skills", "A:No skills."], Some("No skills."), false)),
            ),
            // A tool already sent the final text: recorded, not sent again.
            (
                TurnOrigin::Person,
                "hi",
                outcome("Sent!", &["Sent!"], false),
                Some((vec!["U:hi", "A:Sent!"], None, true)),
            ),
            // Nothing more to say after a tool spoke: history keeps what was sent.
            (
                TurnOrigin::Person,
                "hi",
                outcome("", &["Working on it", "Done"], false),
                Some((vec!["U:hi", "A:Working on it\n\nDone"], None, true)),
            ),
            (
                TurnOrigin::Schedule,
                "Say the word",
                outcome("The word.", &[], false),
                Some((vec!["U:Say the word", "A:The word."], Some("The word."), true)),
            ),
            // Heartbeats: all clear is silence; alerts are kept without the checklist.
            (heartbeat, "checklist", outcome("HEARTBEAT_OK", &[], false), None),
            (
                heartbeat,
                "checklist",
                outcome("HEARTBEAT_OK", &["HEARTBEAT_OK"], false),
                None,
            ),
            (
                heartbeat,
                "checklist",
                outcome("All clear. HEARTBEAT_OK", &[], false),
                None,
            ),
            (heartbeat, "checklist", outcome("", &[], false), None),
            (
                heartbeat,
                "checklist",
                outcome("Disk full.", &[], false),
                Some((vec!["A:Disk full."], Some("Disk full."), false)),
            ),
            (
                heartbeat,
                "checklist",
                outcome("HEARTBEAT_OK", &["Backup failed"], false),
                Some((vec!["A:Backup failed"], None, false)),
            ),
        ];
        for (origin, input, outcome, expected) in cases {
            let label = format!("{origin:?} {input:?} {outcome:?}");
            let expected = expected.map(|(entries, reply, explain)| {
                (
                    entries.into_iter().map(str::to_owned).collect::<Vec<_>>(),
                    reply.map(str::to_owned),
                    explain,
                )
            });
            assert_eq!(
                summary(recording(origin, Some(input), Some(&ann), &outcome)),
                expected,
                "{label}"
            );
        }
    }

    #[test]
    fn the_user_entry_carries_the_sender() {
        let ann = ActorId::new("local:ann");
        let recorded = recording(
            TurnOrigin::Person,
            Some("hi"),
            Some(&ann),
            &outcome("Hello", &[], false),
        )
        .unwrap();
        assert_eq!(recorded.entries[0].actor.as_ref(), Some(&ann));
        assert_eq!(recorded.entries[1].actor, None);
    }
}
