//! Which skills' instructions a conversation carries: `$name` mentions,
//! `/name` requests and trigger patterns activate skills within caps, and
//! each turn's prompt gets the catalog and the active bodies.
//!
//! MCP servers share the catalog and the active set: an active server (or
//! an eager one) brings its tools to the turn instead of a body, its tool
//! schemas counted against the same caps and the per-turn bound.
//!
//! Architecture invariant: a body reaches the prompt only for a skill this
//! sender may see ([`TurnView`]); skills hidden from one sender stay active
//! for the others in a shared conversation, unrendered here.

mod caps;
mod mention;

use herald_core::{ConversationId, ConversationStore, PromptSection, StoreError, TurnPreparation, TurnScope};

pub use caps::{Activation, ActiveSkills};
use mention::{MAX_MENTIONS, expand_slash, parse_mentions, parse_slash};

use crate::catalog::{Catalog, Hidden, Services, TurnView, render_catalog, skill_block};
use crate::config::CapLimits;
use crate::error::SkillError;
use crate::name::SkillName;
use crate::state;

/// Prompt sections, tools, notices and rewritten input for a turn that is
/// not a chat command.
pub(crate) async fn prepare_turn(
    catalog: &Catalog,
    services: &Services,
    scope: &TurnScope,
    is_admin: bool,
    user_text: Option<&str>,
    stored: Option<Option<serde_json::Value>>,
) -> TurnPreparation {
    let mut view = catalog.view(is_admin);
    let store = services.store.as_ref();
    let conversation = &scope.conversation.id;
    let mut preparation = TurnPreparation::default();

    // Read with the history when the agent could; otherwise here.
    let loaded = match stored {
        Some(stored) => parse_active(conversation, stored),
        None => load_active(store, conversation).await,
    };
    let mut active = loaded.as_ref().cloned().unwrap_or_else(|err| {
        tracing::warn!(error = %err, conversation = %conversation, "active skills unreadable; starting empty");
        ActiveSkills::default()
    });
    let before = active.clone();
    {
        // Skills that are gone or switched off leave the set; skills this
        // sender may not see stay active for the others, unrendered here.
        let servers: Vec<String> = catalog.mcp_servers().into_iter().map(|s| s.name).collect();
        let registry = catalog.read();
        active.retain(|name| {
            let known = registry.agent_skill(name.as_str()).is_some() || servers.iter().any(|s| s == name.as_str());
            known && registry.is_enabled(name)
        });
    }
    if let Some(text) = user_text {
        let unreachable = reach_mentioned_servers(catalog, text, &mut view, &mut preparation.notices).await;
        activate_from_text(
            catalog,
            services,
            text,
            &view,
            &unreachable,
            &mut active,
            &mut preparation.notices,
        );
        if let Some(request) = parse_slash(text)
            && let Some(skill) = view.get(request.name)
        {
            preparation.model_input = Some(expand_slash(request.name, skill.body(), request.rest));
        }
    }
    if active != before
        && let Err(err) = save_active(store, conversation, &active).await
    {
        tracing::warn!(error = %err, conversation = %conversation, "active skills not saved");
    }

    let caps = &services.caps;
    let servers_to_activate: Vec<(&str, &str)> = view
        .mcp
        .iter()
        .filter(|s| !s.eager)
        .map(|s| (s.name.as_str(), s.description.as_str()))
        .collect();
    if view.eager {
        preparation.sections.extend(eager_section(&view, caps));
    }
    if (!view.eager && !view.visible.is_empty()) || !servers_to_activate.is_empty() {
        let mut entries: Vec<(&str, &str)> = Vec::new();
        if !view.eager {
            entries.extend(view.visible.iter().map(|s| (s.name.as_str(), s.description())));
        }
        entries.extend(servers_to_activate);
        let rendered = render_catalog(&entries, services.config.catalog_chars);
        preparation.sections.push(PromptSection {
            label: format!(
                "skill catalog: {} listed, {} left out",
                rendered.listed, rendered.left_out
            ),
            text: rendered.text,
        });
        if !view.eager {
            preparation.sections.extend(active_section(&active, &view, caps));
        }
    }
    preparation.tools = catalog.tools(&view);
    preparation
        .tools
        .extend(mcp_turn_tools(catalog, services, &view, &active).await);
    preparation
}

