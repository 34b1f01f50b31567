//! The composition root: opens storage, builds the model client and the
//! toolbox, and assembles an [`Agent`] for whichever channels this process
//! serves.

use std::sync::Arc;

use anyhow::{Context, Result};
use herald_agent::{Agent, AgentParts, AttachmentReader, ContextWindow, TurnLimits};
use herald_core::{Admins, ChatModel, Clock, Outbound, SystemClock, Toolbox};
use herald_mcp::McpClient;
use herald_schedule::{Scheduler, Schedules};
use herald_skills::SkillToolbox;
use herald_store::Storage;

use crate::config::Config;
use herald_schedule::{ScheduleCommands, schedule_skills};

pub struct App {
    pub config: Config,
    pub storage: Storage,
    pub model: Arc<dyn ChatModel>,
    pub clock: Arc<dyn Clock>,
    /// Per-turn limits, with the model's context window as found at start.
    pub limits: TurnLimits,
    /// The configured MCP servers, started when first needed and shared by
    /// every toolbox of the process.
    pub mcp: Arc<McpClient>,
}

/// rustls needs one process-wide crypto provider; the tree could bring two.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl App {
    /// Opens storage (applying migrations), builds the model client and
    /// finds the model's context window (configured, or asked from the
    /// server; a server that is down gets the default, corrected later).
    pub async fn open(config: Config) -> Result<Self> {
        install_crypto_provider();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let storage = open_storage(&config, clock.clone()).await?;
        Self::with_storage(config, storage, clock).await
    }

    /// [`App::open`] with storage already open.
    pub async fn with_storage(config: Config, storage: Storage, clock: Arc<dyn Clock>) -> Result<Self> {
        let model = herald_llm::model_from_config(&config.llm)
            .with_context(|| format!("setting up the model client for llm.base_url = {}", config.llm.base_url))?;
        let window = herald_llm::context_window(&config.llm).await;
        tracing::info!(tokens = window.tokens, source = %window.source, "model context window");
        let limits = TurnLimits {
            max_tool_iterations: config.llm.max_tool_iterations,
            window: Arc::new(ContextWindow::new(window.tokens)),
            answer_tokens: config.llm.max_tokens,
            max_prompt_chars: config.llm.context_chars,
        };
        let mcp = Arc::new(McpClient::new(&config.mcp, &config.client_tls));
        Ok(Self {
            config,
            storage,
            model,
            clock,
            limits,
            mcp,
        })
    }

    /// Warns (once, in the background) when the model endpoint does not
    /// answer: messages are queued anyway and answered by the queue's
    /// retries once it is back.
    pub fn warn_if_model_is_down(&self, print: fn(&str)) {
        let llm = self.config.llm.clone();
        tokio::spawn(async move {
            if let Err(err) = herald_llm::list_models(&llm).await {
                print(&format!(
                    "the model is not answering ({err}); messages are queued and answered once it is back"
                ));
            }
        });
    }

    /// The skill registry for this process, sending through `outbound`.
    pub async fn skills(&self, outbound: Outbound) -> Result<Arc<SkillToolbox>> {
        let mut builder = SkillToolbox::builder(
            self.config.skills.clone(),
            self.storage.conversations(),
            self.limits.prompt_chars(),
        );
        if !self.mcp.is_empty() {
            builder = builder.mcp(self.mcp.clone());
        }
        let toolbox = builder
            .outbound(outbound)
            .admins(Admins::new(self.config.admins.iter().cloned()))
            .clock(self.clock.clone())
            .files(self.storage.files())
            .skills(schedule_skills(self.schedules(), self.storage.conversations()))
            .build()
            .await
            .context("loading skills")?;
        Ok(Arc::new(toolbox))
    }

    /// The tools an admin's turn is offered, as the model will see them
    /// (for `herald doctor`'s check that the server accepts them).
    pub async fn offered_tools(&self) -> Result<Vec<herald_core::ToolSpec>> {
        let toolbox = self.skills(Outbound::new()).await?;
        let channel = herald_core::ChannelName::new("doctor");
        let scope = herald_core::TurnScope {
            task: herald_core::TaskId(0),
            conversation: herald_core::ConversationRef {
                id: herald_core::ConversationId::new("doctor:check"),
                channel,
                kind: herald_core::ConversationKind::Direct,
                chat: String::new(),
                thread: None,
            },
            actor: None,
            is_admin: true,
            reply_to: None,
            origin: herald_core::TurnOrigin::Person,
            files: Vec::new(),
        };
        Ok(toolbox.prepare(&scope, None).await.tools)
    }

    /// Stops every MCP server this process started.
    pub async fn close(&self) {
        self.mcp.shutdown().await;
        self.storage.close().await;
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

    /// The agent with `toolbox`, which also answers `/schedule`, fetching
    /// messages' waiting files with `fetcher`.
    pub fn agent(
        &self,
        outbound: Outbound,
        toolbox: Arc<dyn Toolbox>,
        fetcher: Option<Arc<dyn herald_core::AttachmentFetcher>>,
    ) -> Arc<Agent> {
        let toolbox: Arc<dyn Toolbox> = Arc::new(ScheduleCommands::new(toolbox, self.schedules()));
        Arc::new(Agent::new(AgentParts {
            queue: self.storage.queue(),
            conversations: self.storage.conversations(),
            outbound,
            model: self.model.clone(),
            toolbox,
            admins: Admins::new(self.config.admins.iter().cloned()),
            config: self.config.agent.clone(),
            limits: self.limits.clone(),
            lease: self.config.queue.lease,
            heartbeat_ack_max_chars: self.config.heartbeat.ack_max_chars,
            stream_replies: self.config.llm.stream,
            attachments: Some(self.attachment_reader()),
            fetcher,
        }))
    }
}

