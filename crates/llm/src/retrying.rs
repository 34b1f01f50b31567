//! [`Retrying`]: Herald's one retry policy for model calls, as an adaptor
//! around any [`ChatModel`] (the shape of teloxide's `Throttle<Bot>`).
//!
//! Transient failures wait the exponential backoff; a rate limit with a
//! server-given wait waits that long (capped at the backoff's maximum delay);
//! fatal errors return at once. After a timeout it waits at least as long
//! as the request had: a local server keeps generating the answer Herald
//! gave up on, and a retry sent at once would queue behind it and time out
//! too. Waiting uses `tokio::time::sleep`, so tests run it on paused time.

use async_trait::async_trait;
use herald_core::{Backoff, ChatModel, ChatRequest, ChatResponse, LlmError, RetryClass};
use tracing::warn;

/// Retries the inner model according to each error's [`RetryClass`].
#[derive(Debug)]
pub struct Retrying<M> {
    inner: M,
    backoff: Backoff,
    wait_after_timeout: std::time::Duration,
}

impl<M: ChatModel> Retrying<M> {
    /// `backoff.max_attempts` counts every attempt, the first included.
    pub fn new(inner: M, backoff: Backoff) -> Self {
        Self {
            inner,
            backoff,
            wait_after_timeout: std::time::Duration::ZERO,
        }
    }

    /// The least wait after a timed-out attempt (the request timeout).
    pub fn with_wait_after_timeout(mut self, wait: std::time::Duration) -> Self {
        self.wait_after_timeout = wait;
        self
    }

