//! The inspection commands: `lru_crawler` (memcached's crawler's
//! subcommands, its key dumps among them) and `watch` (log streams). Token
//! counts and error replies follow memcached 1.6.18's `proto_text.c`;
//! `lru_crawler mgdump` is newer memcached's (docs/compatibility.md).

use crate::error::Error;
use crate::number::parse_u32;
use crate::parsing::{err, Parsed};
use crate::request::{LruCrawler, Request, WatchKinds};
use crate::tokens::Tokens;

/// `lru_crawler <enable|disable>`, `lru_crawler <crawl|metadump|mgdump>
/// <classes|all|hash>`, `lru_crawler <tocrawl|sleep> <n>`; any other shape
/// is `ERROR`, as in memcached.
pub(crate) fn lru_crawler<'a>(t: &Tokens<'a>) -> Parsed<'a> {
    let crawler = match (t.len(), t.get(1)) {
        (2, b"enable") => LruCrawler::Enable,
        (2, b"disable") => LruCrawler::Disable,
        (3, b"crawl") => LruCrawler::Crawl(t.get(2)),
        (3, b"metadump") => LruCrawler::Metadump(t.get(2)),
        (3, b"mgdump") => LruCrawler::Mgdump(t.get(2)),
        (3, b"tocrawl") => match parse_u32(t.get(2)) {
            Some(n) => LruCrawler::Tocrawl(n),
            None => return err(Error::BadFormat),
        },
        (3, b"sleep") => match parse_u32(t.get(2)) {
            Some(n) => LruCrawler::Sleep(n),
            None => return err(Error::BadFormat),
        },
        _ => return err(Error::UnknownCommand),
    };
    Parsed::Line(Request::LruCrawler(crawler))
}

/// `watch [kind...]`: with no kind, `fetchers`. An unknown kind is `ERROR`
/// (unheard when the line ends with `noreply`, a kind memcached does not
/// know either).
pub(crate) fn watch<'a>(t: &Tokens<'a>) -> Parsed<'a> {
    if t.len() == 1 {
        return Parsed::Line(Request::Watch(WatchKinds::FETCHERS));
    }
    let mut kinds = WatchKinds::default();
    for i in 1..t.len() {
        match WatchKinds::named(t.get(i)) {
            Some(k) => kinds = kinds.with(k),
            None => {
                return Parsed::Error {
                    error: Error::UnknownCommand,
                    swallow: 0,
                    quiet: t.noreply(),
                }
            }
        }
    }
    Parsed::Line(Request::Watch(kinds))
}

#[cfg(test)]
mod tests {
    use crate::{parse, Error, Frame, Limits, LruCrawler, Request, WatchKinds};

    fn request(line: &[u8]) -> Request<'_> {
        match parse(line, &Limits::default()) {
            Frame::Request { request, len } => {
                assert_eq!(len, line.len());
                request
            }
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(line)),
        }
    }

    fn error(line: &[u8]) -> (Error, bool) {
        match parse(line, &Limits::default()) {
            Frame::Error { error, quiet, .. } => (error, quiet),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(line)),
        }
    }

    #[test]
    fn lru_crawler_subcommands() {
        let cases: [(&[u8], LruCrawler<'_>); 7] = [
            (b"lru_crawler enable\r\n", LruCrawler::Enable),
            (b"lru_crawler disable\r\n", LruCrawler::Disable),
            (b"lru_crawler crawl 1,2\r\n", LruCrawler::Crawl(b"1,2")),
            (
                b"lru_crawler metadump all\r\n",
                LruCrawler::Metadump(b"all"),
            ),
            (b"lru_crawler mgdump hash\r\n", LruCrawler::Mgdump(b"hash")),
            (b"lru_crawler tocrawl 5\r\n", LruCrawler::Tocrawl(5)),
            (
                b"lru_crawler sleep 1000001\r\n",
                LruCrawler::Sleep(1_000_001),
            ),
        ];
        for (line, want) in cases {
            assert_eq!(request(line), Request::LruCrawler(want));
        }
    }

    #[test]
    fn lru_crawler_errors_are_memcacheds() {
        for line in [
            &b"lru_crawler\r\n"[..],
            b"lru_crawler foo\r\n",
            b"lru_crawler metadump\r\n",
            b"lru_crawler metadump all extra\r\n",
            b"lru_crawler enable now\r\n",
        ] {
            assert_eq!(error(line), (Error::UnknownCommand, false));
        }
        for line in [
            &b"lru_crawler tocrawl x\r\n"[..],
            b"lru_crawler sleep -1\r\n",
        ] {
            assert_eq!(error(line), (Error::BadFormat, false));
        }
    }

    #[test]
    fn watch_kinds() {
        assert_eq!(request(b"watch\r\n"), Request::Watch(WatchKinds::FETCHERS));
        let all = request(b"watch fetchers mutations evictions connevents\r\n");
        let Request::Watch(k) = all else {
            panic!("{all:?}")
        };
        for kind in [
            WatchKinds::FETCHERS,
            WatchKinds::MUTATIONS,
            WatchKinds::EVICTIONS,
            WatchKinds::CONNEVENTS,
        ] {
            assert!(k.has(kind));
        }
        assert!(!k.has(WatchKinds::SYSEVENTS));
        assert_eq!(error(b"watch foo\r\n"), (Error::UnknownCommand, false));
        assert_eq!(
            error(b"watch fetchers noreply\r\n"),
            (Error::UnknownCommand, true)
        );
    }
}
