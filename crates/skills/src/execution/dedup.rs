//! Side effects run at most once per task and call: the same skill with the
//! same canonical arguments, however often and in whatever order the model
//! makes it, in this process or in one that retries the task after a crash.
//!
//! A call is named by its task, skill, canonical arguments and occurrence
//! (the how-manieth identical call of its turn, see
//! [`herald_core::Toolbox::invoke`]), never by its position, so a retry that
//! orders its calls differently finds them. Only a first occurrence ever
//! runs: a later one is answered with the first one's result, and gets a
//! record of its own, so every name a retry may look up has one.
//!
//! Order matters: the record is written before the effect runs, so a task
//! retried after a crash finds it and does not repeat the effect.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};

use herald_core::{ConversationStore, TaskId, ToolOutput};

use crate::name::SkillName;
use crate::state::{self, CallRecord, StoredOutput};

/// Tasks whose side effects are remembered in memory (the store keeps them all).
const REMEMBERED_TASKS: usize = 256;

/// One call of a task, whatever its occurrence: skill and canonical arguments.
type Call = (SkillName, String);

/// One call by its full name: task, skill, canonical arguments, occurrence.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallName<'a> {
    pub task: TaskId,
    pub skill: &'a SkillName,
    pub canonical: &'a str,
    pub occurrence: u32,
}

impl CallName<'_> {
    fn key(&self, occurrence: u32) -> String {
        state::call_key(self.skill, self.canonical, occurrence)
    }

    fn call(&self) -> Call {
        (self.skill.clone(), self.canonical.to_owned())
    }
}

/// What this process knows of one task's side-effect calls.
#[derive(Debug, Default)]
struct TaskMemory {
    /// First results, by call.
    results: HashMap<Call, ToolOutput>,
    /// Held while a call is looked up and run, so two identical calls of a
    /// task never run at once.
    running: HashMap<Call, Arc<tokio::sync::Mutex<()>>>,
}

/// First results of side-effect calls, per task.
#[derive(Debug, Default)]
pub(crate) struct SideEffects {
    by_task: Mutex<BTreeMap<TaskId, TaskMemory>>,
}

impl SideEffects {
    /// Runs `effect` unless this task made the same call before, in this
    /// process or (by its record in `store`) in an earlier one.
    pub async fn run_once(
        &self,
        store: &dyn ConversationStore,
        name: CallName<'_>,
        effect: impl Future<Output = ToolOutput>,
    ) -> ToolOutput {
        let CallName {
            task,
            skill,
            occurrence,
            ..
        } = name;
        let call = name.call();
        let lock = self.lock_for(task, &call);
        let _running = lock.lock().await;
        let key = name.key(occurrence);
        let earlier = match self.first_result(task, &call) {
            Some(first) => Some(first),
            None => match self.recorded(store, name).await {
                Ok(recorded) => recorded,
                Err(output) => return output,
            },
        };
        if let Some(output) = earlier {
            tracing::debug!(skill = %skill, task = %task, occurrence, "repeated side effect answered from the first call");
            self.remember(task, &call, &output);
            // This occurrence gets its record too: a retry may look it up first.
            if let Ok(None) = state::call_record(store, task, &key).await {
                let done = CallRecord::Done(StoredOutput::from(&output));
                if let Err(err) = state::put_call_record(store, task, &key, &done).await {
                    tracing::debug!(error = %err, skill = %skill, "record of a repeated call not written");
                }
            }
            return output;
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
        self.remember(task, &call, &output);
        output
    }

    /// The stored outcome of this call, looked up under this occurrence and
    /// under the first (the one that runs); `Err` is the answer when the
    /// store cannot say.
    async fn recorded(
        &self,
        store: &dyn ConversationStore,
        name: CallName<'_>,
    ) -> Result<Option<ToolOutput>, ToolOutput> {
        let CallName { task, skill, .. } = name;
        let mut occurrences = vec![name.occurrence];
        if name.occurrence != 1 {
            occurrences.push(1);
        }
        for occurrence in occurrences {
            match state::call_record(store, task, &name.key(occurrence)).await {
                Ok(Some(CallRecord::Done(stored))) => return Ok(Some(ToolOutput::from(stored))),
                Ok(Some(CallRecord::Started)) => {
                    tracing::warn!(skill = %skill, task = %task, "side effect interrupted before; not repeated");
                    return Ok(Some(ToolOutput::error(format!(
                        "`{skill}` was started with these arguments before Herald restarted and may have taken \
                         effect; it is not repeated"
                    ))));
                }
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!(error = %err, skill = %skill, "idempotency record unreadable; effect not run");
                    return Err(ToolOutput::error(format!(
                        "storage is unavailable, so `{skill}` was not run"
                    )));
                }
            }
        }
        Ok(None)
    }

    fn lock_for(&self, task: TaskId, call: &Call) -> Arc<tokio::sync::Mutex<()>> {
        let mut by_task = self.by_task.lock().expect("side effects lock");
        let memory = by_task.entry(task).or_default();
        let lock = Arc::clone(memory.running.entry(call.clone()).or_default());
        while by_task.len() > REMEMBERED_TASKS {
            by_task.pop_first();
        }
        lock
    }

    fn first_result(&self, task: TaskId, call: &Call) -> Option<ToolOutput> {
        self.by_task
            .lock()
            .expect("side effects lock")
            .get(&task)?
            .results
            .get(call)
            .cloned()
    }

    fn remember(&self, task: TaskId, call: &Call, output: &ToolOutput) {
        let mut by_task = self.by_task.lock().expect("side effects lock");
        by_task
            .entry(task)
            .or_default()
            .results
            .insert(call.clone(), output.clone());
        while by_task.len() > REMEMBERED_TASKS {
            by_task.pop_first();
        }
    }
}
