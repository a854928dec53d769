//! The probes that try to store one request's page for everyone (poisoning, deception,
//! credentials), and those of broken backends.

use std::time::Duration;

use crate::common::wire::{Conn, RawResponse};
use crate::probes::{exchange, get, get_host, host_in, statuses, verdict, Verdict};
use crate::systems::System;

pub(crate) async fn absolute_form(s: &System) -> Verdict {
    let attack = b"GET http://victim.example/echo/p03/x HTTP/1.1\r\nHost: evil.example\r\n\r\n";
    let first = exchange(s, attack, 1).await;
    let victim = get_host(s, "/echo/p03/x", "victim.example").await;
    let poisoned = victim.as_ref().is_some_and(|r| r.text().contains("evil"));
    let note = format!(
        "attacker got {}; victim got {}",
        first
            .first()
            .map_or("nothing".into(), |r| host_in(&r.text())),
        victim.map_or("nothing".into(), |r| host_in(&r.text()))
    );
    verdict(!poisoned, note)
}

pub(crate) async fn invalid_host(s: &System) -> Verdict {
    let got = get_host(s, "/echo/p04/x", "evil.example/x").await;
    let status = got.map_or(0, |r| r.status);
    verdict(status == 400, format!("Host: evil.example/x -> {status}"))
}

pub(crate) async fn personal(s: &System, id: &str, field: &str, secret: &str) -> Verdict {
    let path = format!("/echo/nocc/{id}/account/profile.css");
    let mine = get(s, &path, &format!("{field}\r\n")).await;
    let theirs = get(s, &path, "").await;
    let leaked = theirs.as_ref().is_some_and(|r| r.text().contains(secret));
    let note = format!(
        "owner {}, other client {}",
        mine.map_or(0, |r| r.status),
        if leaked {
            "got the owner's page"
        } else {
            "got its own"
        }
    );
    verdict(!leaked, note)
}

pub(crate) async fn cookie_page(s: &System) -> Verdict {
    personal(s, "p05", "Cookie: session=alice", "alice").await
}

pub(crate) async fn authorization_page(s: &System) -> Verdict {
    personal(s, "p06", "Authorization: Bearer alice", "alice").await
}

pub(crate) async fn unmatched_304(s: &System) -> Verdict {
    let first = get(s, "/304/p07", "").await;
    let second = get(s, "/304/p07", "").await;
    let status = second.map_or(0, |r| r.status);
    let note = format!("first {}, second {status}", first.map_or(0, |r| r.status));
    verdict(status != 304, note)
}

pub(crate) async fn backend_cl_te(s: &System) -> Verdict {
    let got = get(s, "/clte/p08", "").await;
    let again = get(s, "/clte/p08", "").await;
    let answers: Vec<RawResponse> = [got, again].into_iter().flatten().collect();
    // A truncated body is wrong; refusing the response (5xx) is not.
    let whole = answers.len() == 2
        && answers
            .iter()
            .all(|r| r.text() == "hello world" || r.status >= 500);
    let bodies: Vec<String> = answers
        .iter()
        .map(|r| {
            format!(
                "{} {:?}",
                r.status,
                r.text().chars().take(12).collect::<String>()
            )
        })
        .collect();
    verdict(whole, bodies.join(", "))
}

pub(crate) async fn early_hints(s: &System) -> Verdict {
    let got = exchange(s, b"GET /hints/p12 HTTP/1.1\r\nHost: x\r\n\r\n", 2).await;
    let codes = statuses(&got);
    let whole = got.last().is_some_and(|r| r.text() == "hinted /hints/p12");
    verdict(
        whole,
        if codes.starts_with("103") {
            format!("{codes}: forwarded")
        } else {
            format!("{codes}: dropped")
        },
    )
}

/// A request with an unkeyed `field`, then a plain one: safe when the plain one does not get
/// what the field made.
pub(crate) async fn unkeyed(s: &System, path: &str, field: &str, mark: &str) -> Verdict {
    let poisoned = get(s, path, &format!("{field}\r\n")).await;
    let plain = get(s, path, "").await;
    let hit = plain.as_ref().is_some_and(|r| {
        r.text().contains(mark) || r.field("location").is_some_and(|l| l.contains(mark))
    });
    let note = format!(
        "with field {}, plain {}",
        poisoned.map_or(0, |r| r.status),
        if hit {
            "got the poisoned page"
        } else {
            "got its own"
        }
    );
    verdict(!hit, note)
}

pub(crate) async fn forwarded_host(s: &System) -> Verdict {
    unkeyed(s, "/echo/p29/a", "X-Forwarded-Host: evil.example", "evil").await
}

pub(crate) async fn original_url(s: &System) -> Verdict {
    unkeyed(s, "/override/p30", "X-Original-URL: /admin", "/admin").await
}

pub(crate) async fn method_override(s: &System) -> Verdict {
    unkeyed(
        s,
        "/override/p31",
        "X-HTTP-Method-Override: DELETE",
        "did DELETE",
    )
    .await
}

pub(crate) async fn forwarded_proto(s: &System) -> Verdict {
    unkeyed(s, "/proto/p32", "X-Forwarded-Proto: http", "https://").await
}

pub(crate) async fn backend_hangs(s: &System) -> Verdict {
    let got = get(s, "/hang/p34", "").await;
    let status = got.map_or(0, |r| r.status);
    let after = get(s, "/echo/p34/after", "").await.map_or(0, |r| r.status);
    verdict(
        status >= 500 && after == 200,
        format!("{status}, then {after}"),
    )
}

pub(crate) async fn backend_endless(s: &System) -> Verdict {
    let mut conn = Conn::open(s.addr).await;
    conn.send(b"GET /endless/p35 HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let mut read = 0usize;
    let reading = async {
        while read < 256 * 1024 {
            match conn.read_some().await {
                Some(n) => read += n,
                None => break,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), reading).await;
    drop(conn);
    // The cache lets go of the backend once its client has gone (bounded wait).
    let mut stopped = false;
    for _ in 0..200 {
        if s.backend
            .endless_stopped
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
        {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let note = format!(
        "client read {} KiB; backend stopped: {stopped}",
        read / 1024
    );
    verdict(stopped, note)
}
