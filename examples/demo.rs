//! A tiny wire client around an in-process kiwi server on the bundled demo config:
//! `cargo run --release --example demo`. It sends each line of `examples/demo.jsonl`, waits for
//! that request's response, and prints every frame the server writes.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};

use clap::Parser;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let share = std::env::temp_dir().join("kiwi-demo-share");
    let config = root.join("examples/demo.toml");
    let config = config.to_str().ok_or("the repository path is not UTF-8")?;
    let cli = kiwi::cli::Cli::parse_from(["kiwi", "--wire", "--config-file", config, "--log-stderr"]);
    let prepared = match kiwi::app::prepare(cli, &share) {
        Ok(p) => p,
        Err(kiwi::app::StartError::Usage(e) | kiwi::app::StartError::Fatal(e)) => return Err(e.into()),
    };
    let (server_in, mut to_server) = std::io::pipe()?;
    let (from_server, server_out) = std::io::pipe()?;
    let server = std::thread::spawn(move || kiwi::app::run_with(prepared, server_in, server_out));

    let mut frames = BufReader::new(from_server).lines();
    for request in std::fs::read_to_string(root.join("examples/demo.jsonl"))?.lines().filter(|l| !l.trim().is_empty()) {
        let id = serde_json::from_str::<serde_json::Value>(request)?["id"].clone();
        println!("→ {request}");
        to_server.write_all(format!("{request}\n").as_bytes())?;
        for frame in frames.by_ref() {
            let frame = frame?;
            println!("← {frame}");
            let value: serde_json::Value = serde_json::from_str(&frame)?;
            if value.get("method").is_none() && value["id"] == id {
                break;
            }
        }
    }
    drop(to_server);
    for frame in frames {
        println!("← {}", frame?);
    }
    let _ = server.join();
    Ok(())
}
