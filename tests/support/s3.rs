//! An S3 server for the object-store tests (moto's `moto_server`, started per test on a
//! free port) and a fault-injecting HTTP/1.1 proxy to put between a client and it
//! (included with `#[path = "support/s3.rs"] mod s3;`). Plain std: raw HTTP over
//! `TcpStream`, since moto accepts unsigned requests.
#![allow(dead_code)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// Header names and values, in order.
pub type Headers = Vec<(String, String)>;

/// The most a request or response head may take.
const HEAD_CAP: usize = 64 * 1024;
/// How long an answer (from moto, or to [`http`]) may take before the read fails.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// A running `moto_server`, killed when dropped.
pub struct S3Server {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    child: Child,
}

impl S3Server {
    /// Starts `moto_server` (`$STOKER_MOTO_SERVER`, else `.venv-s3/bin/moto_server` in the
    /// crate) on a free port and waits until it answers. `None` (with a note on stderr)
    /// when it is not installed, unless `STOKER_REQUIRE_S3=1`, which makes that a panic.
    pub fn start() -> Option<S3Server> {
        let exe = std::env::var_os("STOKER_MOTO_SERVER").map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-s3/bin/moto_server"),
            PathBuf::from,
        );
        if !exe.exists() {
            if std::env::var("STOKER_REQUIRE_S3").as_deref() == Ok("1") {
                panic!(
                    "STOKER_REQUIRE_S3=1 but there is no S3 server at {} \
                     (set STOKER_MOTO_SERVER, or run scripts/test.sh, which installs it)",
                    exe.display()
                );
            }
            eprintln!("skipped: no S3 server (moto_server); scripts/test.sh installs it");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(&exe)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", exe.display()));
        // Built before the wait, so that a panic below still kills the child.
        let mut server = S3Server {
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !answers(&server.addr()) {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "moto_server ({}) exited before answering: {status}",
                    exe.display()
                );
            }
            assert!(
                Instant::now() < deadline,
                "moto_server did not answer on port {port} in 30 s"
            );
            thread::sleep(Duration::from_millis(50));
        }
        Some(server)
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        host_port(&self.endpoint)
    }

    /// Creates bucket `name` (asserts a 200).
    pub fn create_bucket(&self, name: &str) {
        let head = format!(
            "PUT /{name} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.addr()
        );
        let (status, body) = http(&self.addr(), &head, &[]);
        assert_eq!(
            status,
            200,
            "create bucket {name}: {}",
            String::from_utf8_lossy(&body)
        );
    }

    /// Writes object `key` (which may hold `/`) in `bucket` (asserts a 200), readable by
    /// anyone: moto answers an unsigned GET or HEAD of a private object 403, and
    /// [`http`] does not sign (signed clients are unaffected).
    pub fn put_object(&self, bucket: &str, key: &str, body: &[u8]) {
        let head = format!(
            "PUT /{bucket}/{} HTTP/1.1\r\nHost: {}\r\nx-amz-acl: public-read\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            percent_encode(key),
            self.addr(),
            body.len()
        );
        let (status, answer) = http(&self.addr(), &head, body);
        assert_eq!(
            status,
            200,
            "put {bucket}/{key}: {}",
            String::from_utf8_lossy(&answer)
        );
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether something on `addr` answers `GET /` with an HTTP status line.
fn answers(addr: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return false;
    };
    let head = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut start = [0u8; 7];
    stream.write_all(head.as_bytes()).is_ok()
        && stream.read_exact(&mut start).is_ok()
        && &start == b"HTTP/1."
}

/// `host:port` of `http://host:port[/]`.
pub fn host_port(endpoint: &str) -> String {
    let rest = endpoint.strip_prefix("http://").unwrap_or(endpoint);
    rest.trim_end_matches('/').to_string()
}

