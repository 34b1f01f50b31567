//! The composition root: opens storage, builds the model client and the
//! toolbox, and assembles an [`Agent`] for whichever channels this process
//! serves.

use std::sync::Arc;

use anyhow::{Context, Result};
use herald_agent::{Agent, TurnLimits};
use herald_core::{Admins, ChatModel, Clock, Outbound, SystemClock, Toolbox};
use herald_schedule::{Scheduler, Schedules};
use herald_skills::SkillToolbox;
use herald_store::Storage;

use crate::config::Config;
use crate::schedules::{ScheduleCommands, schedule_skills};

pub struct App {
    pub config: Config,
    pub storage: Storage,
    pub model: Arc<dyn ChatModel>,
    pub clock: Arc<dyn Clock>,
}

/// rustls needs one process-wide crypto provider; the tree could bring two.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A database URL with any password replaced, fit for messages and logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_once('/').map_or((rest, None), |(a, p)| (a, Some(p)));
    let authority = match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => format!("{user_info}@{host}"),
        },
        None => authority.to_owned(),
    };
    match path {
        Some(path) => format!("{scheme}://{authority}/{path}"),
        None => format!("{scheme}://{authority}"),
    }
}

impl App {
    /// Opens storage (applying migrations) and builds the model client.
    pub async fn open(config: Config) -> Result<Self> {
        install_crypto_provider();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let storage = open_storage(&config, clock.clone()).await?;
        let model = herald_llm::model_from_config(&config.llm)
            .with_context(|| format!("setting up the model client for llm.base_url = {}", config.llm.base_url))?;
        Ok(Self {
            config,
            storage,
            model,
            clock,
        })
    }

    /// Fails with one line naming `llm.base_url` when the model cannot be reached.
    pub async fn check_model(&self) -> Result<()> {
        // The probe's errors name llm.base_url and the URL already.
        herald_llm::probe(&self.config.llm)
            .await
            .map(|_| ())
            .map_err(anyhow::Error::from)
    }

    /// The skill registry for this process, sending through `outbound`.
    pub async fn skills(&self, outbound: Outbound) -> Result<Arc<SkillToolbox>> {
        let toolbox = SkillToolbox::builder(
            self.config.skills.clone(),
            self.storage.conversations(),
            self.config.llm.context_chars,
        )
        .outbound(outbound)
        .admins(Admins::new(self.config.admins.iter().cloned()))
        .clock(self.clock.clone())
        .skills(schedule_skills(self.schedules(), self.storage.conversations()))
        .build()
        .await
        .context("loading skills")?;
        Ok(Arc::new(toolbox))
    }

    /// Schedules in this process's database.
    pub fn schedules(&self) -> Schedules {
        Schedules::new(self.storage.schedules(), self.clock.clone()).with_limits(self.config.schedules.limits())
    }

    /// The scheduler: due schedules and the heartbeat, into the queue.
    pub fn scheduler(&self) -> Scheduler {
        Scheduler::new(
            self.storage.schedules(),
            self.storage.queue(),
            self.storage.conversations(),
            self.clock.clone(),
            Admins::new(self.config.admins.iter().cloned()),
            self.config.schedules.clone(),
            self.config.heartbeat.clone(),
        )
    }

    /// The agent with `toolbox`, which also answers `/schedule`.
    pub fn agent(&self, outbound: Outbound, toolbox: Arc<dyn Toolbox>) -> Arc<Agent> {
        let toolbox: Arc<dyn Toolbox> = Arc::new(ScheduleCommands::new(toolbox, self.schedules()));
        Arc::new(
            Agent::new(
                self.storage.queue(),
                self.storage.conversations(),
                outbound,
                self.model.clone(),
                toolbox,
                Admins::new(self.config.admins.iter().cloned()),
                self.config.agent.clone(),
                TurnLimits {
                    max_tool_iterations: self.config.llm.max_tool_iterations,
                    context_chars: self.config.llm.context_chars,
                },
                self.config.queue.lease,
            )
            .with_heartbeat_ack_max_chars(self.config.heartbeat.ack_max_chars),
        )
    }
}

pub async fn open_storage(config: &Config, clock: Arc<dyn Clock>) -> Result<Storage> {
    let url = redact_url(&config.storage.url);
    let storage = Storage::connect(&config.storage, &config.queue, clock)
        .await
        .with_context(|| format!("opening storage.url = {url}"))?;
    storage
        .migrate()
        .await
        .with_context(|| format!("applying migrations to {url}"))?;
    Ok(storage)
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_never_reach_messages() {
        for (url, expected) in [
            (
                "postgres://herald:s3cret@db:5432/herald",
                "postgres://herald:***@db:5432/herald",
            ),
            ("postgres://herald@db/herald", "postgres://herald@db/herald"),
            ("postgres://u:p@h", "postgres://u:***@h"),
            ("sqlite://herald.db", "sqlite://herald.db"),
            ("sqlite::memory:", "sqlite::memory:"),
        ] {
            assert_eq!(redact_url(url), expected);
        }
    }
}
