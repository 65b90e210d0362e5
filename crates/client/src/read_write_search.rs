//! The search for a read-write server while the session sits on a read-only one, as Apache's
//! client does it (`ClientCnxn.pingRwServer`): ask the other servers of the list, one at a time
//! with a growing pause, the `isro` four-letter word, and report the first that answers "rw".
//!
//! A probe is a short TCP exchange of its own, never the session's connection: the session keeps
//! serving reads meanwhile. Anything but a clean "rw" (refused, silence, garbage, an answer too
//! long, a server that does not whitelist `isro`) counts as "not read-write", so a misbehaving
//! host can only slow the search, never end it wrongly.

use std::time::Duration;

use rand::seq::SliceRandom;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{sleep, timeout};

/// Apache's pause before the first probe; it doubles after each probe that finds nothing.
const PROBE_PAUSE_MS_MIN: u64 = 100;
/// Apache's cap on that pause.
const PROBE_PAUSE_MS_MAX: u64 = 60_000;
/// Apache's socket timeout for one probe (connect, ask, read the answer).
pub(crate) const PROBE_TIMEOUT_MS: u64 = 1_000;
/// "rw" or "ro", possibly with a line end: anything longer is not an answer to `isro`.
const ANSWER_BYTES_MAX: usize = 16;

/// Probes `candidates` in turn (shuffled once, then round and round) until one answers "rw", and
/// returns it. With no candidate it never returns: the session stays where it is.
pub(crate) async fn find_read_write_server(mut candidates: Vec<String>) -> String {
    if candidates.is_empty() {
        return std::future::pending().await;
    }
    candidates.shuffle(&mut rand::thread_rng());
    let mut pause_ms = PROBE_PAUSE_MS_MIN;
    for address in candidates.iter().cycle() {
        sleep(Duration::from_millis(pause_ms)).await;
        if answers_read_write(address, Duration::from_millis(PROBE_TIMEOUT_MS)).await {
            return address.clone();
        }
        pause_ms = (pause_ms * 2).min(PROBE_PAUSE_MS_MAX);
    }
    unreachable!("cycling a non-empty list never ends")
}

/// True only if the server at `address` answers `isro` with "rw" within `probe_timeout`.
pub(crate) async fn answers_read_write(address: &str, probe_timeout: Duration) -> bool {
    let exchange = async {
        let mut stream = TcpStream::connect(address).await?;
        stream.write_all(b"isro").await?;
        stream.shutdown().await?;
        read_bounded_answer(&mut stream).await
    };
    match timeout(probe_timeout, exchange).await {
        // What Apache's readLine would read as the line "rw".
        Ok(Ok(answer)) => matches!(answer.as_slice(), b"rw" | b"rw\n" | b"rw\r\n"),
        Ok(Err(_)) | Err(_) => false,
    }
}

/// Reads until the server closes, giving up (as garbage) past `ANSWER_BYTES_MAX` bytes.
async fn read_bounded_answer(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut answer = Vec::with_capacity(ANSWER_BYTES_MAX + 1);
    let mut limited = stream.take(ANSWER_BYTES_MAX as u64 + 1);
    limited.read_to_end(&mut answer).await?;
    if answer.len() > ANSWER_BYTES_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "isro answer too long",
        ));
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A one-connection server on a fresh port that reads the question, then does `behave`.
    async fn server<F, Fut>(behave: F) -> String
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut question = [0; 4];
            stream.read_exact(&mut question).await.unwrap();
            assert_eq!(&question, b"isro");
            behave(stream).await;
        });
        address
    }

    async fn answer_with(mut stream: TcpStream, answer: &'static [u8]) {
        let _ = stream.write_all(answer).await;
    }

    const PROBE_TIMEOUT: Duration = Duration::from_millis(300);

    #[tokio::test]
    async fn rw_is_read_write_and_ro_is_not() {
        for (answer, read_write) in [
            (&b"rw"[..], true),
            (b"rw\n", true),
            (b"ro", false),
            (b"ro\n", false),
        ] {
            let address = server(move |stream| answer_with(stream, answer)).await;
            assert_eq!(
                answers_read_write(&address, PROBE_TIMEOUT).await,
                read_write,
                "{answer:?}"
            );
        }
    }

    #[tokio::test]
    async fn garbage_is_not_read_write() {
        for answer in [
            &b""[..],
            b"imok",
            b"rwx",
            b"isro is not executed because it is not in the whitelist.\n",
            b"rw\nrw\nrw\nrw\nrw\nrw\n",
        ] {
            let address = server(move |stream| answer_with(stream, answer)).await;
            assert!(
                !answers_read_write(&address, PROBE_TIMEOUT).await,
                "{answer:?}"
            );
        }
    }

    /// A server that streams bytes without end is cut off at the answer limit, not read forever.
    #[tokio::test]
    async fn an_endless_answer_is_not_read_write() {
        let address =
            server(|mut stream| async move { while stream.write_all(b"rw").await.is_ok() {} })
                .await;
        assert!(!answers_read_write(&address, Duration::from_secs(30)).await);
    }

    /// A server that accepts and never answers is given up on at the probe timeout.
    #[tokio::test]
    async fn silence_is_not_read_write() {
        let (hold, held) = tokio::sync::oneshot::channel::<()>();
        let address = server(|stream| async move {
            let _ = held.await;
            drop(stream);
        })
        .await;
        assert!(!answers_read_write(&address, PROBE_TIMEOUT).await);
        drop(hold);
    }

    #[tokio::test]
    async fn a_refused_connection_is_not_read_write() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        drop(listener);
        assert!(!answers_read_write(&address, PROBE_TIMEOUT).await);
    }

    /// The search skips hosts that are not read-write and returns the one that is.
    #[tokio::test]
    async fn the_search_returns_the_read_write_server() {
        let refused = {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            listener.local_addr().unwrap().to_string()
        };
        let read_only = server(|stream| answer_with(stream, b"ro")).await;
        let read_write = server(|stream| answer_with(stream, b"rw")).await;
        // Every candidate is tried before the first repeats, so the rw one is found in one round.
        let found = timeout(
            Duration::from_secs(30),
            find_read_write_server(vec![refused, read_only, read_write.clone()]),
        )
        .await
        .expect("search ended");
        assert_eq!(found, read_write);
    }
}
