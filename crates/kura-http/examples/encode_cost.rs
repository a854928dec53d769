//! The cost of kura's codings, for bench/http-encodings.sh: `encode_cost MODE N FILE` runs
//! MODE N times on the bytes of FILE and prints the coded size. MODE: `gzip-L` (compress with
//! gzip at level L, as `[compression] level`), `br-Q` (brotli at quality Q, as `coding = "br"`,
//! `brotli_level`), `gunzip`, `unbr` (decode what `gzip-6` and `br-5` make, as a client that
//! does not accept the stored coding costs), `unbr-gzip-L` (decode what `br-5` makes and gzip
//! it at level L, as a gzip-only client of a br object costs). Run under callgrind, the
//! difference between two values of N gives the instructions of one page.

use kura_http::compress::codec::Encoder;
use kura_http::compress::decode::decode_all;
use kura_http::compress::Coding;

fn encode(mut encoder: Encoder, page: &[u8]) -> Vec<u8> {
    let mut out = encoder.push(page).to_vec();
    out.extend_from_slice(&encoder.finish());
    out
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(mode), Some(n), Some(file)) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: encode_cost MODE N FILE");
        std::process::exit(2);
    };
    let n: usize = n.parse().unwrap_or(1);
    let page = std::fs::read(&file).unwrap_or_else(|e| {
        eprintln!("{file}: {e}");
        std::process::exit(2);
    });
    // What the decoding modes decode, made once (outside the counted repetitions' difference).
    let coded = match mode.as_str() {
        "gunzip" => Some((Coding::Gzip, encode(Encoder::new(6), &page))),
        "unbr" => Some((Coding::Br, encode(Encoder::brotli(5), &page))),
        m if m.starts_with("unbr-gzip-") => Some((Coding::Br, encode(Encoder::brotli(5), &page))),
        _ => None,
    };
    let mut size = 0;
    for _ in 0..n {
        size = match (mode.split_once('-'), &coded) {
            (Some(("unbr", to)), Some((coding, coded))) => {
                let level = to.strip_prefix("gzip-").and_then(|l| l.parse().ok());
                let decoded = decode_all(*coding, coded, u64::MAX).unwrap_or_default();
                encode(Encoder::new(level.unwrap_or(1)), &decoded).len()
            }
            (_, Some((coding, coded))) => {
                decode_all(*coding, coded, u64::MAX).map_or(0, |d| d.len())
            }
            (Some(("gzip", level)), None) => {
                encode(Encoder::new(level.parse().unwrap_or(6)), &page).len()
            }
            (Some(("br", quality)), None) => {
                encode(Encoder::brotli(quality.parse().unwrap_or(5)), &page).len()
            }
            _ => {
                eprintln!("unknown mode {mode}");
                std::process::exit(2);
            }
        };
    }
    println!("{mode} {} -> {size}", page.len());
}
