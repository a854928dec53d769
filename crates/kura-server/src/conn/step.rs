//! Framing and running one request, the same in both loops (task.rs's task
//! per connection, direct/'s readiness loop).

use kura_proto::binary::{self, BinFrame};
use kura_proto::{parse, Frame};

use super::Wire;
use crate::config::Protocol;
use crate::exec::{Session, Step};
use crate::latency::Family;
use crate::shared::Shared;

/// Frames and runs the request at the front of `buf`; also says which
/// latency family it counts in.
pub(super) fn step_one(
    session: &mut Session<'_>,
    wire: Wire,
    buf: &[u8],
    limits: &kura_proto::Limits,
    addr: &str,
) -> (Step, Family) {
    match wire {
        Wire::Text if !session.authenticated => (session.step_auth(buf), Family::Other),
        Wire::Text => {
            let frame = parse(buf, limits);
            let family = Family::of_text(&frame);
            if let Frame::Request { len, .. } = &frame {
                if session.shared.verbosity() >= 2 {
                    log_request(addr, &buf[..*len]);
                }
            }
            (session.step(&frame), family)
        }
        Wire::Binary => {
            let frame = binary::parse(buf, limits);
            let family = Family::of_binary(&frame);
            if let BinFrame::Request { request, .. } = &frame {
                if session.shared.verbosity() >= 2 {
                    tracing::debug!("<{addr} binary opcode 0x{:02x}", request.opcode);
                }
            }
            (session.step_binary(frame), family)
        }
    }
}

/// The protocol of a connection under `-B auto`, from its first byte.
pub(super) fn wire_of(first: Option<&u8>) -> Wire {
    if first == Some(&kura_proto::binary::REQUEST_MAGIC) {
        Wire::Binary
    } else {
        Wire::Text
    }
}

/// The protocol every connection speaks, or `None` under `-B auto`.
pub(super) fn configured_wire(shared: &Shared) -> Option<Wire> {
    match shared.config.effective_protocol() {
        Protocol::Ascii => Some(Wire::Text),
        Protocol::Binary => Some(Wire::Binary),
        Protocol::Auto => None,
    }
}

fn log_request(addr: &str, frame: &[u8]) {
    let line = frame.split(|&b| b == b'\n').next().unwrap_or_default();
    tracing::debug!("<{addr} {}", String::from_utf8_lossy(line).trim_end());
}
