//! Protocol errors. Each variant is one of memcached's error replies, byte
//! for byte; [`Error::as_bytes`] is the line a server sends back.

/// A request that cannot be executed, with memcached's reply for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("ERROR")]
    UnknownCommand,
    #[error("CLIENT_ERROR bad command line format")]
    BadFormat,
    #[error("CLIENT_ERROR bad data chunk")]
    BadDataChunk,
    #[error("CLIENT_ERROR invalid exptime argument")]
    InvalidExptime,
    #[error("CLIENT_ERROR invalid numeric delta argument")]
    InvalidDeltaArgument,
    #[error("CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]")]
    DeleteUsage,
    #[error("CLIENT_ERROR duplicate flag")]
    DuplicateFlag,
    #[error("CLIENT_ERROR invalid flag")]
    InvalidFlag,
    #[error("CLIENT_ERROR invalid or duplicate flag")]
    InvalidOrDuplicateFlag,
    #[error("CLIENT_ERROR bad token in command line format")]
    BadToken,
    #[error("CLIENT_ERROR error decoding key")]
    KeyDecode,
    #[error("CLIENT_ERROR incorrect length for M token")]
    ModeTokenLength,
    #[error("CLIENT_ERROR invalid numeric initial value")]
    InvalidInitial,
    #[error("CLIENT_ERROR invalid numeric delta value")]
    InvalidDelta,
    #[error("CLIENT_ERROR opaque token too long")]
    OpaqueTooLong,
    #[error("CLIENT_ERROR options flags are too long")]
    GetFlagsTooLong,
    #[error("CLIENT_ERROR options flags too long")]
    FlagsTooLong,
    #[error("CLIENT_ERROR invalid mode for ms M token")]
    InvalidSetMode,
    #[error("CLIENT_ERROR invalid mode for ma M token")]
    InvalidArithMode,
}

impl Error {
    /// The reply line, including `\r\n`.
    pub fn as_bytes(&self) -> &'static [u8] {
        match self {
            Error::UnknownCommand => b"ERROR\r\n",
            Error::BadFormat => b"CLIENT_ERROR bad command line format\r\n",
            Error::BadDataChunk => b"CLIENT_ERROR bad data chunk\r\n",
            Error::InvalidExptime => b"CLIENT_ERROR invalid exptime argument\r\n",
            Error::InvalidDeltaArgument => b"CLIENT_ERROR invalid numeric delta argument\r\n",
            Error::DeleteUsage => {
                b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"
            }
            Error::DuplicateFlag => b"CLIENT_ERROR duplicate flag\r\n",
            Error::InvalidFlag => b"CLIENT_ERROR invalid flag\r\n",
            Error::InvalidOrDuplicateFlag => b"CLIENT_ERROR invalid or duplicate flag\r\n",
            Error::BadToken => b"CLIENT_ERROR bad token in command line format\r\n",
            Error::KeyDecode => b"CLIENT_ERROR error decoding key\r\n",
            Error::ModeTokenLength => b"CLIENT_ERROR incorrect length for M token\r\n",
            Error::InvalidInitial => b"CLIENT_ERROR invalid numeric initial value\r\n",
            Error::InvalidDelta => b"CLIENT_ERROR invalid numeric delta value\r\n",
            Error::OpaqueTooLong => b"CLIENT_ERROR opaque token too long\r\n",
            Error::GetFlagsTooLong => b"CLIENT_ERROR options flags are too long\r\n",
            Error::FlagsTooLong => b"CLIENT_ERROR options flags too long\r\n",
            Error::InvalidSetMode => b"CLIENT_ERROR invalid mode for ms M token\r\n",
            Error::InvalidArithMode => b"CLIENT_ERROR invalid mode for ma M token\r\n",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_matches_wire_bytes() {
        for e in [
            Error::UnknownCommand,
            Error::BadFormat,
            Error::DeleteUsage,
            Error::InvalidArithMode,
            Error::GetFlagsTooLong,
        ] {
            let wire = e.as_bytes();
            assert_eq!(&wire[..wire.len() - 2], e.to_string().as_bytes());
            assert!(wire.ends_with(b"\r\n"));
        }
    }
}
