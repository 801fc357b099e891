//! [`Error`]: the one error type of the crate's public API.

/// Why a block could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The receive engine, the sender or their sockets failed.
    #[error(transparent)]
    Io(#[from] fsdr_net_io::Error),
    /// A setting is invalid, or settings contradict each other.
    #[error("{0}")]
    Config(String),
    /// The wire format does not convert to the block's items.
    #[error(transparent)]
    WireFormat(#[from] fsdr_net_io::sample::WireFormatError),
}

impl Error {
    pub(crate) fn config(msg: impl Into<String>) -> Self {
        Error::Config(msg.into())
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e.into())
    }
}
