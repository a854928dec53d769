//! `get`, `gets`, `gat`, `gats`: one `VALUE` block per hit, then `END`.

use kura_proto::{reply, Get};
use kura_store::GetOptions;

use super::{expiry, Session};
use crate::metrics::{incr, ThreadStats};

/// Counts one key of a retrieval: a get, or a touch when it sets a TTL
/// (`gat`, binary GAT/TOUCH), as a hit or a miss.
pub(super) fn count(st: &ThreadStats, touched: bool, hit: bool) {
    let (cmd, outcome) = match (touched, hit) {
        (true, true) => (&st.cmd_touch, &st.touch_hits),
        (true, false) => (&st.cmd_touch, &st.touch_misses),
        (false, true) => (&st.cmd_get, &st.get_hits),
        (false, false) => (&st.cmd_get, &st.get_misses),
    };
    incr(cmd);
    incr(outcome);
}

// Inlined into `Session::execute`, as the compiler chose to before the
// keyspace moved out (instructions a request: bench/instructions.sh).
#[inline]
pub(super) fn run(s: &mut Session<'_>, g: &Get<'_>) {
    let opts = GetOptions {
        touch: g.touch.map(expiry),
        ..Default::default()
    };
    let resume = s.resume_at();
    if resume > 0 {
        return run_from(s, g, &opts, resume);
    }
    for (i, key) in g.keys().enumerate() {
        // Over UDP memcached answers each key in a message of its own (the
        // last with `END`).
        if i > 0 {
            s.out.end_message();
        }
        if !one(s, key, &opts, g.cas) {
            s.park_rest(i, g.keys().skip(i + 1), opts.touch.is_some());
            return;
        }
    }
    s.out.extend_from_slice(reply::END);
}

/// [`run`] again after waiting for flash: from the key it stopped at
/// (`resume`), whose message is begun already.
#[cold]
#[inline(never)]
fn run_from(s: &mut Session<'_>, g: &Get<'_>, opts: &GetOptions, resume: usize) {
    for (i, key) in g.keys().enumerate().skip(resume) {
        if i > resume {
            s.out.end_message();
        }
        if !one(s, key, opts, g.cas) {
            s.park_rest(i, g.keys().skip(i + 1), opts.touch.is_some());
            return;
        }
    }
    s.out.extend_from_slice(reply::END);
}

/// One key of a retrieval: its `VALUE` block on a hit. False when the
/// key is on flash: the request waits for its read ([`Session::lookup`]).
pub(super) fn one(s: &mut Session<'_>, key: &[u8], opts: &GetOptions, with_cas: bool) -> bool {
    let fresh = super::track::before_read(s, key);
    let Some(hit) = s.lookup(key, opts) else {
        super::track::after_read(s, key, fresh, false);
        return false;
    };
    super::track::after_read(s, key, fresh, hit.is_some());
    count(s.stats, opts.touch.is_some(), hit.is_some());
    super::inspect::fetched(s, key, hit.as_ref());
    if let Some(hit) = hit {
        let cas = with_cas.then_some(hit.cas);
        reply::value_header(
            &mut s.out,
            key,
            hit.item.flags(),
            hit.item.value().len(),
            cas,
        );
        s.out.push_value(&hit.item);
        s.out.extend_from_slice(b"\r\n");
    }
    true
}