    pub fn inner(&self) -> &M {
        &self.inner
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for Retrying<M> {
    async fn complete(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.complete_streaming(request, &herald_core::NoText).await
    }

    async fn complete_streaming(
        &self,
        request: ChatRequest,
        sink: &dyn herald_core::TextSink,
    ) -> Result<ChatResponse, LlmError> {
        let mut attempt = 1;
        loop {
            let started = std::time::Instant::now();
            let answer = self.inner.complete_streaming(request.clone(), sink).await;
            record_attempt(&answer, started.elapsed());
            let error = match answer {
                Ok(response) => return Ok(response),
                Err(error) => error,
            };
            let wait = match error.retry_class() {
                RetryClass::Fatal => None,
                RetryClass::Transient if matches!(error, LlmError::Timeout(_)) => self
                    .backoff
                    .delay_after(attempt)
                    .map(|delay| delay.max(self.wait_after_timeout)),
                RetryClass::Transient => self.backoff.delay_after(attempt),
                RetryClass::RetryAfter(asked) => self
                    .backoff
                    .delay_after(attempt)
                    .map(|_| asked.min(self.backoff.max_delay)),
            };
            let Some(wait) = wait else {
                return Err(error);
            };
            warn!(
                error = %error,
                attempt,
                wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                "model call failed, retrying"
            );
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }
}

/// Latency of every attempt, tokens of every answer, errors by retry class.
fn record_attempt(answer: &Result<ChatResponse, LlmError>, took: std::time::Duration) {
    let outcome = match answer {
        Ok(_) => "ok",
        Err(error) => match error.retry_class() {
            RetryClass::Fatal => "fatal",
            RetryClass::Transient => "transient",
            RetryClass::RetryAfter(_) => "rate_limited",
        },
    };
    metrics::histogram!("herald_model_request_duration_seconds", "outcome" => outcome).record(took.as_secs_f64());
    metrics::counter!("herald_model_requests_total", "outcome" => outcome).increment(1);
    if let Ok(ChatResponse { usage: Some(usage), .. }) = answer {
        metrics::counter!("herald_model_tokens_total", "kind" => "prompt").increment(u64::from(usage.prompt_tokens));
        metrics::counter!("herald_model_tokens_total", "kind" => "completion")
            .increment(u64::from(usage.completion_tokens));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;

    /// Answers from a script and notes when each attempt came.
    struct Scripted {
        answers: Mutex<VecDeque<Result<ChatResponse, LlmError>>>,
        attempts: Mutex<Vec<Instant>>,
    }

    impl Scripted {
        fn new(answers: Vec<Result<ChatResponse, LlmError>>) -> Self {
            Self {
                answers: Mutex::new(answers.into()),
                attempts: Mutex::new(Vec::new()),
            }
        }
    }

    #[async_trait]
    impl ChatModel for Scripted {
        async fn complete(&self, _request: ChatRequest) -> Result<ChatResponse, LlmError> {
            self.attempts.lock().unwrap().push(Instant::now());
            self.answers
                .lock()
                .unwrap()
                .pop_front()
                .expect("no more scripted answers")
        }
    }

    fn ok() -> Result<ChatResponse, LlmError> {
        Ok(ChatResponse {
            content: Some("hi".into()),
            tool_calls: vec![],
            finish_reason: Some("stop".into()),
            usage: None,
        })
    }

    fn server() -> Result<ChatResponse, LlmError> {
        Err(LlmError::Server {
            status: 500,
            message: "boom".into(),
        })
    }

    fn limited(seconds: u64) -> Result<ChatResponse, LlmError> {
        Err(LlmError::RateLimited {
            retry_after: Some(Duration::from_secs(seconds)),
        })
    }

    fn rejected() -> Result<ChatResponse, LlmError> {
        Err(LlmError::Rejected {
            status: 400,
            message: "bad".into(),
        })
    }

    fn backoff(max_attempts: u32) -> Backoff {
        Backoff {
            base: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            max_attempts,
        }
    }

    fn request() -> ChatRequest {
        ChatRequest::new(vec![herald_core::ChatMessage::user("hi")], vec![])
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_timeout_the_retry_waits_as_long_as_the_request_had() {
        let model = Retrying::new(
            Scripted::new(vec![Err(LlmError::Timeout(Duration::from_secs(60))), ok()]),
            backoff(4),
        )
        .with_wait_after_timeout(Duration::from_secs(60));
        assert!(model.complete(request()).await.is_ok());
        let attempts = model.inner().attempts.lock().unwrap().clone();
        assert_eq!((attempts[1] - attempts[0]).as_secs(), 60);
    }

    /// Runs a script and returns whether it succeeded and the gaps between
    /// attempts in whole seconds of tokio's paused clock.
    async fn run(answers: Vec<Result<ChatResponse, LlmError>>, max_attempts: u32) -> (bool, Vec<u64>) {
        let model = Retrying::new(Scripted::new(answers), backoff(max_attempts));
        let outcome = model.complete(request()).await;
        let attempts = model.inner().attempts.lock().unwrap().clone();
        let gaps = attempts.windows(2).map(|w| (w[1] - w[0]).as_secs()).collect();
        (outcome.is_ok(), gaps)
    }

    #[tokio::test(start_paused = true)]
    async fn waits_as_each_error_asks() {
        for (answers, max_attempts, succeeded, gaps) in [
            (vec![ok()], 4, true, vec![]),
            (vec![server(), server(), ok()], 4, true, vec![1, 2]),
            (vec![server(), server(), server(), server()], 4, false, vec![1, 2, 4]),
            (vec![server()], 1, false, vec![]),
            (vec![limited(7), ok()], 4, true, vec![7]),
            (vec![limited(600), ok()], 4, true, vec![30]),
            (
                vec![Err(LlmError::RateLimited { retry_after: None }), ok()],
                4,
                true,
                vec![1],
            ),
            (
                vec![Err(LlmError::Timeout(Duration::from_secs(60))), ok()],
                4,
                true,
                vec![1],
            ),
            (vec![Err(LlmError::Connect("refused".into())), ok()], 4, true, vec![1]),
            (vec![rejected()], 4, false, vec![]),
            (vec![Err(LlmError::BadResponse("junk".into()))], 4, false, vec![]),
            (vec![server(), rejected()], 4, false, vec![1]),
        ] {
            let label = format!("{answers:?}");
            assert_eq!(run(answers, max_attempts).await, (succeeded, gaps), "{label}");
        }
    }
}