/// `key` with every byte outside `A-Za-z0-9-._~/` as `%XX`.
pub fn percent_encode(key: &str) -> String {
    let mut out = String::new();
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A parsed HTTP response.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub reason: String,
    pub headers: Headers,
    /// As delimited by Content-Length (or less, if the connection ended first), chunked
    /// encoding (decoded) or the end of the data; empty for HEAD, 1xx, 204 and 304.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn find(data: &[u8], needle: &[u8]) -> Option<usize> {
    data.windows(needle.len()).position(|w| w == needle)
}

/// The first line and the headers of a head (without its blank line).
fn parse_head(head: &str) -> (String, Headers) {
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or("").to_string();
    let headers = lines.filter_map(|l| l.split_once(':'));
    (
        first,
        headers
            .map(|(n, v)| (n.trim().into(), v.trim().into()))
            .collect(),
    )
}

/// Parses a whole response (`head_request`: it answers a HEAD, so it has no body).
pub fn parse_response(raw: &[u8], head_request: bool) -> Option<Response> {
    let end = find(raw, b"\r\n\r\n")?;
    let (status_line, headers) = parse_head(&String::from_utf8_lossy(&raw[..end]));
    let mut status_line = status_line.splitn(3, ' ');
    if !status_line.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status: u16 = status_line.next()?.parse().ok()?;
    let reason = status_line.next().unwrap_or("").to_string();
    let rest = &raw[end + 4..];
    let body = if head_request || status < 200 || status == 204 || status == 304 {
        Vec::new()
    } else if is_chunked(&headers) {
        // What there is of it, if it is cut short.
        let mut body = Vec::new();
        let _ = read_chunked(&mut &rest[..], &mut body);
        body
    } else if let Some(len) = content_length(&headers) {
        rest[..rest.len().min(len)].to_vec()
    } else {
        rest.to_vec()
    };
    Some(Response {
        status,
        reason,
        headers,
        body,
    })
}

fn is_chunked(headers: &[(String, String)]) -> bool {
    header(headers, "transfer-encoding").is_some_and(|v| v.contains("chunked"))
}

fn content_length(headers: &[(String, String)]) -> Option<usize> {
    header(headers, "content-length").and_then(|v| v.parse().ok())
}

/// Sends `request_head` (request line and headers, ending in the blank line) and `body`
/// to `addr` (`host:port`), reads the answer to the end and gives its parsed response.
/// Ask with `Connection: close`, or the read waits for the server to close.
pub fn request(addr: &str, request_head: &str, body: &[u8]) -> Response {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .expect("read timeout");
    stream
        .write_all(request_head.as_bytes())
        .expect("write request head");
    stream.write_all(body).expect("write request body");
    let mut raw = Vec::new();
    // A reset after part of an answer (the proxy's faults) leaves what came.
    if let Err(e) = stream.read_to_end(&mut raw) {
        assert!(!raw.is_empty(), "read from {addr}: {e}");
    }
    parse_response(&raw, request_head.starts_with("HEAD ")).unwrap_or_else(|| {
        panic!(
            "no HTTP response from {addr}: {:?}",
            String::from_utf8_lossy(&raw)
        )
    })
}

/// [`request`], giving only the status and the body.
pub fn http(addr: &str, request_head: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let r = request(addr, request_head, body);
    (r.status, r.body)
}

/// The faults the [`Proxy`] injects; 0 (or `false`) is off. Each `*_every` (N) counts the
/// eligible GETs (every GET, or only those with a Range header under `only_ranged`) while
/// it is on, and the kth hits when k % N == 0. When several hit one request the first in
/// field order wins (error, throttle, server error, reset, truncate, flip).
#[derive(Clone, Default, Debug)]
pub struct Faults {
    /// Added before answering every request.
    pub latency: Duration,
    /// Every Nth GET answered 503 SlowDown (without asking upstream).
    pub error_every: u32,
    /// Every Nth GET answered 429 SlowDown (without asking upstream).
    pub throttle_every: u32,
    /// Every Nth GET answered 500 InternalError (without asking upstream).
    pub server_error_every: u32,
    /// Every Nth GET: forwarded, the head and half of the body sent, then the connection
    /// shut down both ways.
    pub reset_every: u32,
    /// Every Nth GET: forwarded, the head (with the full Content-Length) and half of the
    /// body sent, then the connection closed.
    pub truncate_every: u32,
    /// Every Nth GET: forwarded, and one bit of a successful (2xx) answer's body flipped,
    /// at a position drawn anew each time; the head (ETag, Content-Length) unchanged. A
    /// transmission error that TCP's and the link's checks let through.
    pub flip_every: u32,
    /// Faults apply only to GETs with a Range header (sample reads, not listings).
    pub only_ranged: bool,
}

