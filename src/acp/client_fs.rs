//! The client's file system for the file tools (`docs/acp.md` §12.4): whole-file reads through
//! `fs/read_text_file` (the tools slice lines themselves) and writes through
//! `fs/write_text_file`, each only when the client offered it.

use std::path::Path;

use agent_client_protocol::v1::schema::{ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest};
use futures::future::BoxFuture;

use super::client_calls::ClientCalls;
use crate::tools::client_files::ClientFiles;

pub struct AcpFiles {
    pub session_id: String,
    pub calls: ClientCalls,
    pub read: bool,
    pub write: bool,
}

impl ClientFiles for AcpFiles {
    fn can_read(&self) -> bool {
        self.read
    }

    fn can_write(&self) -> bool {
        self.write
    }

    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let request = ReadTextFileRequest::new(self.session_id.clone(), path.to_path_buf());
            let response: ReadTextFileResponse = self.calls.call("fs/read_text_file", &request).await?;
            Ok(response.content)
        })
    }

    fn write_text<'a>(&'a self, path: &'a Path, content: String) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let request = WriteTextFileRequest::new(self.session_id.clone(), path.to_path_buf(), content);
            self.calls.call::<_, serde_json::Value>("fs/write_text_file", &request).await.map(|_| ())
        })
    }
}
