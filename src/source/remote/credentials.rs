//! Whether an S3 store will find credentials, asked before its first request. Without keys
//! (in the options or the environment), a web identity or container credentials,
//! `object_store` asks the instance metadata service for them at each request, and an
//! endpoint that accepts connections and never answers would take every request's time
//! limit, times its retries, before failing. So the service is probed once, with one short
//! request: if it does not answer, the store is refused at once with
//! [`RemoteError::NoCredentials`], naming where credentials were looked for.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as Key};

use super::RemoteError;

/// The instance metadata service's address unless `aws_metadata_endpoint` says otherwise
/// (`object_store`'s default).
const DEFAULT_METADATA_ENDPOINT: &str = "http://169.254.169.254";

/// How long the metadata service has to accept the probe's connection, and then to begin
/// its answer.
const PROBE_TIMEOUT: Duration = Duration::from_millis(1500);

/// Where `object_store` looks for S3 credentials before the instance metadata service.
const LOOKED_IN: &str = "the store options and the environment: AWS_ACCESS_KEY_ID with \
     AWS_SECRET_ACCESS_KEY, AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN, \
     AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, AWS_CONTAINER_CREDENTIALS_FULL_URI with \
     AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE";

/// Checks that the S3 store of `root`, to be built by `b` (the environment's and the
/// options' settings applied), has credentials: keys, a web identity, container
/// credentials, `aws_skip_signature` (a public bucket), or else an instance metadata
/// service that answers within [`PROBE_TIMEOUT`].
pub(super) fn check_s3(root: &str, b: &AmazonS3Builder) -> Result<(), RemoteError> {
    let set = |k: Key| b.get_config_value(&k).is_some_and(|v| !v.trim().is_empty());
    let skip = b
        .get_config_value(&Key::SkipSignature)
        .is_some_and(|v| truthy(&v));
    if skip
        || set(Key::AccessKeyId)
        || set(Key::SecretAccessKey)
        || (set(Key::WebIdentityTokenFile) && set(Key::RoleArn))
        || set(Key::ContainerCredentialsRelativeUri)
        || (set(Key::ContainerCredentialsFullUri) && set(Key::ContainerAuthorizationTokenFile))
    {
        return Ok(());
    }
    let endpoint = b
        .get_config_value(&Key::MetadataEndpoint)
        .unwrap_or_else(|| DEFAULT_METADATA_ENDPOINT.into());
    probe(&endpoint).map_err(|why| RemoteError::NoCredentials {
        url: root.into(),
        looked_in: format!(
            "{LOOKED_IN}; the instance metadata service at {endpoint} ({why}); profile \
             files (~/.aws/credentials, ~/.aws/config) are not read. Set the keys, or \
             aws_skip_signature=true for a public bucket"
        ),
    })
}

/// Whether a setting's value means yes, as `object_store` reads one.
fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "y" | "on"
    )
}

/// Asks the metadata service at `endpoint` for a session token (IMDSv2's first step), once,
/// within [`PROBE_TIMEOUT`] to connect and as much to begin answering: `Ok` when anything
/// answers in HTTP (whatever the status: `object_store` takes it from there).
fn probe(endpoint: &str) -> Result<(), ProbeError> {
    let url = url::Url::parse(endpoint)?;
    let addrs = url.socket_addrs(|| Some(80)).map_err(ProbeError::Resolve)?;
    let addr = addrs.first().ok_or(ProbeError::NoAddress)?;
    let mut s = TcpStream::connect_timeout(addr, PROBE_TIMEOUT).map_err(ProbeError::Connect)?;
    let silent = ProbeError::Silent;
    s.set_read_timeout(Some(PROBE_TIMEOUT)).map_err(silent)?;
    s.set_write_timeout(Some(PROBE_TIMEOUT)).map_err(silent)?;
    let host = &url[url::Position::BeforeHost..url::Position::AfterPort];
    let path = url.path().trim_end_matches('/');
    let request = format!(
        "PUT {path}/latest/api/token HTTP/1.1\r\nHost: {host}\r\n\
         X-aws-ec2-metadata-token-ttl-seconds: 60\r\nContent-Length: 0\r\n\
         Connection: close\r\n\r\n"
    );
    s.write_all(request.as_bytes()).map_err(silent)?;
    let mut start = [0u8; 5];
    s.read_exact(&mut start).map_err(silent)?;
    if &start == b"HTTP/" {
        Ok(())
    } else {
        Err(ProbeError::NotHttp)
    }
}

/// Why the instance metadata service did not answer a probe.
#[derive(Debug, thiserror::Error)]
enum ProbeError {
    /// The endpoint is not a URL.
    #[error("not a URL: {0}")]
    NotUrl(#[from] url::ParseError),
    /// Its host could not be resolved.
    #[error("no address: {0}")]
    Resolve(#[source] std::io::Error),
    /// Its host resolved to no address.
    #[error("no address")]
    NoAddress,
    /// No connection within [`PROBE_TIMEOUT`].
    #[error("no connection within {PROBE_TIMEOUT:?}: {0}")]
    Connect(#[source] std::io::Error),
    /// Connected, but no answer within [`PROBE_TIMEOUT`].
    #[error("no answer within {PROBE_TIMEOUT:?}: {0}")]
    Silent(#[source] std::io::Error),
    /// Something answered, not in HTTP.
    #[error("an answer that is not HTTP")]
    NotHttp,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port nothing listens on: the probe fails to connect and keeps the system's error
    /// as its source.
    #[test]
    fn a_failed_probe_keeps_the_system_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let e = probe(&format!("http://127.0.0.1:{port}")).expect_err("nothing listens");
        assert!(matches!(e, ProbeError::Connect(_)), "{e}");
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        let e = probe("not a url").expect_err("not a URL");
        assert!(std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<url::ParseError>())
            .is_some());
    }
}
