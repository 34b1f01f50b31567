//! Every call Herald makes to Slack's Web API (`auth.test`,
//! `apps.connections.open`, `chat.postMessage`, `users.info`, and the
//! external upload: `files.getUploadURLExternal`, the bytes to its URL,
//! `files.completeUploadExternal`), and the outbound sender.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use herald_core::{ChannelError, ChannelName, ConversationRef, OutboundFile};
use herald_net::ClientTls;
use secrecy::{ExposeSecret, SecretString};
use slack_morphism::api::{
    SlackApiAppsConnectionOpenRequest, SlackApiFilesComplete, SlackApiFilesCompleteUploadExternalRequest,
    SlackApiFilesGetUploadUrlExternalRequest, SlackApiUsersInfoRequest,
};
use slack_morphism::errors::SlackClientError;
use slack_morphism::{SlackApiToken, SlackApiTokenValue, SlackChannelId, SlackClient, SlackTs, SlackUserId};
use tokio::task::JoinHandle;
use tracing::debug;

use super::config::SlackConfig;
use super::http::SlackHttp;
use super::payload::{self, BotIdentity};
use super::{CHANNEL, render};
use crate::outbound::{Chunk, FileUploads, PlatformSender};

/// slack-morphism's client on Herald's reqwest (see [`super::http`]).
pub(super) type Client = SlackClient<SlackHttp>;

pub(super) fn token(secret: &SecretString) -> SlackApiToken {
    SlackApiToken::new(SlackApiTokenValue::new(secret.expose_secret().to_owned()))
}

/// Slack's answer as Herald's retry classes. The error code is kept; bodies
/// are not, so no message text ends up in a log.
pub fn classify(err: SlackClientError) -> ChannelError {
    match err {
        SlackClientError::RateLimitError(limit) => ChannelError::RateLimited {
            retry_after: limit.retry_after.unwrap_or(Duration::from_secs(1)),
        },
        SlackClientError::ApiError(api) => match api.code.as_str() {
            "ratelimited" => ChannelError::RateLimited {
                retry_after: Duration::from_secs(1),
            },
            "internal_error" | "fatal_error" | "service_unavailable" | "request_timeout" => {
                ChannelError::Transient(format!("slack answered {}", api.code))
            }
            code => ChannelError::Fatal(format!("slack refused the request: {code}")),
        },
        SlackClientError::HttpError(http) if http.status_code.is_server_error() => {
            ChannelError::Transient(format!("slack answered HTTP {}", http.status_code))
        }
        SlackClientError::HttpError(http) => ChannelError::Fatal(format!("slack answered HTTP {}", http.status_code)),
        // A response that does not decode may hide a message that was posted;
        // sending it again could post it twice.
        SlackClientError::ProtocolError(protocol) => {
            ChannelError::Fatal(format!("slack's answer did not decode: {}", protocol.json_error))
        }
        other => ChannelError::Transient(format!("slack request failed: {other}")),
    }
}

/// The Web API with the bot token.
pub struct SlackApi {
    pub(super) client: Arc<Client>,
    /// Herald's one trust, for the Web API, Socket Mode and uploads.
    pub(super) tls: ClientTls,
    bot_token: SlackApiToken,
    /// Display names by user id; a failed lookup is remembered as the id.
    names: Mutex<HashMap<String, String>>,
    /// Users whose names are being looked up now.
    looking_up: Mutex<std::collections::HashSet<String>>,
}

/// `users.info` calls at once while names are learned.
const NAME_LOOKUPS: usize = 8;

const MAX_CACHED_NAMES: usize = 10_000;

impl SlackApi {
    pub fn new(config: &SlackConfig, tls: &ClientTls) -> Result<Self, ChannelError> {
        let connector = SlackHttp::new(&config.api_url, tls)
            .map_err(|err| ChannelError::Fatal(format!("could not build the Slack HTTP client: {err}")))?;
        Ok(Self {
            client: Arc::new(SlackClient::new(connector)),
            tls: tls.clone(),
            bot_token: token(&config.bot_token),
            names: Mutex::new(HashMap::new()),
            looking_up: Mutex::new(std::collections::HashSet::new()),
        })
    }

    /// The name people see for `user` when it is known already.
    pub fn known_name(&self, user: &str) -> Option<String> {
        self.names.lock().expect("names lock").get(user).cloned()
    }

