//! Who a bot's message would ping on Discord, from its content and the
//! `allowed_mentions` of the request that created or edited it, so a test
//! can assert that Herald's answer pinged nobody.
//!
//! Discord parses `<@ID>` / `<@!ID>` (users), `<@&ID>` (roles), and
//! `@everyone` / `@here` out of the content. Without `allowed_mentions`
//! every one of them pings (the fake's bot may mention everyone and every
//! role), and a reply pings the author of the message it replies to. With
//! `allowed_mentions`, only the types in `parse` ping, or the ids listed in
//! `users` / `roles` (which must still appear in the content), and the
//! replied-to author only with `replied_user: true`. An edit without
//! `allowed_mentions` is parsed with these defaults again, whatever the
//! original request allowed, as Discord's Edit Message documents.
//!
//! Architecture invariant: pure; the caller records the pings. Mentions in
//! code blocks are counted like any other: the fake errs towards reporting.

use serde_json::Value;

/// A request's `allowed_mentions`, or Discord's defaults without one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowedMentions {
    parse_users: bool,
    parse_roles: bool,
    parse_everyone: bool,
    users: Vec<String>,
    roles: Vec<String>,
    replied_user: bool,
}

impl Default for AllowedMentions {
    /// No `allowed_mentions` in the request: everything in the content pings.
    fn default() -> Self {
        Self {
            parse_users: true,
            parse_roles: true,
            parse_everyone: true,
            users: Vec::new(),
            roles: Vec::new(),
            replied_user: true,
        }
    }
}

/// Why Discord refuses an `allowed_mentions` (a 50035 Invalid Form Body).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
}

fn ids(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|id| match id {
                    Value::String(id) => Some(id.clone()),
                    Value::Number(id) => Some(id.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

impl AllowedMentions {
    /// Reads the request's `allowed_mentions` field (absent or `null`: the defaults).
    pub fn from_request(field: Option<&Value>) -> Result<Self, Refusal> {
        let Some(object) = field.filter(|v| !v.is_null()) else {
            return Ok(Self::default());
        };
        let parse: Vec<String> = ids(&object["parse"]);
        let has = |kind: &str| parse.iter().any(|p| p == kind);
        let allowed = Self {
            parse_users: has("users"),
            parse_roles: has("roles"),
            parse_everyone: has("everyone"),
            users: ids(&object["users"]),
            roles: ids(&object["roles"]),
            replied_user: object["replied_user"].as_bool().unwrap_or(false),
        };
        for (kind, parsed, listed) in [
            ("users", allowed.parse_users, &allowed.users),
            ("roles", allowed.parse_roles, &allowed.roles),
        ] {
            if parsed && !listed.is_empty() {
                return Err(Refusal {
                    code: "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE",
                    message: format!("parse:[\"{kind}\"] and {kind}: [ids...] are mutually exclusive."),
                });
            }
        }
        Ok(allowed)
    }
}

/// A mention written in the content.
#[derive(Debug, PartialEq, Eq)]
enum Written<'a> {
    User(&'a str),
    Role(&'a str),
    Everyone,
    Here,
}

fn written(content: &str) -> Vec<Written<'_>> {
    let mut found = Vec::new();
    let mut rest = content;
    while let Some(at) = rest.find(['<', '@']) {
        let tail = &rest[at..];
        let mut step = 1;
        if let Some(inner) = tail.strip_prefix("<@") {
            let (role, inner) = match inner.strip_prefix('&') {
                Some(inner) => (true, inner),
                None => (false, inner.strip_prefix('!').unwrap_or(inner)),
            };
            let digits = inner.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 && inner[digits..].starts_with('>') {
                let id = &inner[..digits];
                found.push(if role { Written::Role(id) } else { Written::User(id) });
                step = tail.len() - inner.len() + digits + 1;
            }
        } else if tail.starts_with("@everyone") {
            found.push(Written::Everyone);
            step = "@everyone".len();
        } else if tail.starts_with("@here") {
            found.push(Written::Here);
            step = "@here".len();
        }
        rest = &tail[step..];
    }
    found
}

/// Who a message with `content` pings under `allowed`: `everyone`, `here`,
/// `role:ID` and `user:ID`, each once, in the order written; the author
/// of the message replied to (`replied_author`) last.
pub fn pings(content: &str, allowed: &AllowedMentions, replied_author: Option<&str>) -> Vec<String> {
    let mut pings: Vec<String> = Vec::new();
    let mut add = |ping: String| {
        if !pings.contains(&ping) {
            pings.push(ping);
        }
    };
    for mention in written(content) {
        match mention {
            Written::User(id) if allowed.parse_users || allowed.users.iter().any(|u| u == id) => {
                add(format!("user:{id}"));
            }
            Written::Role(id) if allowed.parse_roles || allowed.roles.iter().any(|r| r == id) => {
                add(format!("role:{id}"));
            }
            Written::Everyone if allowed.parse_everyone => add("everyone".into()),
            Written::Here if allowed.parse_everyone => add("here".into()),
            _ => {}
        }
    }
    if let Some(author) = replied_author
        && allowed.replied_user
    {
        add(format!("user:{author}"));
    }
    pings
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const CONTENT: &str = "@everyone and @here, <@123> <@!456> <@&987> <@123> <@abc> @every";

    fn allowed(value: Value) -> AllowedMentions {
        AllowedMentions::from_request(Some(&value)).expect("accepted")
    }

    #[test]
    fn without_allowed_mentions_everything_written_pings() {
        assert_eq!(
            pings(CONTENT, &AllowedMentions::default(), Some("42")),
            ["everyone", "here", "user:123", "user:456", "role:987", "user:42"]
        );
        assert_eq!(AllowedMentions::from_request(None), Ok(AllowedMentions::default()));
        assert_eq!(
            AllowedMentions::from_request(Some(&Value::Null)),
            Ok(AllowedMentions::default())
        );
    }

    #[test]
    fn allowed_mentions_limit_what_pings() {
        let cases = [
            (json!({"parse": ["users"]}), vec!["user:123", "user:456"]),
            (json!({"parse": []}), vec![]),
            (json!({}), vec![]),
            (json!({"parse": ["everyone"]}), vec!["everyone", "here"]),
            (
                json!({"parse": ["roles"], "users": ["456", "999"]}),
                vec!["user:456", "role:987"],
            ),
            (json!({"roles": [987]}), vec!["role:987"]),
            (json!({"parse": [], "replied_user": true}), vec!["user:42"]),
        ];
        for (request, expected) in cases {
            assert_eq!(
                pings(CONTENT, &allowed(request.clone()), Some("42")),
                expected,
                "{request}"
            );
        }
    }

    #[test]
    fn parse_and_a_list_of_the_same_kind_are_refused() {
        for request in [
            json!({"parse": ["users"], "users": ["1"]}),
            json!({"parse": ["roles"], "roles": ["1"]}),
        ] {
            let refusal = AllowedMentions::from_request(Some(&request)).unwrap_err();
            assert_eq!(refusal.code, "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE", "{request}");
        }
    }
}
