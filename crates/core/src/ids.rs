//! Identifier newtypes. They are strings on the wire and in the database, but
//! distinct types in code so a conversation id is never passed where an actor
//! id is expected.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn new(value: impl Into<String>) -> Self {
                Self(value.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self(value.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                Self(value)
            }
        }
    };
}

string_id!(
    /// A channel adapter's name: `local`, `telegram`, `discord`, `slack`, `email`.
    ChannelName
);
string_id!(
    /// A conversation, unique across channels: `local:owner`,
    /// `telegram:123456789`, `telegram:-1001234/7` (a forum topic).
    ConversationId
);
string_id!(
    /// A sender, identified by the channel's stable user id: `telegram:123456789`,
    /// `email:alice@example.com`. Admin rights are granted to these ids and
    /// nothing else.
    ///
    /// A channel whose platform does not authenticate senders (email's
    /// `From`, unless the receiving server vouched for it) names a sender
    /// with [`ActorId::unverified`]: `email:unverified:alice@example.com`.
    /// Such an id is never an admin ([`crate::Admins::contains`]) and never
    /// equal to the verified id it claims, so nothing granted to the real
    /// sender reaches whoever forged their address.
    ActorId
);

impl ConversationId {
    /// The channel a conversation id belongs to (the part before the first `:`).
    pub fn channel(&self) -> ChannelName {
        ChannelName::new(self.0.split(':').next().unwrap_or_default())
    }
}

/// What follows the channel in an unverified actor id.
const UNVERIFIED: &str = "unverified:";

impl ActorId {
    /// Builds `channel:user` from a channel and that channel's stable user
    /// id, as its platform authenticated it.
    pub fn on(channel: &ChannelName, user: impl fmt::Display) -> Self {
        Self(format!("{channel}:{user}"))
    }

    /// `channel:unverified:user`: a sender who only claims to be `user`.
    pub fn unverified(channel: &ChannelName, claimed: impl fmt::Display) -> Self {
        Self(format!("{channel}:{UNVERIFIED}{claimed}"))
    }

    /// Whether the platform (or a server Herald trusts) vouched for this
    /// sender. Fails closed: any id written as unverified is one.
    pub fn is_verified(&self) -> bool {
        !self
            .0
            .split_once(':')
            .is_some_and(|(_, user)| user.starts_with(UNVERIFIED))
    }
}

/// A task's row id in the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskId(pub i64);

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_channel_is_the_prefix() {
        for (id, channel) in [
            ("local:owner", "local"),
            ("telegram:-1001234/7", "telegram"),
            ("email:thread:abc@x", "email"),
            ("bare", "bare"),
        ] {
            assert_eq!(ConversationId::new(id).channel().as_str(), channel);
        }
    }

    #[test]
    fn unverified_ids_never_equal_the_id_they_claim() {
        let email = ChannelName::new("email");
        let claimed = ActorId::unverified(&email, "alice@example.com");
        assert_eq!(claimed.as_str(), "email:unverified:alice@example.com");
        assert_ne!(claimed, ActorId::on(&email, "alice@example.com"));
        for (id, verified) in [
            ("email:unverified:alice@example.com", false),
            ("email:alice@example.com", true),
            ("telegram:123", true),
            ("local:owner", true),
        ] {
            assert_eq!(ActorId::new(id).is_verified(), verified, "{id}");
        }
    }

    #[test]
    fn actor_ids_join_channel_and_user() {
        assert_eq!(
            ActorId::on(&ChannelName::new("discord"), 80351110224678912u64).as_str(),
            "discord:80351110224678912"
        );
    }
}
