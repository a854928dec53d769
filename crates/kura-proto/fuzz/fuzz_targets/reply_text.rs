//! Fuzzes the text reply framer (`kura_proto::client::text::frame`), as
//! kura-client and kura proxy read a server's replies: any bytes, framed
//! reply after reply, must never panic and must always make progress; two
//! reads must frame what one does; every reply is read back as each kind
//! of command's outcome; and the `VALUE` runs kura proxy takes whole
//! (`client::values`) are what the text framer reads as values (the
//! oracle is shared with `tests/replies.rs`).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/mod.rs"]
mod support;

fuzz_target!(|data: &[u8]| {
    // With the `VALUE` runs kura proxy takes whole.
    support::reply::check_text(data);
});