/// What the [`Proxy`] has seen.
#[derive(Default, Debug)]
pub struct ProxyCounts {
    /// Requests read.
    pub requests: AtomicU64,
    /// GET requests read.
    pub gets: AtomicU64,
    /// Requests read and not yet fully answered (nor their connection closed).
    pub in_flight: AtomicU64,
    /// The peak of `in_flight`.
    pub max_in_flight: AtomicU64,
    /// Faults injected (latency not counted).
    pub faults: AtomicU64,
}

/// A fault-injecting HTTP/1.1 proxy in front of `upstream`: keep-alive with the client, a
/// new connection upstream per request, answers with Content-Length. Its threads are
/// detached; the accept loop ends when it is dropped.
pub struct Proxy {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The faults now injected; [`Proxy::set`] also restarts their counts.
    pub faults: Arc<Mutex<Faults>>,
    /// What it has seen.
    pub counts: Arc<ProxyCounts>,
    shared: Arc<Shared>,
}

/// What the proxy's threads share.
struct Shared {
    upstream: String,
    faults: Arc<Mutex<Faults>>,
    counts: Arc<ProxyCounts>,
    /// The eligible GETs seen by each `*_every` counter, in field order.
    seen: Mutex<[u64; 6]>,
    /// Set when the [`Proxy`] is dropped: the accept loop ends.
    stop: AtomicBool,
}

/// The fault numbers (positions in [`Faults`]) of reset, truncate and flip.
const RESET: usize = 3;
const TRUNCATE: usize = 4;
const FLIP: usize = 5;

/// The answer of fault `i` (0 to 2: error, throttle, server error): status, reason, S3
/// error code, message.
fn error_answer(i: usize) -> Option<(u16, &'static str, &'static str, &'static str)> {
    const SLOW: &str = "Please reduce your request rate.";
    const INTERNAL: &str = "We encountered an internal error. Please try again.";
    match i {
        0 => Some((503, "Service Unavailable", "SlowDown", SLOW)),
        1 => Some((429, "Too Many Requests", "SlowDown", SLOW)),
        2 => Some((500, "Internal Server Error", "InternalError", INTERNAL)),
        _ => None,
    }
}

/// Whether header `name` is hop-by-hop or framing, not passed on (the proxy frames by
/// Content-Length).
fn hop(name: &str) -> bool {
    let hop = "connection keep-alive transfer-encoding content-length expect";
    hop.split(' ').any(|h| name.eq_ignore_ascii_case(h))
}

/// Counts a request in flight until dropped.
struct InFlight<'a>(&'a ProxyCounts);

impl<'a> InFlight<'a> {
    fn new(counts: &'a ProxyCounts) -> Self {
        let now = counts.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        counts.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(counts)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Proxy {
    /// Starts a proxy to `upstream` (`http://127.0.0.1:PORT`) with no faults.
    pub fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let shared = Arc::new(Shared {
            upstream: host_port(upstream),
            faults: Arc::default(),
            counts: Arc::default(),
            seen: Mutex::default(),
            stop: AtomicBool::default(),
        });
        let proxy = Proxy {
            endpoint: format!("http://127.0.0.1:{port}"),
            faults: shared.faults.clone(),
            counts: shared.counts.clone(),
            shared: shared.clone(),
        };
        thread::spawn(move || {
            for stream in listener.incoming() {
                if shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    let shared = shared.clone();
                    thread::spawn(move || {
                        let _ = serve(stream, &shared);
                    });
                }
            }
        });
        proxy
    }

