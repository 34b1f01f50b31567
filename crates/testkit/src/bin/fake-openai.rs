//! `fake-openai`: the scripted model server as a program, so Herald can be
//! tried without a real model. Every message is answered `echo: TEXT`.
//!
//! Usage: `fake-openai [--listen 127.0.0.1:8089]`; prints the base URL to
//! put in `llm.base_url`, then serves until Ctrl-C.

use std::net::SocketAddr;
use std::process::ExitCode;

use herald_testkit::ScriptedModel;

const USAGE: &str = "usage: fake-openai [--listen ADDR]   (default 127.0.0.1:8089)";

fn listen_address(mut args: impl Iterator<Item = String>) -> Result<SocketAddr, String> {
    let mut listen = "127.0.0.1:8089".to_owned();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an address such as 127.0.0.1:8089")?,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => match other.strip_prefix("--listen=") {
                Some(value) => listen = value.to_owned(),
                None => return Err(format!("unknown argument `{other}`\n{USAGE}")),
            },
        }
    }
    listen
        .parse()
        .map_err(|_| format!("--listen `{listen}` is not an address such as 127.0.0.1:8089"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let addr = match listen_address(std::env::args().skip(1)) {
        Ok(addr) => addr,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let model = match ScriptedModel::start_on(addr).await {
        Ok(model) => model,
        Err(err) => {
            eprintln!("fake-openai: cannot listen on {addr}: {err}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", model.base_url());
    if let Err(err) = tokio::signal::ctrl_c().await {
        eprintln!("fake-openai: cannot wait for Ctrl-C: {err}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_listen_address() {
        for (args, expected) in [
            (vec![], Ok("127.0.0.1:8089")),
            (vec!["--listen", "127.0.0.1:9000"], Ok("127.0.0.1:9000")),
            (vec!["--listen=0.0.0.0:1"], Ok("0.0.0.0:1")),
            (vec!["--listen"], Err("needs an address")),
            (vec!["--listen", "localhost"], Err("is not an address")),
            (vec!["--port", "1"], Err("unknown argument `--port`")),
        ] {
            let result = listen_address(args.iter().map(|a| a.to_string()));
            match (result, expected) {
                (Ok(addr), Ok(want)) => assert_eq!(addr.to_string(), want),
                (Err(err), Err(want)) => assert!(err.contains(want), "{err}"),
                (got, want) => panic!("{args:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
