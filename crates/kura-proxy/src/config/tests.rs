//! The configuration's parsing and checks.

use super::*;

#[test]
fn quick_start_makes_one_ketama_pool() {
    let args = ProxyArgs {
        pool: Some("127.0.0.1:11211,127.0.0.1:11212".into()),
        ..Default::default()
    };
    let c = Config::load(&args).unwrap();
    assert_eq!(c.pools.len(), 1);
    assert_eq!(c.pools[0].ring.as_ref().unwrap().kind(), Kind::Libmemcached);
    assert_eq!(c.listen, "127.0.0.1:11311");
}

#[test]
fn file_pools_routes_and_errors() {
    let file: FileConfig = toml::from_str(
        r#"
        default_pool = "main"
        journal_dir = "/var/lib/kura-proxy"
        [pools.main]
        servers = ["127.0.0.1:1:2 a", "127.0.0.1:2:1 b"]
        ring = "twemproxy"
        hash = "murmur"
        [pools.users]
        servers = ["127.0.0.1:3"]
        [[routes]]
        prefix = "u:"
        pool = "users"
        [health]
        down_reply = "miss"
        journal_overflow = "keep-out"
        "#,
    )
    .unwrap();
    let c = Config::build(&ProxyArgs::default(), file).unwrap();
    assert_eq!(c.pools[c.default_pool].name, "main");
    assert_eq!((c.routes[0].read, c.routes[0].write), (1, 1));
    assert_eq!(c.health.down_reply, DownReply::Miss);
    assert!(toml::from_str::<FileConfig>("[pools.x]\nservers=[]\nbogus=1").is_err());
    let bad = |t: &str| Config::build(&ProxyArgs::default(), toml::from_str(t).unwrap());
    // keep-out needs a journal file for the operator to remove.
    let keep_out = "[pools.a]\nservers=[\"h:1\"]\n[health]\njournal_overflow=\"keep-out\"\n";
    let e = bad(keep_out).unwrap_err().to_string();
    assert!(e.contains("needs a journal directory"), "{e}");
    let args = ProxyArgs {
        journal_dir: Some("/var/lib/kura-proxy".into()),
        ..ProxyArgs::default()
    };
    assert!(Config::build(&args, toml::from_str(keep_out).unwrap()).is_ok());
    assert!(bad("[pools.a]\nservers=[\"h:1\"]\nring=\"nope\"").is_err());
    assert!(bad("[pools.a]\nservers=[\"h:1\"]\nhash=\"md5\"").is_err());
    assert!(bad("[pools.a]\nservers=[\"h:1\"]\n[[routes]]\nprefix=\"x\"\npool=\"b\"").is_err());
    assert!(bad("").is_err());
    let repl = "[pools.a]\nservers=[\"h:1\"]\n[pools.b]\nservers=[\"h:2\"]\n[pools.r]\nreplicas=[\"a\",\"b\"]\nwrite=\"majority\"\n";
    let c = bad(&format!("default_pool=\"r\"\n{repl}")).unwrap();
    assert_eq!(c.pools[2].replicas, vec![0, 1]);
    assert_eq!(c.pools[2].write, WriteMode::Majority);
    assert!(bad(&format!("{repl}[pools.rr]\nreplicas=[\"r\"]\n")).is_err());
    assert!(bad("[pools.a]\nservers=[\"h:1\"]\nreplicas=[\"a\"]").is_err());
    // rejoin: on pools of servers; a replicated pool's is its replicas'.
    let caught = repl.replace(
        "servers=[\"h:2\"]\n",
        "servers=[\"h:2\"]\nrejoin=\"caught-up\"\n",
    );
    let c = bad(&format!("default_pool=\"r\"\n{caught}")).unwrap();
    assert_eq!(
        (c.pools[0].rejoin, c.pools[1].rejoin),
        (Rejoin::Journal, Rejoin::CaughtUp)
    );
    assert!(bad(&format!("{repl}rejoin=\"caught-up\"\n")).is_err());
    assert!(toml::from_str::<FileConfig>("[pools.x]\nservers=[]\nrejoin=\"later\"").is_err());
}

#[test]
fn hash_tags_hash_stops_and_twemproxys_distributions() {
    let file: FileConfig = toml::from_str(
        r#"
        default_pool = "t"
        [pools.t]
        servers = ["h:1:2", "h:2", "h:3"]
        ring = "modula"
        hash = "md5"
        hash_tag = "{}"
        [pools.s]
        servers = ["h:1", "h:2", "h:3"]
        hash_stop = "|#|"
        [pools.r]
        servers = ["h:1", "h:2"]
        ring = "random"
        "#,
    )
    .unwrap();
    let c = Config::build(&ProxyArgs::default(), file).unwrap_or_else(|e| panic!("{e}"));
    let ring = |n: &str| {
        c.pools
            .iter()
            .find(|p| p.name == n)
            .unwrap()
            .ring
            .clone()
            .unwrap()
    };
    let t = ring("t");
    assert_eq!(t.kind(), Kind::Modula(Hash::Md5));
    assert_eq!(t.index_for(b"a{7}"), t.index_for(b"zz{7}zz"));
    let s = ring("s");
    assert_eq!(s.index_for(b"user:1|#|a"), s.index_for(b"user:1"));
    assert_eq!(ring("r").kind(), Kind::Random);
    for bad in [
        "[pools.a]\nservers = [\"h:1\"]\nhash_tag = \"{\"\n",
        "[pools.a]\nservers = [\"h:1\"]\nhash_tag = \"{}\"\nhash_stop = \"|\"\n",
        "[pools.a]\nservers = [\"h:1\"]\nring = \"ch3\"\nhash = \"md5\"\n",
    ] {
        let file: FileConfig = toml::from_str(bad).unwrap();
        assert!(Config::build(&ProxyArgs::default(), file).is_err(), "{bad}");
    }
}
