//! The probes that try to make a cache and its backend disagree on where a request starts
//! (smuggling), or to get malformed bytes through.

use std::time::Duration;

use crate::common::wire::Conn;
use crate::probes::{exchange, get, seen, statuses, verdict, Verdict};
use crate::systems::System;

/// A smuggling attempt: `attack` (whose body hides `GET /echo/ID/smuggled`), then a plain
/// request on the same connection and on a new one. Safe when the backend never reads the
/// hidden request and no client gets its response.
pub(crate) async fn smuggling(s: &System, id: &str, attack: String) -> Verdict {
    let next = format!("GET /echo/{id}/next HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut answers = exchange(s, format!("{attack}{next}").as_bytes(), 2).await;
    answers.extend(get(s, &format!("/echo/{id}/next"), "").await);
    let smuggled = seen(s, id).iter().any(|r| r.target().contains("smuggled"))
        || answers.iter().any(|r| r.text().contains("smuggled"));
    let note = format!("answers {}", statuses(&answers));
    if smuggled {
        verdict(false, format!("{note}; hidden request served"))
    } else {
        verdict(true, note)
    }
}

pub(crate) fn hidden(id: &str) -> String {
    format!("GET /echo/{id}/smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
}

pub(crate) async fn get_body(s: &System) -> Verdict {
    let h = hidden("p01");
    let attack = format!(
        "GET /echo/p01/a HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{h}",
        h.len()
    );
    let v = smuggling(s, "p01", attack).await;
    let length = seen(s, "p01")
        .iter()
        .any(|r| r.field("content-length").is_some());
    verdict(v.safe, format!("{}; length forwarded: {length}", v.note))
}

pub(crate) async fn head_body(s: &System) -> Verdict {
    let h = hidden("p02");
    let attack = format!(
        "HEAD /echo/p02/a HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{h}",
        h.len()
    );
    let mut conn = Conn::open(s.addr).await;
    conn.send(attack.as_bytes()).await;
    let head = conn.response(true).await;
    let next = get(s, "/echo/p02/next", "").await;
    let smuggled = seen(s, "p02")
        .iter()
        .any(|r| r.target().contains("smuggled"))
        || next.as_ref().is_some_and(|r| r.text().contains("smuggled"));
    let note = format!(
        "HEAD {}",
        head.map_or("no answer".into(), |r| r.status.to_string())
    );
    verdict(!smuggled, note)
}

pub(crate) async fn crlf_lf(s: &System) -> Verdict {
    let h = hidden("p09");
    let attack = format!(
        "GET /echo/p09/a HTTP/1.1\r\nHost: x\r\n\nPOST /echo/p09/b HTTP/1.1\r\nHost: x\r\n\
         Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{h}"
    );
    smuggling(s, "p09", attack).await
}

pub(crate) async fn bad_chunk(s: &System) -> Verdict {
    let got = exchange(
        s,
        b"POST /echo/p10/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        1,
    )
    .await;
    let status = got.first().map_or(0, |r| r.status);
    verdict((400..500).contains(&status), statuses(&got))
}

pub(crate) async fn bare_lf(s: &System) -> Verdict {
    let got = exchange(s, b"GET /echo/p11/a HTTP/1.1\nHost: x\n\n", 1).await;
    let status = got.first().map_or(0, |r| r.status);
    verdict(status == 200 || status == 400, statuses(&got))
}

pub(crate) async fn many_fields(s: &System) -> Verdict {
    let fields: String = (0..300).map(|i| format!("X-F{i}: v\r\n")).collect();
    let got = get(s, "/echo/p13/a", &fields).await;
    let status = got.map_or(0, |r| r.status);
    verdict(status == 200, format!("{status}"))
}

pub(crate) async fn obfuscated(s: &System, id: &str, fields: &str) -> Verdict {
    let h = hidden(id);
    let body = format!("0\r\n\r\n{h}");
    let attack = format!(
        "POST /echo/{id}/a HTTP/1.1\r\nHost: x\r\n{fields}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    smuggling(s, id, attack).await
}

pub(crate) async fn cl_te(s: &System) -> Verdict {
    // The front end reads 6 bytes by length ("0\r\n\r\nG"), the back by chunks: the G prefixes
    // the next request.
    let attack = "POST /echo/p14/a HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\
                  Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nG"
        .to_owned();
    let v = smuggling(s, "p14", attack).await;
    let prefixed = seen(s, "p14").iter().any(|r| r.line().starts_with("GGET"));
    verdict(v.safe && !prefixed, v.note)
}

pub(crate) async fn te_cl(s: &System) -> Verdict {
    let h = hidden("p15");
    let chunk = format!("{:x}\r\n{h}\r\n0\r\n\r\n", h.len());
    let attack = format!(
        "POST /echo/p15/a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\
         Transfer-Encoding: chunked\r\n\r\n{chunk}"
    );
    smuggling(s, "p15", attack).await
}

pub(crate) async fn te_xchunked(s: &System) -> Verdict {
    obfuscated(s, "p16", "Transfer-Encoding: xchunked\r\n").await
}

pub(crate) async fn te_space_colon(s: &System) -> Verdict {
    obfuscated(s, "p17", "Transfer-Encoding : chunked\r\n").await
}

pub(crate) async fn te_tab(s: &System) -> Verdict {
    obfuscated(s, "p18", "Transfer-Encoding:\tchunked\r\n").await
}

pub(crate) async fn te_two_lines(s: &System) -> Verdict {
    obfuscated(
        s,
        "p19",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
    )
    .await
}

pub(crate) async fn te_obs_fold(s: &System) -> Verdict {
    obfuscated(s, "p20", "Transfer-Encoding:\r\n chunked\r\n").await
}

pub(crate) async fn te_http10(s: &System) -> Verdict {
    let h = hidden("p21");
    let body = format!("0\r\n\r\n{h}");
    let attack = format!(
        "POST /echo/p21/a HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\
         Content-Length: {}\r\nConnection: keep-alive\r\n\r\n{body}",
        body.len()
    );
    smuggling(s, "p21", attack).await
}

pub(crate) async fn lengths(s: &System, id: &str, fields: &str) -> Verdict {
    let h = hidden(id);
    let attack = format!("POST /echo/{id}/a HTTP/1.1\r\nHost: x\r\n{fields}\r\n{h}");
    smuggling(s, id, attack).await
}

pub(crate) async fn cl_cl(s: &System) -> Verdict {
    lengths(s, "p22", "Content-Length: 0\r\nContent-Length: 39\r\n").await
}

pub(crate) async fn cl_list(s: &System) -> Verdict {
    lengths(s, "p23", "Content-Length: 0, 39\r\n").await
}

pub(crate) async fn cl_plus(s: &System) -> Verdict {
    lengths(s, "p24", "Content-Length: +0\r\n").await
}

/// A request with a malformed field: safe when refused, or when the backend never sees the
/// raw bytes.
pub(crate) async fn bad_field(s: &System, id: &str, field: &[u8]) -> Verdict {
    let mut request = format!("GET /echo/{id}/a HTTP/1.1\r\nHost: x\r\n").into_bytes();
    request.extend_from_slice(field);
    request.extend_from_slice(b"\r\n\r\n");
    let got = exchange(s, &request, 1).await;
    let raw = seen(s, id).iter().any(|r| {
        r.head.contains('\0')
            || r.head
                .lines()
                .any(|l| l.trim_end_matches('\r').contains('\r'))
            || r.head.contains("\n ")
    });
    verdict(
        !raw,
        format!("{}; raw bytes forwarded: {raw}", statuses(&got)),
    )
}

pub(crate) async fn obs_fold(s: &System) -> Verdict {
    bad_field(s, "p25", b"X-A: a\r\n folded").await
}

pub(crate) async fn nul_field(s: &System) -> Verdict {
    bad_field(s, "p26", b"X-A: a\0b").await
}

pub(crate) async fn cr_field(s: &System) -> Verdict {
    bad_field(s, "p27", b"X-A: a\rb").await
}

pub(crate) async fn huge_head(s: &System) -> Verdict {
    let fields = format!("X-Big: {}\r\n", "a".repeat(200 * 1024));
    let got = get(s, "/echo/p28/a", &fields).await;
    let status = got.map_or(0, |r| r.status);
    verdict((400..500).contains(&status), format!("{status}"))
}

pub(crate) async fn slow_head(s: &System) -> Verdict {
    let mut conn = Conn::open(s.addr).await;
    for byte in b"GET /echo/p33/a HTTP/1.1\r\nHost: x\r\n\r\n" {
        conn.send(std::slice::from_ref(byte)).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = conn.response(false).await;
    let right = got
        .as_ref()
        .is_some_and(|r| r.text().starts_with("page for /echo/p33/a"));
    verdict(
        right,
        got.map_or("no answer".into(), |r| r.status.to_string()),
    )
}

/// An upgrade request the backend refuses (it answers 200, not 101), with another request
/// behind it in the same write. A cache that pipes upgrades must read nothing after a refused
/// one as HTTP (issue 42: kura passes the refusal and ends the connection). One that does not
/// pipe them (Varnish's default VCL, nginx without `proxy_set_header Upgrade`) answers the
/// next request as any pipelined one: not an attack there, so this is a behaviour probe.
pub(crate) async fn refused_upgrade(s: &System) -> Verdict {
    let attack = format!(
        "GET /echo/p40/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n{}",
        hidden("p40")
    );
    let v = smuggling(s, "p40", attack).await;
    let note = if v.safe {
        format!("{}; nothing read after the refusal", v.note)
    } else {
        format!(
            "{}; the next request was answered",
            v.note.replace("; hidden request served", "")
        )
    };
    verdict(v.safe, note)
}