    /// Looks the names of `users` up in the background (those not known and
    /// not being looked up already), a few at a time, for the messages that
    /// come after; the handle ends when they are all known. `None`: nothing
    /// to look up.
    pub fn learn_names(self: &Arc<Self>, users: impl IntoIterator<Item = String>) -> Option<JoinHandle<()>> {
        let unknown: Vec<String> = {
            let names = self.names.lock().expect("names lock");
            let mut looking_up = self.looking_up.lock().expect("lookups lock");
            users
                .into_iter()
                .filter(|user| !names.contains_key(user) && looking_up.insert(user.clone()))
                .collect()
        };
        if unknown.is_empty() {
            return None;
        }
        let api = Arc::clone(self);
        Some(tokio::spawn(async move {
            for some in unknown.chunks(NAME_LOOKUPS) {
                futures::future::join_all(some.iter().map(|user| api.display_name(user))).await;
                let mut looking_up = api.looking_up.lock().expect("lookups lock");
                for user in some {
                    looking_up.remove(user);
                }
            }
        }))
    }

    /// `auth.test`: who the bot token belongs to.
    pub async fn identity(&self) -> Result<(BotIdentity, String), ChannelError> {
        let answer = self
            .client
            .open_session(&self.bot_token)
            .auth_test()
            .await
            .map_err(classify)?;
        let name = answer.user.clone().unwrap_or_else(|| answer.user_id.0.clone());
        let description = format!("{name} ({}) in {}", answer.user_id.0, answer.team);
        let identity = BotIdentity {
            user_id: answer.user_id.0,
            bot_id: answer.bot_id.map(|b| b.0),
        };
        Ok((identity, description))
    }

    /// `apps.connections.open`: the URL of a new Socket Mode connection
    /// (it carries a one-time ticket, so it is not logged).
    pub async fn open_connection(&self, app_token: &SlackApiToken) -> Result<String, ChannelError> {
        self.client
            .open_session(app_token)
            .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
            .await
            .map(|answer| answer.url.0.into())
            .map_err(classify)
    }

    /// The name people see for `user`, from `users.info` (scope `users:read`),
    /// or the user id when it cannot be read.
    pub async fn display_name(&self, user: &str) -> String {
        if let Some(name) = self.names.lock().expect("names lock").get(user) {
            return name.clone();
        }
        let request = SlackApiUsersInfoRequest::new(SlackUserId::new(user.to_owned()));
        let session = self.client.open_session(&self.bot_token);
        let lookup = session.users_info(&request);
        let name = match tokio::time::timeout(Duration::from_secs(1), lookup).await {
            Ok(Ok(answer)) => {
                let profile = answer.user.profile.as_ref();
                [
                    profile.and_then(|p| p.display_name.clone()),
                    profile.and_then(|p| p.real_name.clone()),
                    answer.user.real_name.clone(),
                    answer.user.name.clone(),
                ]
                .into_iter()
                .flatten()
                .find(|name| !name.trim().is_empty())
                .unwrap_or_else(|| user.to_owned())
            }
            Ok(Err(err)) => {
                debug!(error = %classify(err), user, "users.info failed; using the user id");
                user.to_owned()
            }
            Err(_) => user.to_owned(),
        };
        let mut names = self.names.lock().expect("names lock");
        if names.len() >= MAX_CACHED_NAMES {
            names.clear();
        }
        names.insert(user.to_owned(), name.clone());
        name
    }
}

/// One chunk, one `chat.postMessage`; files by Slack's external upload.
pub struct SlackSender {
    api: Arc<SlackApi>,
    format: crate::markdown::Format,
    /// Posts file bytes to the upload URLs Slack hands out; they take no
    /// token, and none is sent.
    uploads: reqwest::Client,
}

impl SlackSender {
    pub fn new(api: Arc<SlackApi>, format: crate::markdown::Format) -> Self {
        let uploads = api
            .tls
            .http()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(120))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Self { api, format, uploads }
    }

    /// Step 2 of an upload: the bytes to the URL `files.getUploadURLExternal` gave.
    async fn upload_bytes(&self, url: &url::Url, file: &OutboundFile) -> Result<(), ChannelError> {
        let response = self
            .uploads
            .post(url.as_str())
            .header(reqwest::header::CONTENT_TYPE, file.content_type.as_str())
            .body(file.bytes.0.to_vec())
            .send()
            .await
            .map_err(|err| {
                ChannelError::Transient(format!("uploading {} to slack: {}", file.name, err.without_url()))
            })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let problem = format!("slack's upload URL answered HTTP {} for {}", status.as_u16(), file.name);
        Err(if status.is_server_error() || status.as_u16() == 429 {
            ChannelError::Transient(problem)
        } else {
            ChannelError::Fatal(problem)
        })
    }
}

/// The largest file Slack takes (1 GB).
pub const MAX_UPLOAD_BYTES: u64 = 1024 * 1024 * 1024;

#[async_trait]
impl PlatformSender for SlackSender {
    fn channel(&self) -> ChannelName {
        ChannelName::new(CHANNEL)
    }

