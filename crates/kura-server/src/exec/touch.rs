//! `touch <key> <exptime> [noreply]`.

use kura_proto::{reply, Touch};

use super::{expiry, Session};
use crate::metrics::incr;

pub(super) fn run(s: &mut Session<'_>, t: &Touch<'_>) {
    incr(&s.stats.cmd_touch);
    if s.writes().touch(t.key, expiry(t.exptime)) {
        incr(&s.stats.touch_hits);
        s.reply(t.noreply, reply::TOUCHED);
    } else {
        incr(&s.stats.touch_misses);
        s.reply(t.noreply, reply::NOT_FOUND);
    }
}
