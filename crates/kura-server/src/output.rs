//! The replies of one read batch, waiting to be written. Protocol text is
//! appended to a byte buffer; large values are not copied but kept as
//! [`Item`] handles and sent from the cache's own memory with one vectored
//! write. Once the buffer passes its high-water mark every further value
//! goes by handle too, so even a multi-get of thousands of large items
//! buffers only headers and handles.

use std::io::IoSlice;
use std::ops::{Deref, DerefMut};

use kura_store::Item;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Values at least this large are sent by handle rather than copied.
const BY_HANDLE: usize = 8 * 1024;
/// Past this many buffered bytes, every value is sent by handle.
pub(crate) const HIGH_WATER: usize = 256 * 1024;
/// The most buffers one vectored write may carry: Linux refuses more than
/// `IOV_MAX` (1,024) with `EMSGSIZE` (sendmsg) or `EINVAL` (writev), so a
/// reply of thousands of values by handle goes out in several calls.
pub(crate) const MAX_IOVECS: usize = 1024;

/// Pending reply bytes, with values spliced in by handle.
#[derive(Default)]
pub struct Output {
    bytes: Vec<u8>,
    /// (offset in `bytes` the value goes before, the item).
    values: Vec<(usize, Item)>,
    value_bytes: usize,
    /// Where reply messages end inside one request's reply, for UDP
    /// (`None` on a stream, which has no messages).
    message_ends: Option<Vec<usize>>,
    /// How much of the front is already written ([`Output::write_now`]
    /// stopped short of the end).
    sent: usize,
}

impl Deref for Output {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.bytes
    }
}

impl DerefMut for Output {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }
}

impl Output {
    pub fn with_capacity(n: usize) -> Output {
        Output {
            bytes: Vec::with_capacity(n),
            ..Default::default()
        }
    }

    /// An output for UDP, which notes where [`Output::end_message`] is
    /// called.
    pub fn for_datagrams() -> Output {
        Output {
            message_ends: Some(Vec::new()),
            ..Default::default()
        }
    }

    /// Ends a reply message inside one request's reply: memcached sends
    /// each key of a multi-get as its own UDP message. Nothing on a stream.
    #[inline]
    pub fn end_message(&mut self) {
        let at = self.pending();
        if let Some(ends) = &mut self.message_ends {
            ends.push(at);
        }
    }

    /// Everything pending, cut into the messages [`Output::end_message`]
    /// marked (the last one is what follows the last mark); then clears.
    pub fn take_messages(&mut self) -> Vec<Vec<u8>> {
        let all = self.to_vec();
        let mut at = 0;
        let mut out = Vec::new();
        for &end in self.message_ends.iter().flatten() {
            out.push(all[at..end].to_vec());
            at = end;
        }
        out.push(all[at..].to_vec());
        self.clear();
        out
    }

    /// Appends `item`'s value: copied when small, by handle when large or
    /// when the buffer is already past its high-water mark.
    pub fn push_value(&mut self, item: &Item) {
        let v = item.value();
        if v.len() >= BY_HANDLE || self.bytes.len() >= HIGH_WATER {
            self.values.push((self.bytes.len(), item.clone()));
            self.value_bytes += v.len();
        } else {
            self.bytes.extend_from_slice(v);
        }
    }

    /// Total bytes pending, values included.
    pub fn pending(&self) -> usize {
        self.bytes.len() + self.value_bytes
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending() == 0
    }

    /// Where the output stands, for [`Output::truncate`].
    pub fn mark(&self) -> (usize, usize) {
        (self.bytes.len(), self.values.len())
    }

    /// Drops what was appended since `mark` (a reply taken back).
    pub fn truncate(&mut self, mark: (usize, usize)) {
        for (_, item) in self.values.drain(mark.1.min(self.values.len())..) {
            self.value_bytes -= item.value().len();
        }
        self.bytes.truncate(mark.0);
    }

    /// Drops everything pending (and the item handles).
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.values.clear();
        self.value_bytes = 0;
        self.sent = 0;
        if let Some(ends) = &mut self.message_ends {
            ends.clear();
        }
    }

    /// The pending bytes in order, as slices.
    fn slices(&self) -> Vec<IoSlice<'_>> {
        let mut out = Vec::with_capacity(self.values.len() * 2 + 1);
        let mut at = 0;
        for (off, item) in &self.values {
            if *off > at {
                out.push(IoSlice::new(&self.bytes[at..*off]));
            }
            out.push(IoSlice::new(item.value()));
            at = *off;
        }
        if at < self.bytes.len() {
            out.push(IoSlice::new(&self.bytes[at..]));
        }
        out
    }

    /// Everything pending as one contiguous buffer (for UDP datagrams).
    pub fn to_vec(&self) -> Vec<u8> {
        self.slices()
            .iter()
            .flat_map(|s| s.iter().copied())
            .collect()
    }

    /// Writes everything pending to `w` and flushes it (a TLS stream may
    /// otherwise keep the last records back until the next write).
    ///
    /// # Errors
    /// The stream's write error.
    pub async fn write_to<W: AsyncWrite + Unpin>(&self, w: &mut W) -> std::io::Result<()> {
        if self.values.is_empty() {
            w.write_all(&self.bytes[self.sent.min(self.bytes.len())..])
                .await?;
            return w.flush().await;
        }
        let mut slices = self.slices();
        let mut rest = &mut slices[..];
        IoSlice::advance_slices(&mut rest, self.sent);
        while !rest.is_empty() {
            let n = w
                .write_vectored(&rest[..rest.len().min(MAX_IOVECS)])
                .await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut rest, n);
        }
        w.flush().await
    }
}

