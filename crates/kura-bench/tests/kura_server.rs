//! `kura bench` against kura's own server, in this process, in the text and
//! meta protocols (kura's binary protocol is not there yet).

mod common;

use common::{bench, Kura};

#[test]
fn kura_serves_a_verified_mix_in_text_and_meta() {
    for proto in ["text", "meta"] {
        let kura = Kura::start();
        let report = bench(&format!(
            "-s {} -P {proto} -c 4 --pipeline 4 --keys 300 --prefill -n 2001 --value-size 16-2000",
            kura.addr
        ));
        assert_eq!(report.prefill.as_ref().map(|p| p.sets), Some(300));
        let run = &report.runs[0];
        assert_eq!(run.errors, 0, "{proto}: {:?}", run.error_samples);
        assert_eq!(run.requests, 2001, "{proto}");
        assert_eq!((run.hits, run.misses), (run.gets, 0), "{proto}");
        assert_eq!(report.errors(), 0);
    }
}

#[test]
fn kura_counts_misses_multi_gets_and_quiet_sets() {
    for proto in ["text", "meta"] {
        let kura = Kura::start();
        let empty = bench(&format!(
            "-s {} -P {proto} -c 2 --ratio 1:0 --multiget 5 -n 100",
            kura.addr
        ));
        let run = &empty.runs[0];
        assert_eq!((run.errors, run.requests), (0, 100), "{proto}");
        assert_eq!((run.hits, run.misses), (0, 500), "{proto}");

        let quiet = bench(&format!(
            "-s {} -P {proto} -c 1 --keys 20 --ratio 0:1 --noreply -n 1000",
            kura.addr
        ));
        let run = &quiet.runs[0];
        assert_eq!((run.errors, run.sets), (0, 1000), "{proto}");

        let gets = bench(&format!(
            "-s {} -P {proto} -c 2 --keys 20 --ratio 1:0 --multiget 4 --rate 5000 -n 200",
            kura.addr
        ));
        let run = &gets.runs[0];
        assert_eq!((run.errors, run.requests), (0, 200), "{proto}");
        assert_eq!(
            (run.hits, run.misses),
            (800, 0),
            "{proto}: quiet sets were stored"
        );
    }
}
