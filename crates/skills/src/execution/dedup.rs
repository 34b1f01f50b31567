//! Side effects run at most once per task and arguments, across crashes
//! too: the first result of a side-effect call is remembered in memory and
//! its idempotency record is kept in the store.
//!
//! Order matters: the record is written before the effect runs, so a task
//! retried after a crash finds it and does not repeat the effect.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Mutex;

use herald_core::{ConversationStore, TaskId, ToolOutput};

use crate::name::SkillName;
use crate::state::{self, CallRecord, StoredOutput};

/// Tasks whose side effects are remembered in memory (the store keeps them all).
const REMEMBERED_TASKS: usize = 256;

/// A task's first results, by skill and canonical arguments.
type FirstResults = HashMap<(SkillName, String), ToolOutput>;

/// First results of side-effect calls, per task.
#[derive(Debug, Default)]
pub(crate) struct SideEffects {
    by_task: Mutex<BTreeMap<TaskId, FirstResults>>,
}

impl SideEffects {
    /// Runs `effect` unless this task ran the same call before, in this
    /// process or (by its record in `store`) in an earlier one.
    pub async fn run_once(
        &self,
        store: &dyn ConversationStore,
        task: TaskId,
        ordinal: u32,
        skill: &SkillName,
        canonical: &str,
        effect: impl Future<Output = ToolOutput>,
    ) -> ToolOutput {
        if let Some(first) = self.get(task, skill, canonical) {
            tracing::debug!(skill = %skill, task = %task, "repeated side effect answered from the first call");
            return first;
        }
        let key = state::call_key(ordinal, skill, canonical);
        match state::call_record(store, task, &key).await {
            Ok(Some(CallRecord::Done(stored))) => {
                let output = ToolOutput::from(stored);
                self.remember(task, skill, canonical, &output);
                return output;
            }
            Ok(Some(CallRecord::Started)) => {
                tracing::warn!(skill = %skill, task = %task, "side effect interrupted before; not repeated");
                let output = ToolOutput::error(format!(
                    "`{skill}` was started with these arguments before Herald restarted and may have taken \
                     effect; it is not repeated"
                ));
                self.remember(task, skill, canonical, &output);
                return output;
            }
            Ok(None) => {}
            Err(err) => {
                tracing::warn!(error = %err, skill = %skill, "idempotency record unreadable; effect not run");
                return ToolOutput::error(format!("storage is unavailable, so `{skill}` was not run"));
            }
        }
        if let Err(err) = state::put_call_record(store, task, &key, &CallRecord::Started).await {
            tracing::warn!(error = %err, skill = %skill, "idempotency record not written; effect not run");
            return ToolOutput::error(format!("storage is unavailable, so `{skill}` was not run"));
        }
        let output = effect.await;
        let done = CallRecord::Done(StoredOutput::from(&output));
        if let Err(err) = state::put_call_record(store, task, &key, &done).await {
            tracing::warn!(error = %err, skill = %skill, "side effect ran but its result was not stored");
        }
        self.remember(task, skill, canonical, &output);
        output
    }

    fn get(&self, task: TaskId, skill: &SkillName, canonical: &str) -> Option<ToolOutput> {
        self.by_task
            .lock()
            .expect("side effects lock")
            .get(&task)?
            .get(&(skill.clone(), canonical.to_owned()))
            .cloned()
    }

    fn remember(&self, task: TaskId, skill: &SkillName, canonical: &str, output: &ToolOutput) {
        let mut by_task = self.by_task.lock().expect("side effects lock");
        by_task
            .entry(task)
            .or_default()
            .insert((skill.clone(), canonical.to_owned()), output.clone());
        while by_task.len() > REMEMBERED_TASKS {
            by_task.pop_first();
        }
    }
}
