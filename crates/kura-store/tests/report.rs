//! What sinks tell the caller through its [`Report`]: the number of the
//! last record its operations made (a durable server's reply waits for the
//! log to have it), and work left for the end of a batched caller's batch
//! (the journal's records its connection sends) — carried by the call, not
//! by the thread, so a caller learns of its own changes only.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kura_store::{
    Change, ChangeSink, DeleteRequest, Expiry, GetOptions, Report, SetRequest, Store, StoreConfig,
};

/// Numbers every change as a log would (from 1), and tells the report;
/// with a batched report it leaves its "send" for the batch's end, else
/// does it at once (counted).
#[derive(Default)]
struct Numbering {
    next: AtomicU64,
    sent_at_once: AtomicU64,
    evictions: AtomicU64,
}

impl ChangeSink for Numbering {
    fn record(&self, change: Change<'_>, report: &Report) {
        let seq = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        if matches!(change, Change::Evict { .. }) {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        report.made(seq);
        if report.is_batched() {
            report.defer();
        } else {
            self.sent_at_once.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn store_with(sink: &Arc<Numbering>, capacity: usize) -> Store {
    let store = Store::new(StoreConfig {
        shards: 1,
        ..StoreConfig::with_capacity(capacity)
    });
    assert!(store.attach(sink.clone()));
    store
}

#[test]
fn a_write_reports_its_own_record_and_a_read_or_a_miss_reports_none() {
    let sink = Arc::new(Numbering::default());
    let store = store_with(&sink, 64 << 20);
    let r = Report::default();
    let w = store.reporting(&r);
    w.set(&SetRequest::new(b"a", b"1"));
    assert_eq!(r.take_seq(), 1);
    assert_eq!(r.take_seq(), 0, "taken once");
    w.set(&SetRequest::new(b"b", b"2"));
    w.set(&SetRequest::new(b"c", b"3"));
    assert_eq!(r.take_seq(), 3, "the last of several");

    // Another caller's writes are not this caller's.
    store.set(&SetRequest::new(b"d", b"4"));
    assert_eq!(r.take_seq(), 0);

    // Nothing changed: no record.
    assert!(w.get_with(b"a", &GetOptions::default()).is_some());
    assert_eq!(
        w.delete_with(b"missing", &DeleteRequest::default()),
        kura_store::DeleteOutcome::NotFound
    );
    assert_eq!(r.take_seq(), 0);

    assert!(w.touch(b"a", Expiry::In(100)));
    assert_eq!(r.take_seq(), 5);
    w.flush(None);
    assert_eq!(r.take_seq(), 6);
}

#[test]
fn a_store_that_evicts_reports_the_store_after_its_evictions() {
    let sink = Arc::new(Numbering::default());
    let store = store_with(&sink, 2 << 20);
    let r = Report::default();
    let value = vec![7u8; 1000];
    let mut last = 0;
    for i in 0..20_000u32 {
        let key = format!("k{i}");
        store
            .reporting(&r)
            .set(&SetRequest::new(key.as_bytes(), &value));
        let seq = r.take_seq();
        assert!(seq > last, "each set reports a later record");
        last = seq;
        // The set's own record is the newest: every record made so far.
        assert_eq!(seq, sink.next.load(Ordering::Relaxed));
    }
    assert!(
        sink.evictions.load(Ordering::Relaxed) > 0,
        "the store evicted"
    );
}

#[test]
fn a_batched_caller_is_left_the_work_and_a_plain_one_is_not() {
    let sink = Arc::new(Numbering::default());
    let store = store_with(&sink, 64 << 20);

    let batched = Report::batched();
    store.reporting(&batched).set(&SetRequest::new(b"a", b"1"));
    store.reporting(&batched).set(&SetRequest::new(b"b", b"1"));
    assert!(batched.take_pending());
    assert!(!batched.take_pending(), "taken once");
    assert_eq!(sink.sent_at_once.load(Ordering::Relaxed), 0);

    let plain = Report::default();
    store.reporting(&plain).set(&SetRequest::new(b"c", b"1"));
    store.set(&SetRequest::new(b"d", b"1"));
    assert!(!plain.take_pending());
    assert_eq!(sink.sent_at_once.load(Ordering::Relaxed), 2);
}

#[test]
fn the_attached_sink_and_the_observer_report_into_the_same_report() {
    let sink = Arc::new(Numbering::default());
    let observer = Arc::new(Numbering::default());
    let store = store_with(&sink, 64 << 20);
    assert!(store.observe(observer.clone()));
    // The observer has numbered nothing yet; move it ahead of the sink.
    observer.next.store(100, Ordering::Relaxed);
    let r = Report::default();
    store.reporting(&r).set(&SetRequest::new(b"a", b"1"));
    assert_eq!(r.take_seq(), 101, "the higher of the two numbers");
}