impl App {
    /// What turns a message's stored files into its prompt: images when the
    /// model sees them (`llm.vision`), transcripts when `llm.transcription`
    /// is set.
    pub fn attachment_reader(&self) -> Arc<AttachmentReader> {
        let llm = &self.config.llm;
        let transcriber =
            llm.transcription
                .as_ref()
                .and_then(|config| match herald_llm::OpenAiTranscriber::new(config, llm) {
                    Ok(transcriber) => Some(Arc::new(transcriber) as Arc<dyn herald_core::Transcriber>),
                    Err(err) => {
                        tracing::warn!(error = %err, "voice notes will not be transcribed");
                        None
                    }
                });
        Arc::new(AttachmentReader {
            files: self.storage.files(),
            vision: llm.vision.enabled_for(&llm.model),
            transcriber,
            config: self.config.agent.attachments.clone(),
        })
    }

    /// Deletes stored files not received again within
    /// `channels.attachments.retention`, every ten minutes until `stop`.
    pub fn prune_files(&self, stop: tokio_util::sync::CancellationToken) -> tokio::task::JoinHandle<()> {
        let files = self.storage.files();
        let clock = self.clock.clone();
        let retention = self.config.channels.attachments.retention;
        tokio::spawn(async move {
            let mut every = tokio::time::interval(std::time::Duration::from_secs(600));
            loop {
                tokio::select! {
                    _ = every.tick() => {}
                    () = stop.cancelled() => return,
                }
                let Ok(age) = chrono::Duration::from_std(retention) else {
                    return;
                };
                match files.prune_unused(clock.now() - age).await {
                    Ok(0) => {}
                    Ok(count) => tracing::info!(count, "pruned stored attachments past their retention"),
                    Err(err) => tracing::warn!(error = %err, "pruning stored attachments failed; trying again later"),
                }
            }
        })
    }
}

pub async fn open_storage(config: &Config, clock: Arc<dyn Clock>) -> Result<Storage> {
    let url = &config.storage.url;
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
    use herald_core::redact::SecretUrl;

    #[test]
    fn passwords_never_reach_messages() {
        for (url, expected) in [
            (
                "postgres://herald:s3cret@db:5432/herald",
                "postgres://herald:***@db:5432/herald",
            ),
            ("postgres://herald@db/herald", "postgres://herald@db/herald"),
            ("postgres://u:p@h", "postgres://u:***@h"),
            (
                "postgres://db/herald?user=herald&password=s3cret",
                "postgres://db/herald?user=herald&password=***",
            ),
            ("sqlite://herald.db", "sqlite://herald.db"),
            ("sqlite::memory:", "sqlite::memory:"),
        ] {
            assert_eq!(SecretUrl::new(url).to_string(), expected);
        }
    }
}
