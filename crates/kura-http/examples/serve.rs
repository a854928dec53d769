//! `kura http` alone, for measurements that build only this crate
//! (bench/http-instructions.sh): `serve CONFIG.toml` runs the proxy of that file until SIGTERM,
//! as `kura http --config CONFIG.toml` does.

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: serve CONFIG.toml");
        return ExitCode::from(2);
    };
    let args = kura_http::HttpArgs {
        config: Some(path.into()),
        ..Default::default()
    };
    let config = match kura_http::Config::load(&args) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("serve: {error}");
            return ExitCode::from(2);
        }
    };
    match kura_http::run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("serve: {error}");
            ExitCode::FAILURE
        }
    }
}
