//! kiwi's own requests to the ACP client that a tool awaits (terminals): typed params out, typed
//! result back, through the shared pending map.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::errors::OutgoingIds;
use crate::rpc::pending::PendingRequests;
use crate::rpc::{Outbound, RequestId};

#[derive(Clone)]
pub struct ClientCalls {
    pub outbound: Outbound,
    pub pending: Arc<PendingRequests>,
    pub ids: Arc<OutgoingIds>,
}

impl ClientCalls {
    /// Sends `method` and waits for its answer; `Err` is a readable reason (the client's error
    /// message, an unreadable result, or a closed connection).
    pub async fn call<P: Serialize, R: DeserializeOwned>(&self, method: &str, params: &P) -> Result<R, String> {
        let (id, answer) = self.send(method, params).await?;
        let raw = answer.await.map_err(|_| "the client is gone".to_string())?;
        let _ = id;
        let value = raw.map_err(|e| format!("{method} failed: {}", e.message))?;
        serde_json::from_value(value).map_err(|e| format!("unreadable answer to {method}: {e}"))
    }

    /// Sends `method` without waiting for the answer (a cleanup that must not block).
    pub fn fire<P: Serialize + Send + Sync + 'static>(&self, method: &'static str, params: P) {
        let calls = self.clone();
        tokio::spawn(async move {
            if let Ok((_, answer)) = calls.send(method, &params).await {
                let _ = answer.await;
            }
        });
    }

    async fn send<P: Serialize>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<(RequestId, tokio::sync::oneshot::Receiver<crate::rpc::pending::RawAnswer>), String> {
        let id = self.ids.next();
        let answer = self.pending.register(id.clone()).map_err(|_| "duplicate request id".to_string())?;
        let frame = Outbound::request_frame(&id, method, params).ok_or("cannot serialize the request")?;
        if !self.outbound.send_raw(frame).await {
            return Err("the output is closed".into());
        }
        Ok((id, answer))
    }
}