    fn chunks(&self, text: &str) -> Vec<Chunk> {
        render::chunks(text, self.format)
    }

    /// Slack has no reply-to; the conversation's thread (`thread_ts`) is
    /// where a reply belongs, and every chunk goes there.
    async fn send_chunk(
        &self,
        conversation: &ConversationRef,
        chunk: &Chunk,
        _reply_to: Option<&str>,
        _key: Option<&str>,
    ) -> Result<String, ChannelError> {
        let request = render::post_message(conversation, &chunk.text);
        let answer = self
            .api
            .client
            .open_session(&self.api.bot_token)
            .chat_post_message(&request)
            .await
            .map_err(classify)?;
        Ok(payload::message_id(&answer.channel.0, &answer.ts.0))
    }

    fn edits(&self) -> bool {
        true
    }

    /// `chat.update` is Tier 3: "50+ per minute" per workspace.
    fn edit_window(&self) -> Option<herald_core::rate::Window> {
        Some(herald_core::rate::Window {
            count: 50,
            per: Duration::from_secs(60),
        })
    }

    /// `chat.update` of the bot's message `<channel>:<ts>`.
    async fn edit_chunk(&self, _: &ConversationRef, message_id: &str, chunk: &Chunk) -> Result<(), ChannelError> {
        let request = render::update_message(message_id, &chunk.text)?;
        self.api
            .client
            .open_session(&self.api.bot_token)
            .chat_update(&request)
            .await
            .map_err(classify)?;
        Ok(())
    }

    /// The text goes first with `chat.postMessage`; the files follow, shared
    /// in the conversation's thread by one `files.completeUploadExternal`.
    fn uploads(&self) -> Option<FileUploads> {
        Some(FileUploads {
            max_file_bytes: MAX_UPLOAD_BYTES,
            max_files_per_send: 10,
            with_text: false,
        })
    }

    async fn send_files(
        &self,
        conversation: &ConversationRef,
        text: Option<&str>,
        files: &[OutboundFile],
        _reply_to: Option<&str>,
        _key: Option<&str>,
    ) -> Result<String, ChannelError> {
        let session = self.api.client.open_session(&self.api.bot_token);
        let mut shared = Vec::with_capacity(files.len());
        for file in files {
            let announced = session
                .get_upload_url_external(&SlackApiFilesGetUploadUrlExternalRequest::new(
                    file.name.clone(),
                    file.bytes.0.len(),
                ))
                .await
                .map_err(classify)?;
            self.upload_bytes(&announced.upload_url.0, file).await?;
            shared.push(SlackApiFilesComplete::new(announced.file_id).with_title(file.name.clone()));
        }
        let first = shared.first().map(|file| file.id.0.clone()).unwrap_or_default();
        let request = SlackApiFilesCompleteUploadExternalRequest::new(shared)
            .with_channel_id(SlackChannelId::new(conversation.chat.clone()))
            .opt_thread_ts(conversation.thread.clone().map(SlackTs::new))
            .opt_initial_comment(text.map(str::to_owned));
        session
            .files_complete_upload_external(&request)
            .await
            .map_err(classify)?;
        Ok(format!("{}:file:{first}", conversation.chat))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use slack_morphism::errors::{SlackClientApiError, SlackClientHttpError, SlackRateLimitError};

    use super::*;

    #[test]
    fn slack_errors_map_to_retry_classes() {
        let api = |code: &str| SlackClientError::ApiError(SlackClientApiError::new(code.into()));
        let cases = [
            (
                SlackClientError::RateLimitError(SlackRateLimitError::new().with_retry_after(Duration::from_secs(7))),
                "RateLimited(7s)",
            ),
            (
                SlackClientError::RateLimitError(SlackRateLimitError::new()),
                "RateLimited(1s)",
            ),
            (api("ratelimited"), "RateLimited(1s)"),
            (api("invalid_auth"), "Fatal"),
            (api("channel_not_found"), "Fatal"),
            (api("internal_error"), "Transient"),
            (
                SlackClientError::HttpError(SlackClientHttpError::new(StatusCode::BAD_GATEWAY)),
                "Transient",
            ),
            (
                SlackClientError::HttpError(SlackClientHttpError::new(StatusCode::NOT_FOUND)),
                "Fatal",
            ),
        ];
        for (err, expected) in cases {
            let got = match classify(err) {
                ChannelError::RateLimited { retry_after } => format!("RateLimited({}s)", retry_after.as_secs()),
                ChannelError::Transient(_) => "Transient".into(),
                ChannelError::Fatal(_) => "Fatal".into(),
            };
            assert_eq!(got, expected);
        }
    }
}
