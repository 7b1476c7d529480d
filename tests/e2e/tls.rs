//! HTTPS from `--tls-cert`/`--tls-key` (issue #15), against the real
//! binary: a throwaway CA signs a certificate for 127.0.0.1, the server
//! serves the API over TLS only, and the `sandpiper` command line reaches
//! it when told to trust that CA (`--ca-cert`, or `login`'s saved one),
//! and refuses it otherwise. A plain-HTTP request to the TLS port gets no
//! answer, and a certificate that cannot be read stops the start with a
//! message naming the file.

use std::path::Path;
use std::process::{Command, Output};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use serde_json::Value;

use crate::support::{ADMIN_TOKEN, Server};

/// Writes `ca.pem`, `cert.pem` (for 127.0.0.1 and localhost, signed by
/// the CA) and `key.pem` into `dir`.
fn certificates(dir: &Path) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "Sandpiper test CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("CA key"))
        .expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("server params")
        .signed_by(&key, &ca)
        .expect("server certificate");
    std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write ca.pem");
    std::fs::write(dir.join("cert.pem"), leaf.pem()).expect("write cert.pem");
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).expect("write key.pem");
}

fn sandpiper(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sandpiper"))
        .args(args)
        .env_remove("SANDPIPER_URL")
        .env_remove("SANDPIPER_TOKEN")
        .env_remove("SANDPIPER_CA_CERT")
        .env("SANDPIPER_CONFIG", dir.join("cli-config.json"))
        .output()
        .expect("run sandpiper")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_api_is_served_over_tls_to_clients_that_trust_its_ca() {
    let dir = tempfile::tempdir().expect("temp dir");
    certificates(dir.path());
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    let ca = dir.path().join("ca.pem");
    let ca = ca.to_str().expect("UTF-8 path");
    let server = Server::start_with(
        dir.path(),
        &[
            "--tls-cert",
            cert.to_str().expect("UTF-8 path"),
            "--tls-key",
            key.to_str().expect("UTF-8 path"),
        ],
        &[],
    );
    let url = format!("https://{}", server.addr);

    // Trusting the CA: the API answers as over plain HTTP.
    let listed = sandpiper(
        dir.path(),
        &[
            "unit",
            "list",
            "--server",
            &url,
            "--token",
            ADMIN_TOKEN,
            "--ca-cert",
            ca,
            "-o",
            "json",
        ],
    );
    assert!(listed.status.success(), "{}", stderr(&listed));
    let units: Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert!(
        units
            .as_array()
            .is_some_and(|u| u.iter().any(|u| u["name"] == "Memory")),
        "{units}"
    );

    // Not trusting it (Mozilla's roots only): refused, unreachable (7).
    let untrusted = sandpiper(
        dir.path(),
        &["unit", "list", "--server", &url, "--token", ADMIN_TOKEN],
    );
    assert_eq!(untrusted.status.code(), Some(7), "{}", stderr(&untrusted));

    // Plain HTTP to the TLS port: no HTTP answer, never a plaintext API.
    let plain = sandpiper(
        dir.path(),
        &[
            "unit",
            "list",
            "--server",
            &format!("http://{}", server.addr),
            "--token",
            ADMIN_TOKEN,
        ],
    );
    assert_eq!(plain.status.code(), Some(7), "{}", stderr(&plain));

    // `login` saves the CA with the server and token; later commands use
    // all three.
    let login = sandpiper(
        dir.path(),
        &[
            "login",
            "--server",
            &url,
            "--token",
            ADMIN_TOKEN,
            "--ca-cert",
            ca,
        ],
    );
    assert!(login.status.success(), "{}", stderr(&login));
    let listed = sandpiper(dir.path(), &["cluster", "list", "-o", "json"]);
    assert!(listed.status.success(), "{}", stderr(&listed));

    let status = server.stop();
    assert!(status.success(), "{status}");
}

#[test]
fn an_unreadable_certificate_stops_the_start_naming_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    certificates(dir.path());
    // A start that must fail: `sandpiper serve` with `cert` and `key`.
    let serve = |cert: &Path, key: &Path| {
        Command::new(env!("CARGO_BIN_EXE_sandpiper"))
            .args(["serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(dir.path().join("sandpiper.db"))
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .env("SANDPIPER_ADMIN_TOKEN", ADMIN_TOKEN)
            .output()
            .expect("run sandpiper serve")
    };
    let cert = dir.path().join("cert.pem");
    let out = serve(&dir.path().join("missing.pem"), &dir.path().join("key.pem"));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("missing.pem"), "{}", stderr(&out));
    // A key file with no key in it (the certificate given twice).
    let out = serve(&cert, &cert);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("cert.pem"), "{}", stderr(&out));
    // One without the other: clap refuses it (usage, status 2).
    let out = Command::new(env!("CARGO_BIN_EXE_sandpiper"))
        .args(["serve", "--tls-cert"])
        .arg(&cert)
        .output()
        .expect("run sandpiper serve");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