    /// Replaces the faults (and restarts their counts).
    pub fn set(&self, f: Faults) {
        *lock(&self.faults) = f;
        *lock(&self.shared.seen) = [0; 6];
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(host_port(&self.endpoint));
    }
}

/// Reads one line (at most [`HEAD_CAP`] bytes) without its line ending; `None` at the
/// end of the stream.
fn read_line(r: &mut impl BufRead) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    if r.take(HEAD_CAP as u64).read_until(b'\n', &mut line)? == 0 {
        return Ok(None);
    }
    if !line.ends_with(b"\n") {
        return Err(bad("line too long or cut"));
    }
    Ok(Some(String::from_utf8_lossy(&line).trim_end().to_string()))
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Reads one line, failing at the end of the stream.
fn need_line(r: &mut impl BufRead) -> io::Result<String> {
    read_line(r)?.ok_or_else(|| io::ErrorKind::UnexpectedEof.into())
}

/// Reads a chunked body, decoded, onto `body`.
fn read_chunked(r: &mut impl BufRead, body: &mut Vec<u8>) -> io::Result<()> {
    loop {
        let line = need_line(r)?;
        let size_hex = line.split(';').next().unwrap_or("").trim();
        let size = u64::from_str_radix(size_hex, 16).map_err(|_| bad("bad chunk size"))?;
        if size == 0 {
            // Trailers, up to the blank line.
            while !need_line(r)?.is_empty() {}
            return Ok(());
        }
        if r.take(size).read_to_end(body)? < size as usize {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        need_line(r)?;
    }
}

/// Appends `headers`, less the [`hop`] ones, to `out`.
fn push_headers(out: &mut String, headers: &[(String, String)]) {
    for (n, v) in headers {
        if !hop(n) {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
    }
}

/// A request read from the client.
struct Request {
    line: String,
    headers: Headers,
    body: Vec<u8>,
}

/// Reads the head of a request (`None` if the client closed the connection before one).
fn read_head(r: &mut impl BufRead) -> io::Result<Option<(String, Headers)>> {
    let Some(first) = read_line(r)? else {
        return Ok(None);
    };
    let mut head = first;
    loop {
        let line = need_line(r)?;
        if line.is_empty() {
            return Ok(Some(parse_head(&head)));
        }
        if head.len() + line.len() > HEAD_CAP {
            return Err(bad("head too long"));
        }
        head.push_str("\r\n");
        head.push_str(&line);
    }
}

/// Sends `req` upstream on a new connection (closed by upstream after its answer) and
/// reads the answer.
fn forward(upstream: &str, req: &Request, head_request: bool) -> io::Result<Response> {
    let mut up = TcpStream::connect(upstream)?;
    up.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut head = format!("{}\r\n", req.line);
    push_headers(&mut head, &req.headers);
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        req.body.len()
    ));
    up.write_all(head.as_bytes())?;
    up.write_all(&req.body)?;
    let mut raw = Vec::new();
    up.read_to_end(&mut raw)?;
    parse_response(&raw, head_request).ok_or_else(|| bad("bad upstream response"))
}

