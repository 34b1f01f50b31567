//! The crate's one error type, with the retry classification callers need.

use std::path::PathBuf;

use herald_core::{ChannelError, RetryClass, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// The model's (or the user's) arguments do not fit the skill.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// Policy said no: not an admin, outside the folder, over a limit.
    #[error("{0}")]
    Refused(String),
    #[error("no skill named `{0}`")]
    NotFound(String),
    #[error("no file `{0}` in the skill folder")]
    MissingFile(String),
    /// A skill folder or archive that cannot be used.
    #[error("invalid skill at {path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Channel(#[from] ChannelError),
}

impl SkillError {
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SkillError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    pub fn refused(reason: impl Into<String>) -> Self {
        SkillError::Refused(reason.into())
    }

    pub fn retry_class(&self) -> RetryClass {
        match self {
            SkillError::Store(err) => err.retry_class(),
            SkillError::Channel(err) => err.retry_class(),
            SkillError::Io { .. } => RetryClass::Transient,
            SkillError::InvalidArguments(_)
            | SkillError::Refused(_)
            | SkillError::NotFound(_)
            | SkillError::MissingFile(_)
            | SkillError::Invalid { .. } => RetryClass::Fatal,
        }
    }
}
