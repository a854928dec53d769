//! The value format, measured: postcard of the row's values (what the
//! crate writes: a tag byte a column, the record built from them with
//! serde), postcard of the struct, bincode 2 (serde, standard
//! configuration) and JSON, on seed 000's rows (a user item of five
//! columns) and on an index entry of 1,000 primary keys.
//! Prints bytes and nanoseconds to encode and to decode, medians of
//! ROUNDS (default 7) rounds of 10,000 rows each.
//!
//! cargo run --release -p kura-record --example formats [ROUNDS]

use std::hint::black_box;
use std::time::Instant;

use kura_record::Value;
use serde::{Deserialize, Serialize};

const NAMES: [&str; 5] = ["id", "user_id", "item_id", "count", "name"];

fn row_of(r: &UserItem) -> Vec<Value> {
    vec![
        Value::Int(r.id),
        Value::Int(r.user_id),
        Value::Int(r.item_id),
        Value::Int(r.count),
        Value::Text(r.name.clone()),
    ]
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct UserItem {
    id: i64,
    user_id: i64,
    item_id: i64,
    count: i64,
    name: String,
}

type Enc = fn(&UserItem) -> Vec<u8>;
type Dec = fn(&[u8]) -> UserItem;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(7);
    let rows: Vec<UserItem> = (0..10_000i64)
        .map(|i| UserItem {
            id: 1_000_000 + i,
            user_id: 123_456,
            item_id: i % 997,
            count: i * 3,
            name: format!("item number {i} of the game"),
        })
        .collect();
    let formats: [(&str, Enc, Dec); 4] = [
        (
            "postcard-row",
            |r| postcard::to_stdvec(&row_of(r)).expect("encode"),
            |b| {
                let row: Vec<Value> = postcard::from_bytes(b).expect("decode");
                kura_record::record_from_row(&NAMES, &row).expect("record")
            },
        ),
        (
            "postcard",
            |r| postcard::to_stdvec(r).expect("encode"),
            |b| postcard::from_bytes(b).expect("decode"),
        ),
        (
            "bincode2",
            |r| bincode::serde::encode_to_vec(r, bincode::config::standard()).expect("encode"),
            |b| {
                bincode::serde::decode_from_slice(b, bincode::config::standard())
                    .expect("decode")
                    .0
            },
        ),
        (
            "json",
            |r| serde_json::to_vec(r).expect("encode"),
            |b| serde_json::from_slice(b).expect("decode"),
        ),
    ];
    println!(
        "# format\trow bytes (mean)\tencode ns/row\tdecode ns/row\tindex entry of 1,000 ids, bytes"
    );
    let ids: Vec<i64> = (1_000_000..1_001_000).collect();
    for (name, enc, dec) in formats {
        let encoded: Vec<Vec<u8>> = rows.iter().map(enc).collect();
        assert!(rows.iter().zip(&encoded).all(|(r, b)| &dec(b) == r));
        let mean = encoded.iter().map(Vec::len).sum::<usize>() as f64 / rows.len() as f64;
        let (mut e, mut d) = (Vec::new(), Vec::new());
        // One untimed round first: the first format measured would pay
        // the warm-up (page faults, caches) otherwise.
        for round in 0..=rounds {
            let t = Instant::now();
            for r in &rows {
                black_box(enc(black_box(r)));
            }
            e.push(t.elapsed().as_nanos() as f64 / rows.len() as f64);
            let t = Instant::now();
            for b in &encoded {
                black_box(dec(black_box(b)));
            }
            d.push(t.elapsed().as_nanos() as f64 / rows.len() as f64);
            if round == 0 {
                e.clear();
                d.clear();
            }
        }
        let index = match name {
            "postcard" | "postcard-row" => postcard::to_stdvec(&ids).expect("encode").len(),
            "bincode2" => bincode::serde::encode_to_vec(&ids, bincode::config::standard())
                .expect("encode")
                .len(),
            _ => serde_json::to_vec(&ids).expect("encode").len(),
        };
        println!(
            "{name}\t{mean:.1}\t{:.0}\t{:.0}\t{index}",
            median(&mut e),
            median(&mut d)
        );
    }
}
