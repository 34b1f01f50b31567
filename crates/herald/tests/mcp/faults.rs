//! Servers that misbehave: a crash in the middle of a side effect, a call
//! that never answers, results of megabytes, a tool list that changes. In
//! each case the turn ends with an answer, the server is started again on
//! next use, and nothing is repeated that must not be.

use herald_testkit::{Reply, ScriptedModel};
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::common::{reply_texts, stderr};
use crate::{McpHerald, is_dead, mcp_tools, results};

#[tokio::test]
async fn a_crash_mid_call_is_not_repeated_and_the_server_comes_back() {
    let setup = McpHerald::start("").await;
    let crashing = json!({"text": "once", "crash_after": true});
    setup
        .model()
        .push(Reply::tool_call("mcp__faults__append_note", crashing.clone()));
    // The model tries the same side effect again after the failure.
    setup
        .model()
        .push(Reply::tool_call("mcp__faults__append_note", crashing));
    setup
        .model()
        .push(Reply::tool_call("mcp__faults__lookup", json!({"key": "k"})));
    setup.model().push(Reply::text("recovered"));
    let output = setup.chat("owner", "$faults note once\n").await;
    assert_eq!(reply_texts(&output).last().unwrap(), "recovered");
    let requests = setup.model().requests();
    let first = results(&requests, 1);
    assert!(
        first[0].starts_with("error:") && first[0].contains("went away during the call"),
        "{first:?}"
    );
    let second = results(&requests, 2);
    assert_eq!(second[1], first[0], "the retry is answered from the first call");
    assert_eq!(setup.notes(), ["once"], "the side effect ran once");
    assert_eq!(results(&requests, 3)[2], "value of k", "a new server process answers");
}

#[tokio::test]
async fn a_call_that_hangs_times_out_and_the_server_is_restarted() {
    let setup = McpHerald::start("").await;
    setup.model().push(Reply::tool_call("mcp__faults__hang", json!({})));
    setup
        .model()
        .push(Reply::tool_call("mcp__faults__lookup", json!({"key": "after"})));
    setup.model().push(Reply::text("it hung"));
    let output = setup.chat("owner", "$faults hang\n").await;
    assert_eq!(reply_texts(&output).last().unwrap(), "it hung");
    let requests = setup.model().requests();
    let hung = results(&requests, 1);
    assert!(
        hung[0].starts_with("error:") && hung[0].contains("did not answer within 5s"),
        "{hung:?}"
    );
    assert_eq!(results(&requests, 2)[1], "value of after");
    // The hung server and the one started after it: neither outlives the chat.
    let pids = setup.server_pids();
    assert_eq!(pids.len(), 2, "{pids:?}");
    // Killed when the chat ends; on a loaded machine the kernel may take a
    // moment to finish them, so allow it that (a hang guard, not a timing).
    for pid in pids {
        let mut waited = 0;
        while !is_dead(pid) && waited < 100 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            waited += 1;
        }
        assert!(is_dead(pid), "server process {pid} outlived Herald");
    }
}

#[tokio::test]
async fn huge_results_are_capped_and_oversized_ones_end_in_an_error() {
    let setup = McpHerald::start("").await;
    setup
        .model()
        .push(Reply::tool_call("mcp__faults__huge", json!({"megabytes": 1})));
    setup
        .model()
        .push(Reply::tool_call("mcp__faults__huge", json!({"megabytes": 6})));
    setup
        .model()
        .push(Reply::tool_call("mcp__faults__lookup", json!({"key": "small"})));
    setup.model().push(Reply::text("that was a lot"));
    let output = setup.chat("owner", "$faults flood\n").await;
    assert_eq!(reply_texts(&output).last().unwrap(), "that was a lot");
    let requests = setup.model().requests();
    let capped = &results(&requests, 1)[0];
    assert!(
        capped.starts_with("BEGIN") && capped.ends_with("END") && capped.contains("bytes left out"),
        "{}",
        &capped[..200.min(capped.len())]
    );
    assert!(capped.len() <= 16 * 1024, "{} bytes reached the model", capped.len());
    let oversized = &results(&requests, 2)[1];
    assert!(
        oversized.starts_with("error:"),
        "{}",
        &oversized[..200.min(oversized.len())]
    );
    assert!(oversized.len() < 1000);
    assert_eq!(results(&requests, 3)[2], "value of small");
}

#[tokio::test]
async fn a_changed_tool_list_is_picked_up() {
    let setup = McpHerald::start("").await;
    setup.model().push(Reply::tool_call("mcp__faults__add_tool", json!({})));
    setup.model().push(Reply::text("added"));
    setup.model().push(Reply::tool_call("mcp__faults__fresh", json!({})));
    setup.model().push(Reply::text("used it"));
    let output = setup.chat("owner", "$faults add a tool\nnow use it\n").await;
    assert_eq!(reply_texts(&output), ["added", "used it"]);
    let requests = setup.model().requests();
    assert!(!mcp_tools(&requests[0]).contains(&"mcp__faults__fresh".to_owned()));
    assert!(
        mcp_tools(&requests[2]).contains(&"mcp__faults__fresh".to_owned()),
        "{:?}",
        mcp_tools(&requests[2])
    );
    assert_eq!(results(&requests, 3), ["fresh and new"]);
}

#[tokio::test]
async fn a_side_effect_is_not_repeated_when_herald_dies_and_the_task_is_retried() {
    let setup = McpHerald::with_top_level(ScriptedModel::start().await, "", "queue:\n  lease: 1s\n");
    let note = json!({"text": "once"});
    setup
        .model()
        .push(Reply::tool_call("mcp__faults__append_note", note.clone()));
    setup.model().push(Reply::Hang);
    let mut child = setup.herald.spawn_chat("owner");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"$faults note once\n").await.unwrap();
    // The note is written and the model is thinking about it: Herald dies.
    setup.model().wait_for_requests(2).await;
    child.start_kill().unwrap();
    let killed = child.wait_with_output().await.unwrap();
    assert!(reply_texts(&killed).is_empty());
    assert_eq!(setup.notes(), ["once"]);
    setup.model().release();

    // The retried task makes the same call; its record answers it.
    setup.model().push(Reply::tool_call("mcp__faults__append_note", note));
    setup.model().push(Reply::text("noted"));
    let restarted = setup.herald.chat("owner", "").await;
    assert_eq!(reply_texts(&restarted), ["noted"], "{}", stderr(&restarted));
    assert_eq!(setup.notes(), ["once"], "the side effect ran again after the retry");
    let requests = setup.model().requests();
    assert_eq!(results(&requests, requests.len() - 1), ["noted once"]);
}
