//! The outbox's sending side: each slot of a task's output (its notices,
//! its reply, the failure notice) is sent at most once, its receipt checked
//! before the send and written after it, the reply's with the task's
//! completion in one round trip.

use herald_core::{
    DeliveryReceipt, Lease, OutboundMessage, RetryClass, StoreError, TaskId, TaskPayload, TaskQueue, TurnScope,
};
use tracing::{debug, info, warn};

use super::{Agent, Failure};

impl Agent {
    /// Sends one slot of a task's output once: skipped when a receipt exists.
    /// Returns the receipt when it is to be written with the completion.
    pub(super) async fn deliver(
        &self,
        task: TaskId,
        scope: &TurnScope,
        text: &str,
        how: Slot<'_>,
    ) -> Result<Option<DeliveryReceipt>, Failure> {
        let (slot, receipts, shown) = match how {
            Slot::Notice(name) => (name, Receipts::Check, None),
            Slot::Reply { receipts, shown } => ("reply", receipts, shown),
        };
        let conversations = &self.parts.conversations;
        if receipts == Receipts::Check
            && conversations
                .delivery(task, slot)
                .await
                .map_err(Failure::store)?
                .is_some()
        {
            debug!(slot, "already delivered");
            return Ok(None);
        }
        let message = OutboundMessage {
            conversation: scope.conversation.clone(),
            text: text.to_owned(),
            reply_to: scope.reply_to.clone(),
            idempotency_key: Some(format!("task:{task}:{slot}")),
            files: Vec::new(),
        };
        let sent = match shown {
            Some(shown) => self.parts.outbound.finish(&message, shown).await,
            None => self.parts.outbound.send(&message).await,
        }
        .map_err(|err| match err.retry_class() {
            RetryClass::Fatal => Failure::GiveUp(format!("sending {slot} failed: {err}")),
            _ => Failure::Retry(format!("sending {slot} failed: {err}")),
        })?;
        let receipt = DeliveryReceipt {
            task,
            slot: slot.to_owned(),
            conversation: scope.conversation.id.clone(),
            platform_message_ids: sent.platform_message_ids,
            delivered_at: chrono::Utc::now(),
        };
        match how {
            Slot::Reply { .. } => {
                debug!(
                    slot,
                    chars = text.chars().count(),
                    "sent; the receipt goes with the completion"
                );
                Ok(Some(receipt))
            }
            Slot::Notice(_) => {
                conversations.record_delivery(&receipt).await.map_err(Failure::store)?;
                info!(slot, chars = text.chars().count(), "delivered");
                Ok(None)
            }
        }
    }

    /// Tells the user their message could not be handled, once.
    pub(super) async fn notify_failure(&self, lease: &Lease, scope: &TurnScope) {
        if !matches!(lease.task.payload, TaskPayload::Message(_)) {
            return;
        }
        if let Err(err) = self
            .deliver(
                lease.task.id,
                scope,
                &self.parts.config.failure_notice,
                Slot::Notice("failure"),
            )
            .await
        {
            warn!(error = ?err, "could not tell the user about the failure");
        }
    }
}

/// Completes a served task, with its last receipt when it has one.
/// "delivered" is logged once a receipt is stored, as for every slot.
pub(super) async fn complete(queue: &dyn TaskQueue, lease: &Lease, served: Served) -> Result<(), StoreError> {
    let Some(receipt) = served.last_receipt else {
        return queue.complete(lease).await;
    };
    let completed = queue.complete_delivered(lease, &receipt).await;
    if matches!(completed, Ok(()) | Err(StoreError::LeaseLost(_))) {
        info!(slot = %receipt.slot, "delivered");
    }
    completed
}

/// What a served task leaves for its completion.
#[derive(Debug, Default)]
pub(super) struct Served {
    /// The receipt of its last message, written with the completion (one
    /// round trip instead of two).
    pub(super) last_receipt: Option<DeliveryReceipt>,
}

/// Which slot of a task's output goes out, and so when its receipt is
/// written: a notice's right after the send, the reply's (the task's last
/// send) with the task's completion. Either way before the task is done, so
/// a retry finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Slot<'a> {
    /// A notice (`notice:N`, `failure`): its receipt is always looked up first.
    Notice(&'a str),
    /// The reply. `shown` is the message a streamed answer is showing in:
    /// it is edited into the reply instead of a first send.
    Reply { receipts: Receipts, shown: Option<&'a str> },
}

/// Whether a slot may have a receipt already, and must be looked up first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Receipts {
    Check,
    /// The slot cannot have been sent before (see `record_then_deliver`).
    NoneYet,
}
