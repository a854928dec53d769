//! In-process reads of a fixed-length table on one thread (`get_buf`, into
//! the caller's buffer, like Tokyo Cabinet's `tcftest read -wb`), for
//! `bench/table.sh` (side by side with Tokyo Cabinet's `tcftest read`).
//!
//!   read_bench FILE|mem RECORDS WIDTH READS [seq|rnd|batch]
//!
//! Fills RECORDS records of WIDTH bytes into a table in FILE (created if
//! needed; `mem`: an in-memory table), then times READS reads of ids in
//! order (`seq`, as `tcftest read` does), at random one at a time (`rnd`),
//! or at random 16 per `get_many` call (`batch`), and prints reads/s: the
//! median of three timed runs after an untimed pass over every record.
//! Loops of reads go through a `Reader`, as a caller's loop should.

use std::time::Instant;

use kura_table::{Durability, Table, TableOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_string());
    let file = arg(1, "/tmp/kura-read-bench.ktbl");
    let records: u64 = arg(2, "1000000").parse().expect("RECORDS");
    let width: u32 = arg(3, "8").parse().expect("WIDTH");
    let reads: u64 = arg(4, "20000000").parse().expect("READS");
    let mode = arg(5, "rnd");
    let path = (file != "mem").then(|| std::path::PathBuf::from(&file));
    let t = Table::open(
        path.as_deref(),
        TableOptions {
            width,
            max: records,
            durability: Durability::No,
        },
    )
    .expect("open");
    if t.len() < records {
        let value = vec![b'x'; width as usize];
        for id in 1..=records {
            t.put(id, &value, 0).expect("put");
        }
    }
    let mut buf = vec![0u8; t.buf_len()];
    // One untimed pass maps every page; then three timed runs, the median
    // printed (the steady state, not the first touch of each page).
    ordered_reads(&t, records, records, &mut buf);
    let mut rates: Vec<f64> = (0..3)
        .map(|_| {
            let start = Instant::now();
            let found = match mode.as_str() {
                "rnd" => random_reads(&t, records, reads, &mut buf),
                "batch" => batched_reads(&t, records, reads),
                _ => ordered_reads(&t, records, reads, &mut buf),
            };
            let secs = start.elapsed().as_secs_f64();
            assert_eq!(found, reads, "every id is present");
            reads as f64 / secs
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    println!("{:.0}", rates[1]);
}

/// Reads of random ids (xorshift64, scaled to 1..=records without a
/// division); returns how many were found.
#[inline(always)]
fn random_reads(t: &Table, records: u64, reads: u64, buf: &mut [u8]) -> u64 {
    let t = t.reader();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut found = 0;
    for _ in 0..reads {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let id = (((x >> 32) * records) >> 32) + 1;
        if let Ok(Some(_)) = t.get_buf(id, buf) {
            found += 1;
        }
    }
    found
}

/// The same random ids, asked 16 at a time with `get_many` (a multi-get).
fn batched_reads(t: &Table, records: u64, reads: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut found = 0;
    let mut ids = [0u64; 16];
    let mut buf = Vec::new();
    for _ in 0..reads / 16 {
        for id in ids.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *id = (((x >> 32) * records) >> 32) + 1;
        }
        t.get_many(&ids, &mut buf, |_, got| found += u64::from(got.is_some()));
    }
    found
}

/// Reads of ids 1, 2, ... in order, wrapping around.
fn ordered_reads(t: &Table, records: u64, reads: u64, buf: &mut [u8]) -> u64 {
    let t = t.reader();
    let mut found = 0;
    let mut id = 0;
    for _ in 0..reads {
        id = if id == records { 1 } else { id + 1 };
        if let Ok(Some(_)) = t.get_buf(id, buf) {
            found += 1;
        }
    }
    found
}
