//! The crate's error type. Cache failures never surface on reads (they
//! fall back to the database and are counted); database failures do, and
//! a miss that needs an unreachable database says so.

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The table declaration is unusable.
    #[error("declaration: {0}")]
    Declaration(String),
    /// An index value makes a key over memcached's 250 bytes.
    #[error("index key of {0} bytes is over memcached's 250")]
    KeyTooLong(usize),
    /// The database failed or did not answer in time. For a read this
    /// means some records were not in the cache and could not be read.
    #[error("database unavailable ({what}): {source}")]
    Database {
        what: &'static str,
        #[source]
        source: sqlx::Error,
    },
    /// The database did not answer within the configured timeout.
    #[error("database unavailable ({what}): no answer within {after:?}")]
    DatabaseTimeout {
        what: &'static str,
        after: std::time::Duration,
    },
    /// A row did not fit the record type, or a column held a value its
    /// type cannot (a zero date, a `TIME` past 24 hours): the data or the
    /// declaration is wrong, the database is not down. Not counted as a
    /// database error.
    #[error("decode ({what}): {message}")]
    Decode { what: String, message: String },
    /// The application's write failed; the transaction was rolled back.
    #[error("write: {0}")]
    Write(Box<dyn std::error::Error + Send + Sync>),
    /// The cache client could not be set up.
    #[error("cache: {0}")]
    Cache(#[from] kura_client::Error),
    /// A URL the crate cannot tell the database of.
    #[error("unsupported database URL {0:?} (mysql://, mariadb:// or postgres://)")]
    Url(String),
}

impl Error {
    pub(crate) fn decode(what: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Decode {
            what: what.into(),
            message: message.into(),
        }
    }

    pub(crate) fn db(what: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
        move |source| Error::Database { what, source }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