/// The tools of a turn after calls that may have activated something: the
/// core skills and the MCP tools for the conversation's active set now.
pub(crate) async fn tools_now(
    catalog: &Catalog,
    services: &Services,
    scope: &TurnScope,
    is_admin: bool,
) -> Vec<herald_core::ToolSpec> {
    let view = catalog.view(is_admin);
    let active = load_active(services.store.as_ref(), &scope.conversation.id)
        .await
        .unwrap_or_default();
    let mut tools = catalog.tools(&view);
    tools.extend(mcp_turn_tools(catalog, services, &view, &active).await);
    tools
}

/// The MCP tools offered this turn: eager servers' first, then active
/// servers' (the most recently used first), within the caps' characters
/// and the per-turn tool count.
async fn mcp_turn_tools(
    catalog: &Catalog,
    services: &Services,
    view: &TurnView,
    active: &ActiveSkills,
) -> Vec<herald_core::ToolSpec> {
    let mut servers: Vec<String> = view.mcp.iter().filter(|s| s.eager).map(|s| s.name.clone()).collect();
    for name in active.names().iter().rev() {
        if view.mcp_server(name.as_str()).is_some_and(|s| !s.eager) {
            servers.push(name.to_string());
        }
    }
    if servers.is_empty() {
        return Vec::new();
    }
    catalog.mcp_tool_specs(&servers, services.caps.max_chars).await
}

/// Reaches the MCP servers `$mentioned` in `text`, so their size is known
/// before they are activated. Returns the ones that could not be reached,
/// each with a notice saying why.
async fn reach_mentioned_servers(
    catalog: &Catalog,
    text: &str,
    view: &mut TurnView,
    notices: &mut Vec<String>,
) -> Vec<String> {
    let mut unreachable = Vec::new();
    for name in parse_mentions(text).names {
        if view.mcp_server(&name).is_none_or(|s| s.eager) {
            continue;
        }
        match catalog.mcp_tools(&name, crate::catalog::WHOLE_LISTING).await {
            Ok(_) => {
                let size = catalog.mcp_size(&name);
                view.mcp_sizes.insert(name, size);
            }
            Err(err) => {
                notices.push(format!("MCP server `{name}` was not activated: {err}."));
                unreachable.push(name);
            }
        }
    }
    unreachable
}

/// Activates `name` in `conversation` within the caps, and saves.
pub(crate) async fn activate_in_conversation(
    services: &Services,
    conversation: &ConversationId,
    view: &TurnView,
    name: &SkillName,
) -> Result<Activation, SkillError> {
    let mut active = load_active(services.store.as_ref(), conversation).await?;
    let size = |n: &SkillName| view.size_of(n);
    let outcome = active.activate(name, size, &services.caps);
    if !matches!(outcome, Activation::Refused(_)) {
        save_active(services.store.as_ref(), conversation, &active).await?;
    }
    Ok(outcome)
}

/// The conversation's active set, empty when it has none.
pub(crate) async fn load_active(
    store: &dyn ConversationStore,
    conversation: &ConversationId,
) -> Result<ActiveSkills, StoreError> {
    parse_active(
        conversation,
        store.get_state(state::ACTIVE, conversation.as_str()).await?,
    )
}

/// A conversation's active set as stored (`None`: never stored, empty).
fn parse_active(conversation: &ConversationId, stored: Option<serde_json::Value>) -> Result<ActiveSkills, StoreError> {
    match stored {
        Some(value) => serde_json::from_value(value)
            .map_err(|err| StoreError::Corrupt(format!("active skills of {conversation}: {err}"))),
        None => Ok(ActiveSkills::default()),
    }
}

pub(crate) async fn save_active(
    store: &dyn ConversationStore,
    conversation: &ConversationId,
    active: &ActiveSkills,
) -> Result<(), StoreError> {
    let value = serde_json::to_value(active).map_err(|err| StoreError::Corrupt(err.to_string()))?;
    store.put_state(state::ACTIVE, conversation.as_str(), &value).await
}