impl Output {
    /// Writes what is pending to a non-blocking socket without waiting:
    /// true once all of it is written (the output is then cleared), false
    /// when the socket would block (what was written is remembered, and
    /// [`Output::write_to`] sends the rest).
    ///
    /// # Errors
    /// The socket's write error.
    pub fn write_now<W: std::io::Write>(&mut self, w: &mut W) -> std::io::Result<bool> {
        let total = self.pending();
        let mut sent = self.sent;
        let result = if self.values.is_empty() {
            write_all_now(w, &self.bytes, &mut sent)
        } else {
            let mut slices = self.slices();
            write_vectored_now(w, &mut slices, &mut sent)
        };
        self.sent = sent;
        match result {
            Ok(()) if self.sent >= total => {
                self.clear();
                Ok(true)
            }
            Ok(()) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Writes `bytes` from `*sent` on until done or the socket would block
/// (then `Ok` with `*sent` short of the end).
fn write_all_now<W: std::io::Write>(
    w: &mut W,
    bytes: &[u8],
    sent: &mut usize,
) -> std::io::Result<()> {
    while *sent < bytes.len() {
        match w.write(&bytes[*sent..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => *sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// As [`write_all_now`] for a list of slices, at most [`MAX_IOVECS`] of
/// them a call.
fn write_vectored_now<W: std::io::Write>(
    w: &mut W,
    slices: &mut [IoSlice<'_>],
    sent: &mut usize,
) -> std::io::Result<()> {
    let mut rest = slices;
    IoSlice::advance_slices(&mut rest, *sent);
    while !rest.is_empty() {
        match w.write_vectored(&rest[..rest.len().min(MAX_IOVECS)]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                *sent += n;
                IoSlice::advance_slices(&mut rest, n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_values_are_spliced_in_order() {
        let big = Item::new(b"b", 0, &vec![b'x'; BY_HANDLE]);
        let small = Item::new(b"s", 0, b"tiny");
        let mut o = Output::default();
        o.extend_from_slice(b"A:");
        o.push_value(&big);
        o.extend_from_slice(b":B:");
        o.push_value(&small);
        o.extend_from_slice(b":C");
        let mut want = b"A:".to_vec();
        want.extend_from_slice(&vec![b'x'; BY_HANDLE]);
        want.extend_from_slice(b":B:tiny:C");
        assert_eq!(o.to_vec(), want);
        assert_eq!(o.pending(), want.len());
        o.clear();
        assert!(o.is_empty());
    }

    #[test]
    fn datagram_output_is_cut_where_messages_end() {
        let big = Item::new(b"b", 0, &vec![b'x'; BY_HANDLE]);
        let mut o = Output::for_datagrams();
        o.end_message();
        o.extend_from_slice(b"A");
        o.push_value(&big);
        o.end_message();
        o.extend_from_slice(b"END");
        let mut a = b"A".to_vec();
        a.extend_from_slice(&vec![b'x'; BY_HANDLE]);
        assert_eq!(o.take_messages(), vec![Vec::new(), a, b"END".to_vec()]);
        assert!(o.is_empty());
        assert_eq!(o.take_messages(), vec![Vec::new()]);
        // A stream's output has no messages.
        let mut o = Output::default();
        o.extend_from_slice(b"A");
        o.end_message();
        o.extend_from_slice(b"B");
        assert_eq!(o.take_messages(), vec![b"AB".to_vec()]);
    }

    /// A socket that takes `room` bytes, at most `chunk` a call, then would
    /// block.
    struct Full {
        got: Vec<u8>,
        room: usize,
        chunk: usize,
    }

    impl std::io::Write for Full {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let n = b.len().min(self.room).min(self.chunk);
            if n == 0 {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            self.got.extend_from_slice(&b[..n]);
            self.room -= n;
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_write_that_would_block_is_finished_by_write_to() {
        let big = Item::new(b"b", 0, &vec![b'q'; 3 * BY_HANDLE]);
        for with_value in [false, true] {
            let mut o = Output::default();
            o.extend_from_slice(b"VALUE b 0 24576\r\n");
            if with_value {
                o.push_value(&big);
            } else {
                o.extend_from_slice(&vec![b'q'; 3 * BY_HANDLE]);
            }
            o.extend_from_slice(b"\r\nEND\r\n");
            let want = o.to_vec();
            let mut sock = Full {
                got: Vec::new(),
                room: 10_000,
                chunk: 4_000,
            };
            assert!(!o.write_now(&mut sock).unwrap());
            assert_eq!(sock.got.len(), 10_000);
            // The rest goes by the async path, from where it stopped.
            let mut rest = Vec::new();
            o.write_to(&mut rest).await.unwrap();
            sock.got.extend_from_slice(&rest);
            assert!(sock.got == want, "with_value {with_value}");
            // And once all is written, the output is empty.
            let mut o2 = Output::default();
            o2.extend_from_slice(b"STORED\r\n");
            let mut sock = Full {
                got: Vec::new(),
                room: 100,
                chunk: 3,
            };
            assert!(o2.write_now(&mut sock).unwrap());
            assert_eq!(sock.got, b"STORED\r\n");
            assert!(o2.is_empty());
        }
    }

    /// A socket that refuses more than `IOV_MAX` buffers a call, as
    /// Linux's sendmsg does (`EMSGSIZE`).
    struct IovLimited(Vec<u8>);

    impl std::io::Write for IovLimited {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.extend_from_slice(b);
            Ok(b.len())
        }

        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
            if bufs.len() > 1024 {
                return Err(std::io::Error::from_raw_os_error(libc::EMSGSIZE));
            }
            let mut n = 0;
            for b in bufs {
                self.0.extend_from_slice(b);
                n += b.len();
            }
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl tokio::io::AsyncWrite for IovLimited {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            b: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::task::Poll::Ready(std::io::Write::write(self.get_mut(), b))
        }

        fn poll_write_vectored(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            std::task::Poll::Ready(std::io::Write::write_vectored(self.get_mut(), bufs))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// A multi-get of thousands of values by handle is more buffers than
    /// one sendmsg takes: it goes out whole, in as many calls as needed.
    #[tokio::test(flavor = "current_thread")]
    async fn a_reply_of_thousands_of_values_is_written_whole() {
        let big = Item::new(b"b", 0, &vec![b'v'; BY_HANDLE]);
        let mut o = Output::default();
        for i in 0..3000 {
            o.extend_from_slice(format!("VALUE k{i} 0 {BY_HANDLE}\r\n").as_bytes());
            o.push_value(&big);
            o.extend_from_slice(b"\r\n");
        }
        o.extend_from_slice(b"END\r\n");
        let want = o.to_vec();
        let mut async_sock = IovLimited(Vec::new());
        o.write_to(&mut async_sock).await.unwrap();
        assert!(async_sock.0 == want, "write_to");
        let mut sock = IovLimited(Vec::new());
        assert!(o.write_now(&mut sock).unwrap());
        assert!(sock.0 == want, "write_now");
        assert!(o.is_empty());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn vectored_write_survives_short_writes() {
        let big = Item::new(b"b", 0, &vec![b'y'; 100_000]);
        let mut o = Output::default();
        for _ in 0..3 {
            o.extend_from_slice(b"head\r\n");
            o.push_value(&big);
        }
        // A small duplex buffer forces many partial writes.
        let (mut a, mut b) = tokio::io::duplex(1000);
        let want = o.to_vec();
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut b, &mut got)
                .await
                .unwrap();
            got
        });
        o.write_to(&mut a).await.unwrap();
        drop(a);
        assert_eq!(reader.await.unwrap(), want);
    }

    /// A stream that holds bytes back until flushed (as TLS does when the
    /// socket is full) must still deliver every reply.
    #[tokio::test(flavor = "current_thread")]
    async fn replies_reach_a_buffering_stream() {
        let big = Item::new(b"b", 0, &vec![b'z'; BY_HANDLE]);
        let (a, mut b) = tokio::io::duplex(1 << 20);
        let mut w = tokio::io::BufWriter::with_capacity(1 << 20, a);
        for with_value in [false, true] {
            let mut o = Output::default();
            o.extend_from_slice(b"STORED\r\n");
            if with_value {
                o.push_value(&big);
            }
            o.write_to(&mut w).await.unwrap();
            let mut got = vec![0; o.pending()];
            // The writer stays open: without a flush this read never ends.
            let read = tokio::io::AsyncReadExt::read_exact(&mut b, &mut got);
            tokio::time::timeout(std::time::Duration::from_secs(10), read)
                .await
                .expect("replies held back")
                .unwrap();
            assert_eq!(got, o.to_vec());
        }
    }
}
