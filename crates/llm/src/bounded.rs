//! [`Bounded`]: at most `llm.max_concurrency` requests in flight to the
//! model endpoint, however many turns want one.
//!
//! The bound sits under [`crate::Retrying`], around each attempt: a turn
//! waiting out a backoff does not hold a place another turn could use. A
//! turn waits for a place in arrival order (tokio's semaphore is fair), and
//! the wait is measured (`herald_model_wait_seconds`), so an operator sees
//! when the endpoint, not Herald, is the limit.

use std::sync::Arc;

use async_trait::async_trait;
use herald_core::{ChatModel, ChatRequest, ChatResponse, LlmError};
use tokio::sync::Semaphore;

/// Lets at most `limit` requests reach the inner model at once.
#[derive(Debug)]
pub struct Bounded<M> {
    inner: M,
    places: Arc<Semaphore>,
}

impl<M: ChatModel> Bounded<M> {
    /// `limit` is at least 1.
    pub fn new(inner: M, limit: usize) -> Self {
        Self {
            inner,
            places: Arc::new(Semaphore::new(limit.max(1))),
        }
    }

    pub fn inner(&self) -> &M {
        &self.inner
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for Bounded<M> {
    async fn complete(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.complete_streaming(request, &herald_core::NoText).await
    }

    async fn complete_streaming(
        &self,
        request: ChatRequest,
        sink: &dyn herald_core::TextSink,
    ) -> Result<ChatResponse, LlmError> {
        let asked = std::time::Instant::now();
        // The semaphore is never closed, so acquiring only waits.
        let _place = self
            .places
            .acquire()
            .await
            .map_err(|_| LlmError::Connect("the model's request limiter was closed".into()))?;
        metrics::histogram!("herald_model_wait_seconds").record(asked.elapsed().as_secs_f64());
        self.inner.complete_streaming(request, sink).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A model that takes a while and remembers how many calls overlapped.
    #[derive(Default)]
    struct Slow {
        now: AtomicUsize,
        most: AtomicUsize,
    }

    #[async_trait]
    impl ChatModel for Slow {
        async fn complete(&self, _request: ChatRequest) -> Result<ChatResponse, LlmError> {
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
            Ok(ChatResponse {
                content: Some("ok".into()),
                tool_calls: Vec::new(),
                finish_reason: Some("stop".into()),
                usage: None,
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_than_the_limit_reach_the_model_and_every_call_is_answered() {
        let model = Arc::new(Bounded::new(Slow::default(), 3));
        let calls: Vec<_> = (0..10)
            .map(|_| {
                let model = model.clone();
                tokio::spawn(async move { model.complete(ChatRequest::new(Vec::new(), Vec::new())).await })
            })
            .collect();
        for call in calls {
            assert!(call.await.unwrap().is_ok());
        }
        assert_eq!(model.inner().most.load(Ordering::SeqCst), 3);
    }
}
