//! `get`, `gets`, `gat`, `gats`: one `VALUE` block per hit, then `END`.

use kura_proto::{reply, Get};
use kura_store::GetOptions;

use super::{expiry, Session};
use crate::metrics::incr;

pub(super) fn run(s: &mut Session<'_>, g: &Get<'_>) {
    let opts = GetOptions {
        touch: g.touch.map(expiry),
        ..Default::default()
    };
    let store = s.store();
    for key in g.keys() {
        let hit = store.get_with(key, &opts);
        let st = s.stats;
        match (opts.touch.is_some(), hit.is_some()) {
            (true, true) => {
                incr(&st.cmd_touch);
                incr(&st.touch_hits);
            }
            (true, false) => {
                incr(&st.cmd_touch);
                incr(&st.touch_misses);
            }
            (false, true) => {
                incr(&st.cmd_get);
                incr(&st.get_hits);
            }
            (false, false) => {
                incr(&st.cmd_get);
                incr(&st.get_misses);
            }
        }
        if let Some(hit) = hit {
            let cas = g.cas.then_some(hit.cas);
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
    }
    s.out.extend_from_slice(reply::END);
}
