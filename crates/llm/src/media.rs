//! What the model is given of a message's files: whether it is sent images
//! (`llm.vision`), and speech to text for voice notes over an
//! OpenAI-compatible `POST /audio/transcriptions` (`llm.transcription`).

use std::time::Duration;

use async_trait::async_trait;
use herald_core::{Transcriber, TranscriptionError};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer};

/// `llm.vision`: `auto` (by the model's name), `true` or `false`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Vision {
    #[default]
    Auto,
    On,
    Off,
}

impl<'de> Deserialize<'de> for Vision {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Switch(bool),
            Word(String),
        }
        match Written::deserialize(deserializer)? {
            Written::Switch(true) => Ok(Vision::On),
            Written::Switch(false) => Ok(Vision::Off),
            Written::Word(word) if word == "auto" => Ok(Vision::Auto),
            Written::Word(word) => Err(serde::de::Error::custom(format!(
                "invalid vision `{word}`: expected auto, true or false"
            ))),
        }
    }
}

/// Parts of model names that accept images: OpenAI's GPT-4o/4.1/5 and o
/// series, Claude, Gemini, and the common open vision models.
const VISION_MODELS: &[&str] = &[
    "gpt-4o",
    "gpt-4.1",
    "gpt-4-turbo",
    "gpt-4-vision",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "claude",
    "gemini",
    "gemma3",
    "gemma-3",
    "llava",
    "bakllava",
    "vision",
    "-vl",
    "pixtral",
    "minicpm-v",
    "moondream",
    "mistral-small3.1",
    "mistral-small-3.1",
    "llama4",
    "llama-4",
    "qwen2.5vl",
    "qwen3-vl",
    "granite3.2-vision",
    "grok-2-vision",
];

impl Vision {
    /// Whether `model` is sent images under this setting.
    pub fn enabled_for(self, model: &str) -> bool {
        match self {
            Vision::On => true,
            Vision::Off => false,
            Vision::Auto => {
                let model = model.to_ascii_lowercase();
                let name = model.rsplit('/').next().unwrap_or(&model);
                VISION_MODELS.iter().any(|known| name.contains(known))
            }
        }
    }
}

/// `llm.transcription`: where voice notes are turned into text.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranscriptionConfig {
    /// An OpenAI-compatible API, including `/v1`.
    pub base_url: String,
    /// `whisper-1`, `gpt-4o-mini-transcribe`, or a local server's model.
    pub model: String,
    /// Sent as `Authorization: Bearer`; empty: `llm.api_key` is used.
    #[serde(default = "empty_secret")]
    pub api_key: SecretString,
    /// One request, upload and answer.
    #[serde(default = "default_timeout", with = "herald_core::duration::serde")]
    pub timeout: Duration,
}

fn empty_secret() -> SecretString {
    SecretString::from("")
}

fn default_timeout() -> Duration {
    Duration::from_secs(60)
}

/// Speech to text over `POST {base_url}/audio/transcriptions`.
pub struct OpenAiTranscriber {
    client: reqwest::Client,
    url: String,
    model: String,
    api_key: SecretString,
}

impl OpenAiTranscriber {
    /// `llm` gives the trust and the fallback key (`llm.api_key`, used
    /// when the section names none).
    pub fn new(config: &TranscriptionConfig, llm: &crate::LlmConfig) -> Result<Self, String> {
        let fallback_key = &llm.api_key;
        let client = llm
            .tls
            .http()
            .timeout(config.timeout)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|err| format!("cannot build the transcription client: {err}"))?;
        let api_key = if config.api_key.expose_secret().is_empty() {
            fallback_key.clone()
        } else {
            config.api_key.clone()
        };
        Ok(Self {
            client,
            url: format!("{}/audio/transcriptions", config.base_url.trim_end_matches('/')),
            model: config.model.clone(),
            api_key,
        })
    }
}

/// A `multipart/form-data` body: the model, a JSON answer asked for, and the
/// file.
fn multipart(boundary: &str, model: &str, name: &str, content_type: &str, bytes: &[u8]) -> Vec<u8> {
    let name: String = name
        .chars()
        .filter(|c| !matches!(c, '"' | '\\' | '\r' | '\n'))
        .collect();
    let mut body = Vec::with_capacity(bytes.len() + 512);
    for (field, value) in [("model", model), ("response_format", "json")] {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"\r\n\r\n{value}\r\n").as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\
             Content-Type: {content_type}\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

#[derive(Deserialize)]
struct Transcript {
    text: String,
}

#[async_trait]
impl Transcriber for OpenAiTranscriber {
    async fn transcribe(&self, name: &str, content_type: &str, bytes: Vec<u8>) -> Result<String, TranscriptionError> {
        let boundary = format!("herald-{:016x}", rand_boundary(&bytes));
        let body = multipart(&boundary, &self.model, name, content_type, &bytes);
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", format!("multipart/form-data; boundary={boundary}"))
            .body(body);
        if !self.api_key.expose_secret().is_empty() {
            request = request.bearer_auth(self.api_key.expose_secret());
        }
        let response = request.send().await.map_err(|err| {
            if err.is_timeout() {
                TranscriptionError::Timeout
            } else {
                TranscriptionError::Connect(err.without_url().to_string())
            }
        })?;
        let status = response.status();
        let text = response.text().await.map_err(|err| {
            if err.is_timeout() {
                TranscriptionError::Timeout
            } else {
                TranscriptionError::Connect(err.without_url().to_string())
            }
        })?;
        if !status.is_success() {
            let message: String = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.pointer("/error/message").and_then(|m| m.as_str()).map(str::to_owned))
                .unwrap_or_else(|| text.chars().take(200).collect());
            return Err(TranscriptionError::Server {
                status: status.as_u16(),
                message,
            });
        }
        serde_json::from_str::<Transcript>(&text)
            .map(|t| t.text)
            .map_err(|err| TranscriptionError::BadResponse(err.to_string()))
    }
}

/// A boundary that does not occur in the file: derived from its bytes'
/// length and a sample, then checked.
fn rand_boundary(bytes: &[u8]) -> u64 {
    let mut seed = bytes.len() as u64 ^ 0x9e37_79b9_7f4a_7c15;
    for byte in bytes.iter().step_by((bytes.len() / 64).max(1)) {
        seed = seed.rotate_left(5) ^ u64::from(*byte);
    }
    while bytes
        .windows(23)
        .any(|window| window == format!("herald-{seed:016x}").as_bytes())
    {
        seed = seed.wrapping_add(1);
    }
    seed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vision_is_on_for_models_known_to_see() {
        for (model, seen) in [
            ("gpt-4o-mini", true),
            ("openai/gpt-4.1", true),
            ("claude-sonnet-4", true),
            ("llava:13b", true),
            ("qwen2.5-vl-7b-instruct", true),
            ("gemma3:4b", true),
            ("llama3.1:8b", false),
            ("gpt-3.5-turbo", false),
            ("mistral-7b-instruct", false),
        ] {
            assert_eq!(Vision::Auto.enabled_for(model), seen, "{model}");
        }
        assert!(Vision::On.enabled_for("llama3.1:8b"));
        assert!(!Vision::Off.enabled_for("gpt-4o"));
    }

    #[test]
    fn vision_reads_auto_true_and_false() {
        for (yaml, expected) in [("auto", Vision::Auto), ("true", Vision::On), ("false", Vision::Off)] {
            assert_eq!(serde_yaml::from_str::<Vision>(yaml).unwrap(), expected);
        }
        assert!(serde_yaml::from_str::<Vision>("sometimes").is_err());
    }
}
