//! Skills at scale: thousands of generated Agent Skills in a temporary
//! folder, discovered and rescanned with herald-skills' own `discover`, the
//! prompt catalog rendered as a turn renders it, one turn's preparation by
//! the real `SkillToolbox`, and a `$name` activation through `herald run`
//! whose skill body must reach the model.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use herald_core::{
    ActorId, ChannelName, ConversationId, ConversationKind, ConversationRef, TaskId, Toolbox, TurnScope,
};
use herald_skills::{CATALOG_HEADER, render_catalog};
use herald_skills::{Discovery, ProcessEnvironment, ScanLimits, SkillToolbox, SkillsConfig, discover};
use herald_store::{QueueConfig, Storage, StorageConfig};
use herald_testkit::telegram::{FakeTelegram, FakeTelegramOptions};
use herald_testkit::{FakePlatform, FakeUser, ScriptedModel};
use serde::Serialize;

use crate::gateway::one_reply;
use crate::process::{Herald, write_config};

/// What the skills benchmark measured.
#[derive(Clone, Debug, Serialize)]
pub struct SkillsResult {
    pub skills: usize,
    pub loaded: usize,
    pub generate_seconds: f64,
    /// The first scan of the folder (files just written, so in the page cache).
    pub discovery_ms: f64,
    /// A scan with nothing changed, reusing the previous one.
    pub rescan_ms: f64,
    /// A scan after one skill's `SKILL.md` changed.
    pub rescan_one_changed_ms: f64,
    /// `skills.catalog_chars`, Herald's default.
    pub catalog_budget: usize,
    /// The catalog section one turn carries at that budget.
    pub catalog_chars: usize,
    pub catalog_listed: usize,
    pub catalog_left_out: usize,
    /// How long rendering that catalog took (it runs on every turn).
    pub catalog_render_ms: f64,
    /// The catalog of every skill, without a budget.
    pub full_catalog_chars: usize,
    /// Characters per skill beyond its name and description in the full catalog.
    pub catalog_overhead_per_skill: f64,
    /// One turn's `SkillToolbox::prepare`, median of the runs.
    pub prepare_ms: f64,
    /// Prompt sections the toolbox added to one turn, in characters.
    pub prepare_section_chars: usize,
    /// The tools offered in one turn (names, descriptions, JSON schemas), in characters.
    pub tools_json_chars: usize,
    /// The end-to-end `$name` activation through `herald run`.
    pub activation: Option<Activation>,
}

/// A `$skill-name` message through Herald and the scripted model.
#[derive(Clone, Debug, Serialize)]
pub struct Activation {
    pub skill: String,
    /// The skill body's marker was in the model request.
    pub body_reached_model: bool,
    /// Herald's start to ready with this many skills.
    pub ready_ms: f64,
    /// The Telegram message to Herald's reply.
    pub reply_ms: f64,
    /// The model request of that turn, as JSON, in bytes.
    pub model_request_bytes: usize,
}

fn skill_name(index: usize) -> String {
    format!("skill-{index:05}")
}

fn marker(index: usize) -> String {
    format!("MARKER-{index:05}")
}

/// Writes `count` skills into `dir`: each a folder with a `SKILL.md` whose
/// description is 80 to 140 characters and whose body names its marker.
fn generate(dir: &Path, count: usize) -> Result<()> {
    const TOPICS: [&str; 5] = [
        "invoices and receipts",
        "release notes for a project",
        "a meeting transcript",
        "server logs with errors in them",
        "a recipe that needs scaling",
    ];
    for index in 0..count {
        let name = skill_name(index);
        let folder = dir.join(&name);
        std::fs::create_dir_all(&folder)?;
        let topic = TOPICS[index % TOPICS.len()];
        let padding = "very ".repeat(index % 12);
        let description = format!(
            "Works through {topic} the {padding}careful way, procedure {index}. Use when the user asks for procedure {index}."
        );
        let body = format!(
            "# Procedure {index}\n\nMarker: {marker}.\n\n1. Read what the user sent about {topic}.\n2. Follow procedure {index} step by step.\n3. Answer in three short paragraphs.\n",
            marker = marker(index)
        );
        std::fs::write(
            folder.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {description}\n---\n\n{body}"),
        )?;
    }
    Ok(())
}

fn limits(count: usize) -> ScanLimits {
    ScanLimits {
        max_depth: 3,
        max_skills: count,
    }
}

fn timed<T>(work: impl FnOnce() -> T) -> (T, f64) {
    let started = Instant::now();
    let value = work();
    (value, started.elapsed().as_secs_f64() * 1000.0)
}

/// The catalog as a turn renders it: every skill, in name order.
fn catalog_entries(discovery: &Discovery) -> Vec<(&str, &str)> {
    discovery
        .skills
        .values()
        .map(|skill| (skill.name.as_str(), skill.description()))
        .collect()
}

fn scope() -> TurnScope {
    let channel = ChannelName::new("telegram");
    TurnScope {
        task: TaskId(1),
        conversation: ConversationRef {
            id: ConversationId::new("telegram:42"),
            channel: channel.clone(),
            kind: ConversationKind::Direct,
            chat: "42".into(),
            thread: None,
        },
        actor: Some(ActorId::on(&channel, "42")),
        is_admin: false,
        reply_to: None,
        origin: herald_core::TurnOrigin::Person,
        files: Vec::new(),
    }
}

