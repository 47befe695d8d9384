//! The upload delivery the hosted sessions call before forwarding a prompt
//! (`docs/web-api.md` §3.1): `session::uploads` with the default model's configured
//! capabilities (`image_in`, `video_in`), read from the config file each time (it may change).

use std::path::PathBuf;

use super::super::hosted::{SessionPlace, UploadHook};
use crate::protocol::ContentPart;

pub struct Deliver {
    pub share: PathBuf,
}

impl Deliver {
    fn capabilities(&self) -> (bool, bool) {
        let Ok(config) = crate::config::load_file(&self.share.join("config.toml")) else { return (false, false) };
        let caps = config.models.get(&config.default_model).map(|m| m.capabilities.clone()).unwrap_or_default();
        (caps.iter().any(|c| c == "image_in"), caps.iter().any(|c| c == "video_in"))
    }
}

impl UploadHook for Deliver {
    fn take_unsent(&self, session: &SessionPlace) -> Vec<ContentPart> {
        let (image_in, video_in) = self.capabilities();
        crate::session::uploads::take_unsent(&session.session_dir, image_in, video_in)
    }
}
