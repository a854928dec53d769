//! The body of every message the proxy sends, to clients and to the backend: nothing, bytes in
//! memory (a stored object's body shares the store's item), a flight's stream, or a hyper body
//! passed through. One enum rather than a boxed trait object: no allocation per response.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;

use crate::coalesce::ReaderBody;

/// A message body.
pub enum Body {
    /// No content.
    Empty,
    /// Bytes in memory.
    Full(Option<Bytes>),
    /// A flight's body.
    Flight(ReaderBody),
    /// A body received from the other side, passed through.
    Incoming(Incoming),
}

impl Body {
    /// A body of `bytes`.
    pub fn full(bytes: impl Into<Bytes>) -> Body {
        Body::Full(Some(bytes.into()))
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            Body::Empty => Poll::Ready(None),
            Body::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Body::Flight(reader) => Pin::new(reader).poll_frame(cx).map_err(Into::into),
            Body::Incoming(incoming) => Pin::new(incoming).poll_frame(cx).map_err(Into::into),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Empty => true,
            Body::Full(bytes) => bytes.is_none(),
            Body::Flight(_) => false,
            Body::Incoming(incoming) => incoming.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Empty => SizeHint::with_exact(0),
            Body::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Body::Flight(_) => SizeHint::default(),
            Body::Incoming(incoming) => incoming.size_hint(),
        }
    }
}
