//! A test certificate authority and a `redis-server` that speaks TLS.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tempfile::TempDir;

use crate::server::{RedisServer, free_port};

/// A throwaway certificate authority with one server certificate (for `localhost` and
/// `127.0.0.1`) and one client certificate, all PEM, also written to files in a
/// temporary directory that lives as long as the value.
///
/// Generated with `rcgen` (ECDSA P-256); nothing is read from or written to the system
/// trust store.
#[derive(Debug)]
pub struct TestCa {
    ca_pem: String,
    server_cert_pem: String,
    server_key_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
    dir: TempDir,
}

impl TestCa {
    /// Generates the CA and both certificates.
    ///
    /// # Panics
    ///
    /// If key generation, signing or writing the files fails.
    pub fn generate() -> Self {
        Self::try_generate().unwrap_or_else(|e| panic!("generating test certificates: {e}"))
    }

    fn try_generate() -> io::Result<Self> {
        let other = |e: rcgen::Error| io::Error::other(e.to_string());
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(other)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "Leasehold test CA");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(other)?)
            .map_err(other)?;

        let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose, cn: &str| {
            let mut params = CertificateParams::new(names).map_err(other)?;
            params.distinguished_name.push(DnType::CommonName, cn);
            params.extended_key_usages = vec![usage];
            let key = KeyPair::generate().map_err(other)?;
            let cert = params.signed_by(&key, &ca).map_err(other)?;
            Ok::<_, io::Error>((cert.pem(), key.serialize_pem()))
        };
        let (server_cert_pem, server_key_pem) = leaf(
            vec!["localhost".into(), "127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
            "localhost",
        )?;
        let (client_cert_pem, client_key_pem) = leaf(
            vec!["leasehold-client".into()],
            ExtendedKeyUsagePurpose::ClientAuth,
            "leasehold-client",
        )?;

        let dir = tempfile::Builder::new()
            .prefix("leasehold-tls-")
            .tempdir()?;
        let ca = Self {
            ca_pem: ca.pem(),
            server_cert_pem,
            server_key_pem,
            client_cert_pem,
            client_key_pem,
            dir,
        };
        fs::write(ca.ca_path(), &ca.ca_pem)?;
        fs::write(ca.server_cert_path(), &ca.server_cert_pem)?;
        fs::write(ca.server_key_path(), &ca.server_key_pem)?;
        Ok(ca)
    }

    /// The CA certificate (PEM): what a client must trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The client certificate (PEM), for servers that require client authentication.
    pub fn client_cert_pem(&self) -> &str {
        &self.client_cert_pem
    }

    /// The client certificate's private key (PEM).
    pub fn client_key_pem(&self) -> &str {
        &self.client_key_pem
    }

    /// The server certificate (PEM), valid for `localhost` and `127.0.0.1`.
    pub fn server_cert_pem(&self) -> &str {
        &self.server_cert_pem
    }

    /// Path of the CA certificate file.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// Path of the server certificate file.
    pub fn server_cert_path(&self) -> PathBuf {
        self.dir.path().join("server.crt")
    }

    /// Path of the server key file.
    pub fn server_key_path(&self) -> PathBuf {
        self.dir.path().join("server.key")
    }
}

/// Whether a [`TlsRedisServer`] asks clients for a certificate (`tls-auth-clients`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// Clients must present a certificate signed by the test CA (Redis's default).
    Required,
    /// Clients authenticate the server only.
    None,
}

/// A [`RedisServer`] that also listens for TLS on a second loopback port, with
/// certificates from its own [`TestCa`].
///
/// The plain port stays open for test administration ([`server`](Self::server),
/// [`RedisServer::redis_cli`]); clients under test use [`url`](Self::url).
#[derive(Debug)]
pub struct TlsRedisServer {
    server: RedisServer,
    tls_port: u16,
    ca: TestCa,
}

impl TlsRedisServer {
    /// Generates certificates and starts the server with `--tls-port`, waiting until the
    /// plain port answers `PING`.
    ///
    /// # Panics
    ///
    /// If `redis-server` is missing (with installation guidance), was built without TLS,
    /// or does not come up.
    pub fn start(client_auth: ClientAuth) -> Self {
        let ca = TestCa::generate();
        let mut last = None;
        for _ in 0..5 {
            let tls_port = free_port().expect("a free port");
            let args = tls_args(&ca, tls_port, client_auth);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            match RedisServer::try_start_with_args(&args) {
                Ok(server) => {
                    return Self {
                        server,
                        tls_port,
                        ca,
                    };
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => panic!("{e}"),
                Err(e) => last = Some(e),
            }
        }
        panic!(
            "starting redis-server with TLS failed (is it built with TLS support? Debian's \
             redis-server is): {}",
            last.expect("an attempt")
        );
    }

    /// `rediss://127.0.0.1:TLS_PORT/`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.tls_port)
    }

    /// The TLS port.
    pub fn tls_port(&self) -> u16 {
        self.tls_port
    }

    /// The certificates the server uses.
    pub fn ca(&self) -> &TestCa {
        &self.ca
    }

    /// The underlying server (its plain port, restart, pause, ...).
    pub fn server(&self) -> &RedisServer {
        &self.server
    }

    /// The underlying server, mutably (to restart or stop it).
    pub fn server_mut(&mut self) -> &mut RedisServer {
        &mut self.server
    }
}

fn tls_args(ca: &TestCa, port: u16, auth: ClientAuth) -> Vec<String> {
    let path = |p: &Path| p.display().to_string();
    vec![
        "--tls-port".into(),
        port.to_string(),
        "--tls-cert-file".into(),
        path(&ca.server_cert_path()),
        "--tls-key-file".into(),
        path(&ca.server_key_path()),
        "--tls-ca-cert-file".into(),
        path(&ca.ca_path()),
        "--tls-auth-clients".into(),
        match auth {
            ClientAuth::Required => "yes",
            ClientAuth::None => "no",
        }
        .into(),
    ]
}
