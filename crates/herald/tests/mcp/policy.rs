//! Herald's policy over MCP tools, attacked: a non-admin and an elevated
//! server, a denied tool, a tool of a server nobody activated, a
//! destructive tool that must wait for an admin, read-only tools in
//! parallel. Every refusal is checked where it matters: the server's side
//! effect did not happen.

use herald_testkit::Reply;
use herald_testkit::openai::{system_prompt, tool_names};
use serde_json::json;

use crate::common::reply_texts;
use crate::{McpHerald, mcp_tools, results};

#[tokio::test]
async fn a_non_admin_never_gets_an_elevated_servers_tools() {
    let setup = McpHerald::start("").await;
    // Hallucinated or injected: the tool by name, then an activation.
    setup
        .model()
        .push(Reply::tool_call("mcp__everything__get-env", json!({})));
    setup
        .model()
        .push(Reply::tool_call("activate_skill", json!({"name": "everything"})));
    setup.model().push(Reply::text("done"));
    let output = setup.chat("mallory", "$everything show me the environment\n").await;
    let replies = reply_texts(&output);
    assert!(
        replies
            .iter()
            .any(|r| r.contains("There is no skill `everything` available here")),
        "the mention says nothing of the server: {replies:?}"
    );
    let requests = setup.model().requests();
    let prompt = system_prompt(&requests[0]).unwrap_or_default();
    assert!(!prompt.contains("everything"), "not in a non-admin's catalog: {prompt}");
    assert!(!mcp_tools(&requests[0]).iter().any(|t| t.contains("everything")));
    let refused = results(&requests, 1);
    assert!(
        refused[0].starts_with("error:") && refused[0].contains("for admins only") && !refused[0].contains("PATH"),
        "{refused:?}"
    );
    let activation = results(&requests, 2);
    assert!(activation[1].starts_with("error:"), "{activation:?}");
    assert!(!mcp_tools(&requests[2]).iter().any(|t| t.contains("everything")));

    // Non-admins do not see it in /skills either.
    let output = setup.chat("mallory", "/skills\n").await;
    assert!(!reply_texts(&output)[0].contains("everything"));
}

#[tokio::test]
async fn a_tool_of_a_server_nobody_activated_is_refused_and_runs_nothing() {
    let setup = McpHerald::start("").await;
    setup
        .model()
        .push(Reply::tool_call("mcp__faults__append_note", json!({"text": "sneaky"})));
    setup.model().push(Reply::text("done"));
    setup.chat("mallory", "write a note\n").await;
    let requests = setup.model().requests();
    assert!(mcp_tools(&requests[0]).is_empty());
    let refused = results(&requests, 1);
    assert!(
        refused[0].contains("not active in this conversation") && refused[0].contains("activate_skill"),
        "{refused:?}"
    );
    assert!(setup.notes().is_empty(), "the server wrote {:?}", setup.notes());
}

#[tokio::test]
async fn a_denied_tool_is_neither_offered_nor_run() {
    let setup = McpHerald::start("      tools: {deny: [wipe]}\n").await;
    setup
        .model()
        .push(Reply::tool_call("mcp__faults__wipe", json!({"target": "/"})));
    setup.model().push(Reply::text("done"));
    setup.chat("owner", "$faults wipe it all\n").await;
    let requests = setup.model().requests();
    let offered = mcp_tools(&requests[0]);
    assert!(offered.contains(&"mcp__faults__lookup".to_owned()), "{offered:?}");
    assert!(!offered.contains(&"mcp__faults__wipe".to_owned()), "{offered:?}");
    let refused = results(&requests, 1);
    assert!(refused[0].starts_with("error:"), "{refused:?}");
    assert!(setup.notes().is_empty(), "the server wrote {:?}", setup.notes());
}

#[tokio::test]
async fn a_destructive_tool_waits_for_an_admins_approval() {
    let setup = McpHerald::start("").await;
    // A non-admin may use the server, but not ask for a destructive call.
    setup
        .model()
        .push(Reply::tool_call("mcp__faults__wipe", json!({"target": "reports"})));
    setup.model().push(Reply::text("I cannot."));
    setup.chat("mallory", "$faults wipe the reports\n").await;
    let refused = results(&setup.model().requests(), 1);
    assert!(refused[0].contains("needs an admin's confirmation"), "{refused:?}");
    assert!(setup.notes().is_empty());

    setup
        .model()
        .push(Reply::tool_call("mcp__faults__wipe", json!({"target": "reports"})));
    setup.model().push(Reply::text("It waits for your approval."));
    let output = setup.chat("owner", "$faults wipe the reports\n").await;
    let question = reply_texts(&output)
        .into_iter()
        .find(|t| t.contains("Reply /approve "))
        .expect("a question was asked");
    assert!(
        question.contains("`mcp__faults__wipe` on the MCP server `faults`") && question.contains("reports"),
        "{question}"
    );
    assert!(setup.notes().is_empty(), "nothing ran before the approval");
    let line = question.lines().find(|l| l.starts_with("Reply /approve ")).unwrap();
    let code: String = line["Reply /approve ".len()..].chars().take(6).collect();
    let output = setup.chat("owner", &format!("/approve {code}\n")).await;
    assert!(
        reply_texts(&output)[0].contains("wiped reports"),
        "{:?}",
        reply_texts(&output)
    );
    assert_eq!(setup.notes(), ["wiped reports"]);
}

#[tokio::test]
async fn read_only_tools_of_one_step_run_at_the_same_time() {
    let setup = McpHerald::start("").await;
    setup.model().push(Reply::ToolCalls(vec![
        ("mcp__faults__rendezvous".into(), json!({"name": "first"})),
        ("mcp__faults__rendezvous".into(), json!({"name": "second"})),
    ]));
    setup.model().push(Reply::text("they met"));
    setup.chat("owner", "$faults meet\n").await;
    let requests = setup.model().requests();
    assert!(tool_names(&requests[0]).contains(&"mcp__faults__rendezvous".to_owned()));
    // Run one after the other, the first would have waited alone.
    assert_eq!(
        results(&requests, 1),
        ["first met another call", "second met another call"]
    );
}
