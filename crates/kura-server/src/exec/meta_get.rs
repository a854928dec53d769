//! `mg`: a lookup whose flags choose what comes back (value, CAS, flags,
//! TTL, size, key, opaque...) and what happens to the item (touch, vivify
//! on miss, recache token). Like memcached, flags act in request order: a
//! `t` reports the TTL as set by the `T` or `N` before it, and `R` sees the
//! TTL as `T` left it only when it comes after `T`. Return flags come back
//! in request order, then memcached's Z, X and W markers.

use kura_proto::{reply, MetaGet};
use kura_store::GetOptions;

use super::{expiry, flag_position, meta_status, ttl_remaining, Session};
use crate::metrics::incr;

pub(super) fn run(s: &mut Session<'_>, m: &MetaGet<'_>) {
    let f = &m.flags;
    let (t_at, n_at, r_at) = (
        flag_position(f, b'T'),
        flag_position(f, b'N'),
        flag_position(f, b'R'),
    );
    // A created entry ends with the TTL of the later of `N` and `T`.
    let vivify = match (f.vivify, f.ttl) {
        (Some(_), Some(t)) if t_at > n_at => Some(expiry(t)),
        (n, _) => n.map(expiry),
    };
    let opts = GetOptions {
        touch: f.ttl.map(expiry),
        no_bump: f.no_bump,
        vivify,
        recache: f.recache.map(expiry),
        recache_after_touch: r_at > t_at,
        stale_token: true,
    };
    let touching = opts.touch.is_some();
    let fresh = super::track::before_read(s, &m.key.bytes);
    let Some(hit) = s.lookup(&m.key.bytes, &opts) else {
        // On flash: it runs again once read.
        super::track::after_read(s, &m.key.bytes, fresh, false);
        return;
    };
    incr(&s.stats.cmd_meta);
    super::track::after_read(s, &m.key.bytes, fresh, hit.is_some());
    super::inspect::fetched(s, &m.key.bytes, hit.as_ref());
    let st = s.stats;
    if touching {
        incr(&st.cmd_touch);
    } else {
        incr(&st.cmd_get);
    }
    let Some(hit) = hit else {
        incr(if touching {
            &st.touch_misses
        } else {
            &st.get_misses
        });
        if f.quiet {
            return;
        }
        meta_status(&mut s.out, b"EN", f, &m.key);
        return;
    };
    incr(if touching {
        &st.touch_hits
    } else {
        &st.get_hits
    });
    let now = s.store().now();
    let value = hit.item.value();
    let o = &mut s.out;
    if f.value {
        o.extend_from_slice(b"VA ");
        reply::put_u64(o, value.len() as u64);
    } else {
        o.extend_from_slice(b"HD");
    }
    // The TTL as the flags so far left it (a created entry starts with none).
    let mut exptime = if hit.created { 0 } else { hit.exptime_before };
    for fl in f.iter() {
        match fl.code {
            b'T' => exptime = opts.touch.map_or(0, |t| t.deadline(now)),
            b'N' if hit.created => exptime = f.vivify.map_or(0, |n| expiry(n).deadline(now)),
            b's' => reply::meta_num(o, b's', value.len() as u64),
            b't' => reply::meta_signed(o, b't', ttl_remaining(exptime, now)),
            b'c' => reply::meta_num(o, b'c', hit.cas),
            b'f' => reply::meta_num(o, b'f', u64::from(hit.item.flags())),
            b'l' => reply::meta_num(o, b'l', u64::from(now.saturating_sub(hit.last_access))),
            b'h' => reply::meta_num(o, b'h', u64::from(hit.fetched)),
            b'O' => reply::meta_opaque(o, fl.token),
            b'k' => reply::meta_key(o, hit.item.key(), hit.binary_key),
            _ => {}
        }
    }
    if hit.token_sent {
        reply::meta_char(o, b'Z');
    }
    if hit.stale {
        reply::meta_char(o, b'X');
    }
    if hit.won {
        reply::meta_char(o, b'W');
    }
    o.extend_from_slice(b"\r\n");
    if f.value {
        o.push_value(&hit.item);
        o.extend_from_slice(b"\r\n");
    }
}
