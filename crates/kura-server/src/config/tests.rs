//! Tests of the settings: defaults, TOML, the checks.

use super::*;
use crate::tls::VerifyMode;

#[test]
fn defaults_are_valid() {
    ServerConfig::default().validate().unwrap();
}

#[test]
fn a_worker_slice_is_the_kernels_or_in_its_range() {
    for (us, ok) in [
        (0, true),
        (99, false),
        (100, true),
        (100_000, true),
        (100_001, false),
    ] {
        let c = ServerConfig {
            worker_slice_us: us,
            ..Default::default()
        };
        assert_eq!(c.validate().is_ok(), ok, "{us}");
    }
}

#[test]
fn workers_are_pinned_only_to_cpus_the_process_may_use() {
    let allowed = kura_sched::allowed_cpus().unwrap();
    let ok = ServerConfig {
        worker_cpulist: allowed.clone(),
        ..Default::default()
    };
    assert_eq!(ok.validate(), Ok(()));
    let outside = (0..1024).find(|c| !allowed.contains(c)).unwrap();
    let bad = ServerConfig {
        worker_cpulist: vec![allowed[0], outside],
        ..Default::default()
    };
    let e = bad.validate().unwrap_err();
    assert!(
        matches!(e, ConfigError::WorkerCpu(c, _) if c == outside),
        "{e}"
    );
}

#[test]
fn item_size_must_fit_in_half_the_memory() {
    let c = ServerConfig {
        memory_limit: 1,
        ..Default::default()
    };
    assert_eq!(c.validate(), Err(ConfigError::ItemSizeOverHalfMemory));
}

/// memcached's item size test lives twice: in the parser (for the
/// announced length) and in the store (for append/prepend results).
#[test]
fn parser_and_store_size_tests_agree() {
    for cas in [true, false] {
        let c = ServerConfig {
            disable_cas: !cas,
            ..Default::default()
        };
        let limits = c.limits();
        let store = kura_store::SizeLimit {
            item_size_max: c.item_size_max,
            cas,
        };
        for key in [1, 10, 250] {
            for flags in [0, 7] {
                for len in 1_048_400..1_048_530 {
                    assert_eq!(
                        limits.too_large(key, flags, len),
                        !store.fits(key, flags, len)
                    );
                }
            }
        }
    }
}

#[test]
fn toml_uses_the_same_names() {
    let c: ServerConfig =
        toml::from_str("port = 22122\nthreads = 2\nlisten = [\"0.0.0.0\"]").unwrap();
    assert_eq!(c.port, 22122);
    assert_eq!(c.threads, 2);
    assert_eq!(c.listen, vec!["0.0.0.0"]);
    assert!(toml::from_str::<ServerConfig>("bogus = 1").is_err());
    let c: ServerConfig = toml::from_str("worker_loop = \"tasks\"").unwrap();
    assert_eq!(c.worker_loop, WorkerLoop::Tasks);
    assert!(toml::from_str::<ServerConfig>("worker_loop = \"epoll\"").is_err());
}

#[test]
fn tls_section() {
    let c: ServerConfig = toml::from_str(
        "[tls]\nenabled = true\nchain_cert = \"c.pem\"\nkey = \"k.pem\"\nca_cert = \"ca.pem\"\nverify_mode = 2\nmin_version = 3",
    )
    .unwrap();
    assert!(c.tls.enabled);
    assert_eq!(c.tls.verify_mode, VerifyMode::Require);
    assert_eq!(c.tls.min_version, crate::tls::MinVersion::Tls13);
    c.validate().unwrap();
    assert!(toml::from_str::<ServerConfig>("[tls]\nverify_mode = 5").is_err());
}

#[test]
fn tls_needs_its_files() {
    let mut c = ServerConfig::default();
    c.tls.enabled = true;
    assert_eq!(c.validate(), Err(ConfigError::TlsWithoutCert));
    c.tls.chain_cert = Some("c.pem".into());
    c.tls.key = Some("k.pem".into());
    c.validate().unwrap();
    c.tls.verify_mode = VerifyMode::Request;
    assert_eq!(c.validate(), Err(ConfigError::VerifyWithoutCa(1)));
}
