//! How a backend that was away comes back: its journal's keys deleted on
//! it ([`replay`]), then the copies its keys left in a gutter while it was
//! away deleted there ([`GutterCopies`]), and only then does it serve. A
//! gutter copy outliving the backend's return would be read again the
//! next time the backend goes away, older than what the backend
//! acknowledged meanwhile (issue 43).

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use kura_client::raw::Expect;
use kura_proto::client::Status;

use crate::config::Overflow;
use crate::router::Node;

/// Keys deleted per batch.
const BATCH: usize = 500;

/// The keys of one backend written to its gutter while it did not serve,
/// by gutter node. Bounded like the journal: past `max` keys it keeps
/// only a time until which the gutter may hold copies it does not list
/// (every write there ages out within its gutter's TTL).
pub struct GutterCopies {
    by_gutter: HashMap<usize, (Weak<Node>, HashSet<Vec<u8>>)>,
    count: usize,
    max: usize,
    /// Writes to the gutter sent and not yet answered (or failed).
    in_flight: usize,
    /// Until when unlisted copies may be in a gutter.
    wait_until: Option<Instant>,
}

/// What is left before the backend may serve.
pub enum Left {
    Nothing,
    /// Writes in flight, or unlisted copies not yet aged out.
    Wait,
    /// Keys to delete on a gutter node (gone: a reload removed it).
    Delete(Option<Arc<Node>>, usize, Vec<Vec<u8>>),
}

impl GutterCopies {
    pub fn new(max: usize) -> GutterCopies {
        GutterCopies {
            by_gutter: HashMap::new(),
            count: 0,
            max: max.max(1),
            in_flight: 0,
            wait_until: None,
        }
    }

    /// A write of `key` about to go to gutter node `g` (id `gid`), whose
    /// TTLs are capped at `ttl` seconds; `slack` covers its time in flight.
    pub fn record(&mut self, g: &Arc<Node>, gid: usize, key: &[u8], ttl: u32, slack: Duration) {
        self.in_flight += 1;
        if self.count >= self.max {
            // Older than any copy: expired by then, TTLs being whole seconds.
            self.wait_for(u64::from(ttl) + 2, slack);
            return;
        }
        let (_, keys) = self
            .by_gutter
            .entry(gid)
            .or_insert_with(|| (Arc::downgrade(g), HashSet::new()));
        if keys.insert(key.to_vec()) {
            self.count += 1;
        }
    }

    /// Copies not listed may be in the gutter for `secs` seconds more.
    pub fn wait_for(&mut self, secs: u64, slack: Duration) {
        let until = Instant::now() + Duration::from_secs(secs) + slack;
        self.wait_until = Some(self.wait_until.map_or(until, |w| w.max(until)));
    }

