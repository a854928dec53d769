//! The body of every message the proxy sends, to clients and to the backend: nothing, bytes in
//! memory (a stored object's body shares the store's item), a flight's stream, or a hyper body
//! passed through. One enum rather than a boxed trait object: no allocation per response.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;

use crate::backend::Lease;
use crate::coalesce::ReaderBody;
use crate::compress::decode::Decoding;
use crate::compress::Decode;

/// A message body.
pub enum Body {
    /// No content.
    Empty,
    /// Bytes in memory.
    Full(Option<Bytes>),
    /// A flight's body.
    Flight(ReaderBody),
    /// A byte range of a flight's body: `skip` bytes dropped, then `left` bytes sent.
    FlightRange {
        /// The flight's body.
        reader: ReaderBody,
        /// Bytes still to drop.
        skip: u64,
        /// Bytes still to send.
        left: u64,
    },
    /// A body received from the other side, passed through.
    Incoming(Incoming),
    /// A backend server's response body, passed through; the lease keeps the server's
    /// connection counted as in use until the body ends or is dropped.
    Leased(Incoming, Lease),
    /// A client's request body on its way to the backend; the flag is set if it breaks (a
    /// malformed chunk, cut short), which makes the failure the client's (400), not the
    /// backend's.
    Request(Incoming, Arc<AtomicBool>),
    /// A coded body decoded on the fly, for a client that does not accept its coding.
    Decoded(Box<Decoding>),
    /// A page assembled from its text and its ESI fragments (`crate::esi`); an error cuts it
    /// short.
    Esi(tokio::sync::mpsc::Receiver<Result<Bytes, crate::esi::Aborted>>),
}

impl Body {
    /// A body of `bytes`.
    pub fn full(bytes: impl Into<Bytes>) -> Body {
        Body::Full(Some(bytes.into()))
    }

    /// A backend response's body, holding the server's lease when it has one.
    pub fn backend(incoming: Incoming, lease: Option<Lease>) -> Body {
        match lease {
            Some(lease) => Body::Leased(incoming, lease),
            None => Body::Incoming(incoming),
        }
    }

    /// This body, decoded when `decode` says so.
    pub fn decoded(self, decode: Option<Decode>) -> Body {
        match decode {
            Some(Decode {
                coding,
                limit,
                gzip,
            }) => Body::Decoded(Box::new(Decoding::new(self, coding, limit).gzip(gzip))),
            None => self,
        }
    }
}

impl Body {
    /// This body, ready for its response's head to be sent: a body decoded for the client has
    /// its first bytes decoded ([`Decoding::prime`]); any other is as it is.
    ///
    /// # Errors
    /// A decoded body whose first bytes cannot be decoded, or whose source failed first.
    pub async fn primed(mut self) -> Result<Body, Box<dyn std::error::Error + Send + Sync>> {
        if let Body::Decoded(decoding) = &mut self {
            decoding.prime().await?;
        }
        Ok(self)
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
            Body::FlightRange { reader, skip, left } => loop {
                if *left == 0 {
                    return Poll::Ready(None);
                }
                let frame = match Pin::new(&mut *reader).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => frame,
                    Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error.into()))),
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                };
                let Ok(mut data) = frame.into_data() else {
                    continue;
                };
                let len = data.len() as u64;
                if *skip >= len {
                    *skip -= len;
                    continue;
                }
                // Both are below data.len() here, so they fit in usize.
                let from = usize::try_from(*skip).unwrap_or(0);
                let to = usize::try_from((*skip).saturating_add(*left).min(len)).unwrap_or(0);
                data = data.slice(from..to);
                *skip = 0;
                *left -= data.len() as u64;
                return Poll::Ready(Some(Ok(Frame::data(data))));
            },
            Body::Incoming(incoming) | Body::Leased(incoming, _) => {
                Pin::new(incoming).poll_frame(cx).map_err(Into::into)
            }
            Body::Request(incoming, broken) => {
                let frame = Pin::new(incoming).poll_frame(cx);
                if let Poll::Ready(Some(Err(_))) = &frame {
                    broken.store(true, Ordering::Relaxed);
                }
                frame.map_err(Into::into)
            }
            Body::Decoded(decoding) => decoding.poll_frame(cx),
            Body::Esi(pieces) => match pieces.poll_recv(cx) {
                Poll::Ready(Some(Ok(bytes))) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
                Poll::Ready(Some(Err(aborted))) => Poll::Ready(Some(Err(aborted.into()))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Empty => true,
            Body::Full(bytes) => bytes.is_none(),
            Body::Flight(_) | Body::Esi(_) => false,
            Body::FlightRange { left, .. } => *left == 0,
            Body::Incoming(incoming) | Body::Request(incoming, _) | Body::Leased(incoming, _) => {
                incoming.is_end_stream()
            }
            Body::Decoded(decoding) => decoding.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Empty => SizeHint::with_exact(0),
            Body::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Body::Flight(_) | Body::Esi(_) => SizeHint::default(),
            Body::FlightRange { left, .. } => SizeHint::with_exact(*left),
            Body::Incoming(incoming) | Body::Request(incoming, _) | Body::Leased(incoming, _) => {
                incoming.size_hint()
            }
            Body::Decoded(decoding) => decoding.size_hint(),
        }
    }
}
