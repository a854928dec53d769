//! `delete <key> [noreply]`.

use kura_proto::{reply, Delete};

use super::Session;
use crate::metrics::incr;

pub(super) fn run(s: &mut Session<'_>, d: &Delete<'_>) {
    if s.writes().delete(d.key) {
        incr(&s.stats.delete_hits);
        s.reply(d.noreply, reply::DELETED);
    } else {
        incr(&s.stats.delete_misses);
        s.reply(d.noreply, reply::NOT_FOUND);
    }
}
