//! Fuzzes the binary reply framer (`kura_proto::client::binary::frame`), as
//! kura-client and kura proxy read a server's replies: any bytes, framed
//! reply after reply, must never panic and must always make progress; two
//! reads must frame what one does; every reply is read back as each kind
//! of command's outcome (the oracle is shared with `tests/replies.rs`).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/mod.rs"]
mod support;

fuzz_target!(|data: &[u8]| {
    support::reply::check_stream(kura_proto::client::binary::frame, data);
});
