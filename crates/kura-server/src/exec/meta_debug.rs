//! `me`: a human-readable dump of an item's metadata, without touching it.

use std::io::Write;

use kura_proto::{reply, MetaDebug};
use kura_store::GetOptions;

use super::Session;
use crate::metrics::incr;

pub(super) fn run(s: &mut Session<'_>, m: &MetaDebug<'_>) {
    let opts = GetOptions {
        no_bump: true,
        ..Default::default()
    };
    // A value on flash is read by the tier's reader threads (back into
    // RAM) while the request waits (exec/flash.rs).
    let Some(hit) = s.lookup(&m.key.bytes, &opts) else {
        return;
    };
    incr(&s.stats.cmd_meta);
    let Some(hit) = hit else {
        s.out.extend_from_slice(reply::EN);
        return;
    };
    let now = s.store().now();
    let o = &mut s.out;
    o.extend_from_slice(b"ME ");
    if hit.binary_key {
        reply::put_base64(o, hit.item.key());
    } else {
        o.extend_from_slice(hit.item.key());
    }
    // memcached prints exp as now minus the deadline (negative while live).
    let exp = if hit.exptime == 0 {
        -1
    } else {
        i64::from(now) - i64::from(hit.exptime)
    };
    // Writing into a Vec cannot fail.
    let _ = write!(
        o,
        " exp={} la={} cas={} fetch={} cls=1 size={}\r\n",
        exp,
        now.saturating_sub(hit.last_access),
        hit.cas,
        if hit.fetched { "yes" } else { "no" },
        hit.item.heap_size()
    );
}
