//! kiwi's own requests to the ACP client that a tool awaits (terminals, files): typed params
//! out, typed result back, through the connection's [`Peer`].

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::rpc::Peer;

#[derive(Clone)]
pub struct ClientCalls {
    pub peer: Arc<Peer>,
}

impl ClientCalls {
    /// Sends `method` and waits for its answer; `Err` is a readable reason (the client's error
    /// message, an unreadable result, or a closed connection).
    pub async fn call<P: Serialize, R: DeserializeOwned + Send + 'static>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<R, String> {
        self.peer.call(method, params).await.map_err(|e| e.to_string())
    }

    /// Sends `method` without waiting for the answer (a cleanup that must not block).
    pub fn fire<P: Serialize + Send + Sync + 'static>(&self, method: &'static str, params: P) {
        self.peer.fire(method, params);
    }
}
