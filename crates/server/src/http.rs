//! A deliberately small HTTP/1.1 server for the AdminServer and /metrics: GET and HEAD only,
//! one request per connection (`Connection: close`), no request bodies. Everything is bounded:
//! the request head's size and header count, the time to send it and to read the answer, and
//! the number of connections served at once. Malformed requests get 400 and a closed
//! connection; nothing here touches the client port.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Bytes of request line and headers accepted.
const HEAD_BYTES_MAX: usize = 8 * 1024;
/// Header lines accepted.
const HEADERS_MAX: usize = 64;
/// Connections served at once; more are answered 503 and closed.
pub const CONNECTIONS_MAX: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// The percent-decoded path, without the query.
    pub path: String,
    /// Percent-decoded query parameters, in order.
    pub query: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    pub fn ok(content_type: &'static str, body: String) -> Response {
        Response {
            status: 200,
            content_type,
            body,
        }
    }

    pub fn error(status: u16, message: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{message}\n"),
        }
    }
}

/// What answers parsed requests.
pub trait Handler: Clone + Send + Sync + 'static {
    fn handle(&self, request: Request) -> impl Future<Output = Response> + Send;
}

/// Serves `listener` until the task is aborted. `timeout` bounds both reading the request and
/// writing the answer.
pub async fn serve(listener: TcpListener, timeout: Duration, handler: impl Handler) {
    let permits = Arc::new(Semaphore::new(CONNECTIONS_MAX));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "admin accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            // Best effort and without waiting: a busy server must not queue these.
            let _ = stream.try_write(&encode(&Response::error(503, "too many connections"), true));
            continue;
        };
        let handler = handler.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _ = tokio::time::timeout(timeout, connection(stream, handler)).await;
        });
    }
}

async fn connection(mut stream: TcpStream, handler: impl Handler) {
    let (response, with_body) = match read_head(&mut stream).await {
        Ok(head) => match parse_head(&head) {
            Ok(request) => {
                let with_body = request.method == Method::Get;
                (handler.handle(request).await, with_body)
            }
            Err(response) => (response, true),
        },
        Err(HeadError::TooLarge) => (Response::error(431, "request head too large"), true),
        Err(HeadError::Closed) => return,
    };
    let _ = stream.write_all(&encode(&response, with_body)).await;
    let _ = stream.shutdown().await;
}

enum HeadError {
    TooLarge,
    Closed,
}

/// Reads up to the blank line that ends the head.
async fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, HeadError> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let read = stream
            .read(&mut chunk)
            .await
            .map_err(|_| HeadError::Closed)?;
        if read == 0 {
            return Err(HeadError::Closed);
        }
        head.extend_from_slice(&chunk[..read]);
        if let Some(end) = find_head_end(&head) {
            head.truncate(end);
            return Ok(head);
        }
        if head.len() > HEAD_BYTES_MAX {
            return Err(HeadError::TooLarge);
        }
    }
}

fn find_head_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(4).position(|w| w == b"\r\n\r\n")
}

/// Parses the request line and headers; an error is the response to send.
pub fn parse_head(head: &[u8]) -> Result<Request, Response> {
    let bad = |message: &str| Response::error(400, message);
    let text = std::str::from_utf8(head).map_err(|_| bad("request head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("malformed request line"));
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(bad("unsupported HTTP version"));
    }
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        other if !other.is_empty() && other.bytes().all(|b| b.is_ascii_uppercase()) => {
            return Err(Response::error(405, "only GET and HEAD are served"))
        }
        _ => return Err(bad("malformed method")),
    };
    let mut header_count = 0;
    for line in lines {
        header_count += 1;
        if header_count > HEADERS_MAX {
            return Err(Response::error(431, "too many headers"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad("malformed header"));
        };
        if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(bad("malformed header name"));
        }
        if carries_body(name, value.trim()) {
            return Err(bad("request bodies are not accepted"));
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if !path.starts_with('/') {
        return Err(bad("the target must be an absolute path"));
    }
    Ok(Request {
        method,
        path: percent_decode(path).ok_or_else(|| bad("malformed percent-encoding"))?,
        query: parse_query(query).ok_or_else(|| bad("malformed query"))?,
    })
}

fn carries_body(name: &str, value: &str) -> bool {
    (name.eq_ignore_ascii_case("content-length") && value != "0")
        || name.eq_ignore_ascii_case("transfer-encoding")
}

fn parse_query(query: &str) -> Option<Vec<(String, String)>> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            Some((
                percent_decode(&name.replace('+', " "))?,
                percent_decode(&value.replace('+', " "))?,
            ))
        })
        .collect()
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn encode(response: &Response, with_body: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    )
    .into_bytes();
    if with_body {
        out.extend_from_slice(response.body.as_bytes());
    }
    out
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Request, u16> {
        parse_head(text.as_bytes()).map_err(|response| response.status)
    }

    #[test]
    fn parses_path_and_decoded_query() {
        let request =
            parse("GET /commands/stmk?traceMask=%32%35&x=a+b HTTP/1.1\r\nHost: h").unwrap();
        assert_eq!(request.method, Method::Get);
        assert_eq!(request.path, "/commands/stmk");
        assert_eq!(
            request.query,
            vec![
                ("traceMask".to_owned(), "25".to_owned()),
                ("x".to_owned(), "a b".to_owned())
            ]
        );
    }

    #[test]
    fn rejects_malformed_requests_with_400() {
        for head in [
            "",
            "GET",
            "GET /x",
            "GET /x HTTP/1.1 extra",
            "GET /x SPDY/3",
            "get /x HTTP/1.1",
            "GET x HTTP/1.1",
            "GET /%zz HTTP/1.1",
            "GET /%ff HTTP/1.1",
            "GET /x HTTP/1.1\r\nno colon",
            "GET /x HTTP/1.1\r\nContent-Length: 5",
            "GET /x HTTP/1.1\r\nTransfer-Encoding: chunked",
        ] {
            assert_eq!(parse(head), Err(400), "{head:?}");
        }
    }

    #[test]
    fn other_methods_get_405_and_header_floods_431() {
        assert_eq!(parse("POST /commands/ruok HTTP/1.1"), Err(405));
        let flood = format!("GET / HTTP/1.1{}", "\r\nX: y".repeat(HEADERS_MAX + 1));
        assert_eq!(parse(&flood), Err(431));
    }

    #[test]
    fn head_responses_carry_the_length_but_no_body() {
        let response = Response::ok("text/plain", "abc".to_owned());
        let bytes = String::from_utf8(encode(&response, false)).unwrap();
        assert!(bytes.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(bytes.contains("Content-Length: 3\r\n"));
        assert!(bytes.ends_with("\r\n\r\n"));
    }
}