/// `$name` mentions and trigger patterns, applied to the active set.
fn activate_from_text(
    catalog: &Catalog,
    services: &Services,
    text: &str,
    view: &TurnView,
    unreachable: &[String],
    active: &mut ActiveSkills,
    notices: &mut Vec<String>,
) {
    let caps = services.caps;
    let size = |n: &SkillName| view.size_of(n);
    let mentions = parse_mentions(text);
    for name in &mentions.names {
        if unreachable.contains(name) {
            continue;
        }
        let server = view
            .mcp_server(name)
            .and_then(|server| SkillName::new(server.name.clone()).ok().map(|n| (n, server.eager)));
        match (view.get(name), server) {
            (Some(skill), _) => {
                let outcome = active.activate(&skill.name, size, &caps);
                notices.extend(outcome.notice(&skill.name));
            }
            // An eager server's tools are offered anyway.
            (None, Some((_, true))) => {}
            (None, Some((server, false))) => {
                let outcome = active.activate(&server, size, &caps);
                notices.extend(outcome.notice(&server));
            }
            (None, None) => {
                let hidden = catalog.read().hidden(name, view.is_admin).unwrap_or(Hidden::Unknown);
                notices.push(hidden_notice(name, &hidden, view.is_admin));
            }
        }
    }
    if mentions.dropped > 0 {
        notices.push(format!(
            "Only the first {MAX_MENTIONS} skill mentions of a message are used; {} more were not.",
            mentions.dropped
        ));
    }
    if services.config.triggers {
        for skill in &view.visible {
            if !active.contains(&skill.name) && skill.trigger.as_ref().is_some_and(|t| t.is_match(text)) {
                let outcome = active.activate(&skill.name, size, &caps);
                notices.extend(outcome.notice(&skill.name));
            }
        }
    }
}

fn hidden_notice(name: &str, hidden: &Hidden, is_admin: bool) -> String {
    match (hidden, is_admin) {
        (Hidden::Disabled, true) => format!("Skill `{name}` is disabled; /skills enable {name} turns it on."),
        (Hidden::Unavailable(why), true) => format!("Skill `{name}` is unavailable here: it {why}."),
        _ => format!("There is no skill `{name}` available here."),
    }
}

/// The active bodies from their current revision, most recent kept first
/// when they no longer fit together.
fn active_section(active: &ActiveSkills, view: &TurnView, caps: &CapLimits) -> Option<PromptSection> {
    let mut budget = caps.max_chars;
    let mut shown = Vec::new();
    for name in active.names().iter().rev() {
        let Some(skill) = view.get(name.as_str()) else { continue };
        let chars = skill.document.body_chars();
        if chars > budget {
            continue;
        }
        budget -= chars;
        shown.push(skill);
    }
    if shown.is_empty() {
        return None;
    }
    shown.reverse();
    let blocks: Vec<String> = shown.iter().map(|s| skill_block(s.name.as_str(), s.body())).collect();
    Some(PromptSection {
        label: format!("active skills: {}", shown.len()),
        text: format!(
            "Active skills in this conversation; follow their instructions where they apply.\n\n{}",
            blocks.join("\n\n")
        ),
    })
}

fn eager_section(view: &TurnView, caps: &CapLimits) -> Option<PromptSection> {
    let mut budget = caps.max_chars;
    let mut blocks = Vec::new();
    let mut left_out = 0;
    for skill in &view.visible {
        let chars = skill.document.body_chars();
        if chars > budget {
            left_out += 1;
            continue;
        }
        budget -= chars;
        blocks.push(skill_block(skill.name.as_str(), skill.body()));
    }
    if blocks.is_empty() {
        return None;
    }
    let mut text = format!(
        "Skills: follow the instructions of the one that fits the request.\n\n{}",
        blocks.join("\n\n")
    );
    if left_out > 0 {
        text.push_str(&format!("\n\n({left_out} more skills did not fit)"));
    }
    Some(PromptSection {
        label: format!("skills (eager): {}", blocks.len()),
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::MemoryStore;

    #[tokio::test]
    async fn the_active_set_round_trips_through_the_store() {
        let store = MemoryStore::default();
        let conversation = ConversationId::new("local:owner");
        assert!(load_active(&store, &conversation).await.unwrap().is_empty());
        let set = ActiveSkills::from_names(vec![SkillName::new("notes").unwrap()]);
        save_active(&store, &conversation, &set).await.unwrap();
        assert_eq!(load_active(&store, &conversation).await.unwrap(), set);
    }
}