/// Serves one client connection until it closes, fails or is faulted.
fn serve(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let counts = &shared.counts;
    while let Some((line, headers)) = read_head(&mut reader)? {
        counts.requests.fetch_add(1, Ordering::SeqCst);
        let in_flight = InFlight::new(counts);
        let method = line.split(' ').next().unwrap_or("").to_string();
        let close = line.ends_with("HTTP/1.0")
            || header(&headers, "connection")
                .is_some_and(|v| v.to_ascii_lowercase().contains("close"));
        if header(&headers, "expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
            out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        let mut body = Vec::new();
        if is_chunked(&headers) {
            read_chunked(&mut reader, &mut body)?;
        } else {
            body.resize(content_length(&headers).unwrap_or(0), 0);
            reader.read_exact(&mut body)?;
        }
        let req = Request {
            line,
            headers,
            body,
        };

        let faults = lock(&shared.faults).clone();
        thread::sleep(faults.latency);
        let ranged = header(&req.headers, "range").is_some();
        let mut fault = None;
        // This GET's own number among those counted for flips: where its flip lands.
        let mut nth = 0;
        if method == "GET" {
            counts.gets.fetch_add(1, Ordering::SeqCst);
            (fault, nth) = decide(&faults, ranged, &shared.seen);
        }
        if fault.is_some() {
            counts.faults.fetch_add(1, Ordering::SeqCst);
        }
        let connection = if close { "Connection: close\r\n" } else { "" };
        let answer = match fault.and_then(error_answer) {
            Some((status, reason, code, message)) => {
                let xml = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>");
                let len = xml.len();
                format!("HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {len}\r\n{connection}\r\n{xml}").into_bytes()
            }
            None => {
                let head_request = method == "HEAD";
                let response = forward(&shared.upstream, &req, head_request)?;
                let no_body = head_request || response.status == 204 || response.status == 304;
                let mut head = format!("HTTP/1.1 {} {}\r\n", response.status, response.reason);
                push_headers(&mut head, &response.headers);
                // A HEAD's Content-Length is that of the body it would have had.
                let len = match response.header("content-length") {
                    Some(len) if no_body => Some(len.to_string()),
                    _ if no_body => None,
                    _ => Some(response.body.len().to_string()),
                };
                if let Some(len) = len {
                    head.push_str(&format!("Content-Length: {len}\r\n"));
                }
                head.push_str(connection);
                head.push_str("\r\n");
                let mut answer = head.into_bytes();
                let cut = matches!(fault, Some(RESET | TRUNCATE));
                let mut body = response.body;
                if fault == Some(FLIP) && (200..300).contains(&response.status) && !body.is_empty()
                {
                    let bit = flip_position(nth, body.len());
                    body[bit / 8] ^= 1 << (bit % 8);
                }
                answer.extend_from_slice(&body[..if cut { body.len() / 2 } else { body.len() }]);
                answer
            }
        };
        // The client may count the request done on its last byte and send the next one on
        // another connection at once: the request stops counting here before that byte
        // goes (and before a reset), so two requests never overlap in the count unless
        // they overlapped at the client.
        let (most, last) = answer.split_at(answer.len().saturating_sub(1));
        out.write_all(most)?;
        drop(in_flight);
        out.write_all(last)?;
        out.flush()?;
        match fault {
            Some(RESET) => return out.shutdown(Shutdown::Both),
            Some(TRUNCATE) => return Ok(()),
            _ if close => return Ok(()),
            _ => {}
        }
    }
    Ok(())
}

/// Counts an eligible GET and gives the fault (its position in [`Faults`]) that hits it,
/// and the GET's number among those counted for flips.
fn decide(f: &Faults, ranged: bool, seen: &Mutex<[u64; 6]>) -> (Option<usize>, u64) {
    if f.only_ranged && !ranged {
        return (None, 0);
    }
    let every = [
        f.error_every,
        f.throttle_every,
        f.server_error_every,
        f.reset_every,
        f.truncate_every,
        f.flip_every,
    ];
    let mut seen = lock(seen);
    let mut hit = None;
    for (i, &n) in every.iter().enumerate() {
        if n > 0 {
            seen[i] += 1;
            if hit.is_none() && seen[i].is_multiple_of(u64::from(n)) {
                hit = Some(i);
            }
        }
    }
    (hit, seen[FLIP])
}

/// The bit (of a body of `len` bytes) that the `k`th GET counted for flips flips: splitmix64
/// of `k`, so that two flips of one object (each GET a `k` of its own) hardly ever meet.
fn flip_position(k: u64, len: usize) -> usize {
    let mut z = k.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % (len as u64 * 8)) as usize
}