/// One turn's preparation by the real toolbox over these skills: its time
/// (median of `runs`), prompt section characters and tool JSON characters.
async fn prepare(dir: &Path, count: usize, runs: usize) -> Result<(f64, usize, usize)> {
    let store_dir = tempfile::tempdir()?;
    let storage = Storage::connect(
        &StorageConfig {
            url: format!("sqlite://{}", store_dir.path().join("skills.db").display()).into(),
            ..StorageConfig::default()
        },
        &QueueConfig::default(),
        Arc::new(herald_core::SystemClock),
    )
    .await?;
    storage.migrate().await?;
    let config = SkillsConfig {
        dirs: vec![dir.to_path_buf()],
        max_skills: count,
        rescan_every: Duration::ZERO,
        ..SkillsConfig::default()
    };
    let toolbox = SkillToolbox::builder(config, storage.conversations(), 120_000)
        .build()
        .await
        .context("building the skill toolbox")?;
    let scope = scope();
    let mut times = Vec::new();
    let mut sizes = (0, 0);
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let preparation = toolbox.prepare(&scope, Some("hello there")).await;
        times.push(started.elapsed());
        let sections = preparation.sections.iter().map(|s| s.text.chars().count()).sum();
        let tools = preparation
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.chars().count() + t.parameters.to_string().chars().count())
            .sum();
        sizes = (sections, tools);
    }
    storage.close().await;
    Ok((crate::stats::median_ms(&times), sizes.0, sizes.1))
}

/// Herald with these skills and a Telegram fake: a `$name` message must
/// bring the skill's body into the model request.
async fn activation(binary: &Path, dir: &Path, count: usize) -> Result<Activation> {
    let index = count * 3 / 7;
    let skill = skill_name(index);
    let model = ScriptedModel::start().await;
    let telegram = FakeTelegram::start_with(FakeTelegramOptions::unthrottled()).await;
    let work = tempfile::tempdir()?;
    let channels = format!("  telegram:\n{}", telegram.channel_yaml());
    let extra = format!(
        "access:\n  unknown: allow\nlog:\n  level: \"warn,herald=info\"\nskills:\n  dirs: [\"{}\"]\n  max_skills: {count}\n",
        dir.display()
    );
    let config = write_config(work.path(), &model.base_url(), &channels, &extra)?;
    let herald = Herald::start(binary, &config, Duration::from_secs(120)).await?;
    let ready_ms = herald.ready_after.as_secs_f64() * 1000.0;
    let user = FakeUser {
        id: "7300000001".into(),
        name: "Skill User".into(),
    };
    let result = one_reply(
        &telegram,
        &user,
        &format!("Please follow ${skill} for this."),
        "sk-act",
        Duration::from_secs(180),
    )
    .await;
    let reply = match result {
        Ok(reply) => reply,
        Err(err) => {
            let log = herald.log_tail();
            herald.stop().await;
            return Err(err.context(log));
        }
    };
    let request = model
        .requests()
        .into_iter()
        .rev()
        .find(|body| body.to_string().contains("sk-act-0000000"))
        .context("the model never saw the activation message")?;
    let text = request.to_string();
    herald.stop().await;
    Ok(Activation {
        body_reached_model: text.contains(&marker(index)),
        skill,
        ready_ms,
        reply_ms: reply.as_secs_f64() * 1000.0,
        model_request_bytes: text.len(),
    })
}

/// Runs the skills benchmark with `count` skills; `herald` enables the
/// end-to-end activation.
pub async fn run(count: usize, herald: Option<&Path>) -> Result<SkillsResult> {
    ensure!(count > 0, "--skills must be at least 1");
    let root = tempfile::tempdir()?;
    let dir: PathBuf = root.path().join("skills");
    let ((), generate_ms) = {
        let (written, ms) = timed(|| generate(&dir, count));
        (written?, ms)
    };
    let dirs = vec![dir.clone()];
    let (first, discovery_ms) = timed(|| discover(&dirs, limits(count), &ProcessEnvironment, None));
    let (_, rescan_ms) = timed(|| discover(&dirs, limits(count), &ProcessEnvironment, Some(&first)));
    let changed = dir.join(skill_name(0)).join("SKILL.md");
    let text = std::fs::read_to_string(&changed)?;
    std::fs::write(&changed, format!("{text}\n4. Say thank you.\n"))?;
    let (_, rescan_one_changed_ms) = timed(|| discover(&dirs, limits(count), &ProcessEnvironment, Some(&first)));

    let budget = SkillsConfig::default().catalog_chars;
    let entries = catalog_entries(&first);
    let (catalog, catalog_render_ms) = timed(|| render_catalog(&entries, budget));
    let full = render_catalog(&entries, usize::MAX);
    let content: usize = entries
        .iter()
        .map(|(name, description)| name.chars().count() + description.chars().count())
        .sum();
    let overhead = full.text.chars().count() - CATALOG_HEADER.chars().count() - content;

    let (prepare_ms, prepare_section_chars, tools_json_chars) = prepare(&dir, count, 3).await?;
    let activation = match herald {
        Some(binary) => Some(activation(binary, &dir, count).await?),
        None => None,
    };
    Ok(SkillsResult {
        skills: count,
        loaded: first.skills.len(),
        generate_seconds: generate_ms / 1000.0,
        discovery_ms,
        rescan_ms,
        rescan_one_changed_ms,
        catalog_budget: budget,
        catalog_chars: catalog.text.chars().count(),
        catalog_listed: catalog.listed,
        catalog_left_out: catalog.left_out,
        catalog_render_ms,
        full_catalog_chars: full.text.chars().count(),
        catalog_overhead_per_skill: overhead as f64 / entries.len().max(1) as f64,
        prepare_ms,
        prepare_section_chars,
        tools_json_chars,
        activation,
    })
}