    /// A write recorded by [`GutterCopies::record`] was answered or failed.
    pub fn landed(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    pub fn len(&self) -> usize {
        self.count
    }

    /// What to do next.
    pub fn left(&mut self) -> Left {
        if self.in_flight > 0 {
            return Left::Wait;
        }
        if let Some((&gid, (g, keys))) = self.by_gutter.iter().next() {
            let batch = keys.iter().take(BATCH).cloned().collect();
            return Left::Delete(g.upgrade(), gid, batch);
        }
        match self.wait_until {
            Some(w) if w > Instant::now() => Left::Wait,
            _ => {
                self.wait_until = None;
                Left::Nothing
            }
        }
    }

    /// Forgets keys deleted on gutter node `gid` (or handed to its journal).
    pub fn done(&mut self, gid: usize, keys: &[Vec<u8>]) {
        if let Some((_, set)) = self.by_gutter.get_mut(&gid) {
            for k in keys {
                if set.remove(k) {
                    self.count -= 1;
                }
            }
            if set.is_empty() {
                self.by_gutter.remove(&gid);
            }
        }
    }
}

/// Kept with a write sent to a gutter until the gutter answered it (or
/// its connection failed): the backend it was written for does not serve
/// while one is in flight, since a delete sent meanwhile could overtake it.
pub struct GutterWrite(pub Arc<Node>);

impl Drop for GutterWrite {
    fn drop(&mut self) {
        self.0.gutter_copies().landed();
    }
}

/// Deletes the journal's keys on the backend once it answers, then its
/// keys' copies in the gutter, then lets requests through again. Runs
/// until both are empty.
pub async fn replay(node: Arc<Node>) {
    let mut backoff = Duration::from_millis(20);
    loop {
        let step = {
            let mut j = node.journal();
            if j.released()
                && (j.overflowed() || !j.is_empty())
                && node.overflow == Overflow::KeepOut
            {
                tracing::warn!(server = %node.addr, "journal removed by the operator: serving again");
                j.clear();
            }
            if j.is_empty() {
                // Under the journal's lock: a write to the gutter records
                // its copy before it journals its key (and gates) again.
                let left = node.gutter_copies().left();
                if let Left::Nothing = left {
                    node.ungate();
                    tracing::info!(server = %node.addr, "journal replayed: serving reads again");
                    return;
                }
                Err(left)
            } else {
                Ok((j.batch(BATCH), j.overflowed()))
            }
        };
        let ok = match step {
            Ok((batch, overflowed)) => journal_step(&node, batch, overflowed).await,
            Err(left) => gutter_step(&node, left).await,
        };
        if ok {
            backoff = Duration::from_millis(20);
        } else {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }
}

/// One batch of the journal (or the flush of an overflowed one); true
/// when it is done.
async fn journal_step(node: &Arc<Node>, batch: Vec<Vec<u8>>, overflowed: bool) -> bool {
    if node.is_down() {
        return false;
    }
    if !overflowed {
        if !delete_on(node, &batch).await {
            return false;
        }
        node.stats
            .replayed
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        node.journal().done(&batch);
        return true;
    }
    match node.overflow {
        Overflow::Flush => match node.text_command(b"flush_all\r\n").await {
            Ok(line) if line == b"OK\r\n" => {
                tracing::warn!(server = %node.addr, "journal overflowed: backend flushed");
                node.flushed();
                true
            }
            _ => false,
        },
        Overflow::KeepOut => false,
    }
}

/// One step of the gutter's cleanup; true when it made progress.
async fn gutter_step(node: &Arc<Node>, left: Left) -> bool {
    match left {
        Left::Nothing => true,
        Left::Wait => {
            tokio::time::sleep(Duration::from_millis(20)).await;
            true
        }
        Left::Delete(g, gid, batch) => {
            if let Some(g) = g {
                if g.is_down() || !delete_on(&g, &batch).await {
                    // The gutter's own journal deletes them before it
                    // serves again.
                    for k in &batch {
                        g.journal_key(k);
                    }
                }
            }
            node.gutter_copies().done(gid, &batch);
            true
        }
    }
}

/// One quiet batch of deletes on `node` (keys in base64, any bytes
/// allowed); true when the backend answered all of them.
async fn delete_on(node: &Arc<Node>, keys: &[Vec<u8>]) -> bool {
    let mut buf = BytesMut::new();
    for (i, k) in keys.iter().enumerate() {
        buf.put_slice(b"md ");
        let mut b64 = Vec::new();
        kura_proto::reply::put_base64(&mut b64, k);
        buf.put_slice(&b64);
        buf.put_slice(b" b q O");
        buf.put_slice(itoa::Buffer::new().format(i).as_bytes());
        buf.put_slice(b"\r\n");
    }
    buf.put_slice(b"mn\r\n");
    let expect = Expect::MetaBatch(keys.len() as u32);
    match node.backend().send(0, buf.freeze(), expect).await {
        Ok(p) => match p.wait().await {
            Ok(r) => r
                .iter()
                .all(|r| matches!(r.status, Status::NotFound | Status::Done)),
            Err(e) => {
                tracing::debug!(server = %node.addr, %e, "delete batch failed");
                false
            }
        },
        Err(e) => {
            tracing::debug!(server = %node.addr, %e, "delete batch failed");
            false
        }
    }
}
