//! `sluice proxy` as a program: Toxiproxy's flags, a config file of
//! proxies loaded at start, the API over HTTP, bytes through a proxy.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_sluice");

fn http(addr: &str, req: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn a_config_file_starts_proxies_that_carry_bytes() {
    // An upstream that answers each connection with "pong" and closes.
    let up = TcpListener::bind("127.0.0.1:0").unwrap();
    let up_addr = up.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut c in up.incoming().flatten() {
            let _ = c.write_all(b"pong");
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toxiproxy.json");
    std::fs::write(
        &config,
        format!(r#"[{{"name":"up","listen":"127.0.0.1:0","upstream":"{up_addr}"}}]"#),
    )
    .unwrap();
    let mut child = Command::new(EXE)
        .args(["proxy", "-host", "127.0.0.1", "-port", "0", "-config"])
        .arg(&config)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let api = line
        .trim()
        .strip_prefix("sluice proxy: API on http://")
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    let r = http(
        &api,
        "GET /proxies/up HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let body = r.split("\r\n\r\n").nth(1).unwrap();
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    let listen = v["listen"].as_str().unwrap();
    let mut c = TcpStream::connect(listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = String::new();
    c.read_to_string(&mut got).unwrap();
    assert_eq!(got, "pong");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_bad_config_or_flag_is_an_error() {
    let out = Command::new(EXE)
        .args([
            "proxy",
            "-port",
            "0",
            "-config",
            "/nonexistent/toxiproxy.json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/toxiproxy.json"));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.json");
    std::fs::write(&config, r#"[{"listen":":1"}]"#).unwrap();
    let out = Command::new(EXE)
        .args(["proxy", "-port", "0", "-config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing required field: name at proxy 1")
    );
    let out = Command::new(EXE)
        .args(["proxy", "-port", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
