//! The connection's two byte buffers. Requests are encoded straight into the outbox, so that
//! everything queued goes out in one write; replies are parsed in place from what one read
//! brought in. Neither allocates per request once it has grown to the traffic.

use zoolog_proto::{frame_length, FrameTooLong, Jute, Request, RequestHeader};

/// New requests are taken only while the unsent bytes stay under this, so a server that stops
/// reading cannot make the outbox grow without bound (one request may overshoot it once).
const OUTBOX_BYTES_SOFT_MAX: usize = 256 * 1024;
/// What one read asks the socket for at least: many replies at once under load.
const READ_BYTES_MIN: usize = 64 * 1024;
/// An empty buffer whose capacity is over this (after a burst of large frames) gives its memory
/// back, so that one large frame does not pin it for the life of the connection.
const IDLE_CAPACITY_BYTES_MAX: usize = 2 * OUTBOX_BYTES_SOFT_MAX;
/// The 4-byte big-endian length before every frame.
const LENGTH_PREFIX_BYTES: usize = 4;

/// Bytes appended at the back and taken from the front. The taken front is dropped lazily,
/// when appending, once it is at least as long as the rest: every byte moves O(1) times, and
/// the vector never holds much more than twice what is left in it.
#[derive(Default)]
struct ByteQueue {
    bytes: Vec<u8>,
    /// How many bytes at the front of `bytes` were taken.
    taken: usize,
}

impl ByteQueue {
    fn rest(&self) -> &[u8] {
        &self.bytes[self.taken..]
    }

    fn take(&mut self, count: usize) {
        assert!(count <= self.rest().len(), "took more than the queue holds");
        self.taken += count;
        if self.taken == self.bytes.len() {
            self.taken = 0;
            self.bytes.clear();
            if self.bytes.capacity() > IDLE_CAPACITY_BYTES_MAX {
                self.bytes = Vec::new();
            }
        }
    }

    /// The vector to append to.
    fn back(&mut self) -> &mut Vec<u8> {
        if self.taken > 0 && self.taken >= self.rest().len() {
            self.bytes.drain(..self.taken);
            self.taken = 0;
        }
        &mut self.bytes
    }
}

/// Encoded request frames the socket has not taken yet.
#[derive(Default)]
pub(crate) struct Outbox {
    queue: ByteQueue,
}

impl Outbox {
    pub fn unsent(&self) -> &[u8] {
        self.queue.rest()
    }

    pub fn is_empty(&self) -> bool {
        self.unsent().is_empty()
    }

    /// Whether more requests may be queued now.
    pub fn has_room(&self) -> bool {
        self.unsent().len() < OUTBOX_BYTES_SOFT_MAX
    }

    /// Forgets the `count` bytes the socket took.
    pub fn advance(&mut self, count: usize) {
        self.queue.take(count);
    }

    /// Appends `request` as one frame, unless its payload is over `payload_bytes_max`: then
    /// nothing is queued and the error is the payload's length.
    pub fn push_checked(
        &mut self,
        xid: i32,
        request: &Request,
        payload_bytes_max: usize,
    ) -> Result<(), usize> {
        let bytes = self.queue.back();
        let start = bytes.len();
        bytes.extend_from_slice(&[0; LENGTH_PREFIX_BYTES]);
        RequestHeader {
            xid,
            opcode: request.opcode().code(),
        }
        .write_to(bytes);
        request.write_body(bytes);
        let payload_bytes = bytes.len() - start - LENGTH_PREFIX_BYTES;
        match i32::try_from(payload_bytes) {
            Ok(prefix) if payload_bytes <= payload_bytes_max => {
                bytes[start..start + LENGTH_PREFIX_BYTES].copy_from_slice(&prefix.to_be_bytes());
                Ok(())
            }
            _ => {
                bytes.truncate(start);
                Err(payload_bytes)
            }
        }
    }

    /// Appends a request known to fit: a ping, or an identity that passed
    /// [`Outbox::push_checked`] when the caller first sent it.
    pub fn push(&mut self, xid: i32, request: &Request) {
        let appended = self.push_checked(xid, request, usize::MAX);
        assert!(appended.is_ok(), "a request known to fit is over 2 GiB");
    }
}

/// Bytes read from the server, cut into frames in place.
pub(crate) struct Inbound {
    queue: ByteQueue,
    frame_bytes_max: usize,
    /// Length (prefix included) of the frame [`Inbound::next_frame`] last returned, which stays
    /// at the front until the next call so that the caller can borrow it meanwhile.
    handed_out: usize,
}

impl Inbound {
    pub fn new(frame_bytes_max: usize) -> Inbound {
        Inbound {
            queue: ByteQueue::default(),
            frame_bytes_max,
            handed_out: 0,
        }
    }

    /// The buffer for the next read, with room for at least a chunk and for all of a frame
    /// whose start has arrived (its length was checked against the limit then). It therefore
    /// holds at most about twice one incomplete frame, plus one read.
    pub fn read_buffer(&mut self) -> &mut Vec<u8> {
        self.release_handed_out();
        // A refused prefix never gets here: next_frame reported it and the connection ended.
        let frame_rest = self
            .front_frame_bytes()
            .and_then(Result::ok)
            .map_or(0, |frame_bytes| {
                frame_bytes.saturating_sub(self.queue.rest().len())
            });
        let bytes = self.queue.back();
        bytes.reserve(READ_BYTES_MIN.max(frame_rest));
        bytes
    }

    /// The payload of the next frame that has fully arrived, if any; a length prefix over the
    /// limit is an error before anything is allocated for it.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, FrameTooLong> {
        self.release_handed_out();
        let Some(frame_bytes) = self.front_frame_bytes().transpose()? else {
            return Ok(None);
        };
        let arrived = self.queue.rest();
        if arrived.len() < frame_bytes {
            return Ok(None);
        }
        self.handed_out = frame_bytes;
        Ok(Some(&arrived[LENGTH_PREFIX_BYTES..frame_bytes]))
    }

    fn release_handed_out(&mut self) {
        self.queue.take(self.handed_out);
        self.handed_out = 0;
    }

    /// The whole length of the front frame, prefix included, once its prefix has arrived.
    fn front_frame_bytes(&self) -> Option<Result<usize, FrameTooLong>> {
        let prefix = self.queue.rest().get(..LENGTH_PREFIX_BYTES)?;
        let prefix = prefix.try_into().expect("a slice of the prefix's length");
        Some(frame_length(prefix, self.frame_bytes_max).map(|length| LENGTH_PREFIX_BYTES + length))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zoolog_proto::{framed, PathRequest};

    fn sync(path: &str) -> Request {
        Request::Sync(PathRequest {
            path: path.to_owned(),
        })
    }

    #[test]
    fn outbox_frames_requests_as_encode_does() {
        let mut outbox = Outbox::default();
        outbox.push(-2, &Request::Ping);
        outbox.push_checked(7, &sync("/a"), 1024).unwrap();
        let mut expected = framed(&Request::Ping.encode(-2));
        expected.extend_from_slice(&framed(&sync("/a").encode(7)));
        assert_eq!(outbox.unsent(), expected.as_slice());
    }

    #[test]
    fn outbox_refuses_an_oversized_request_and_keeps_the_rest() {
        let mut outbox = Outbox::default();
        outbox.push_checked(1, &sync("/a"), 1024).unwrap();
        let before = outbox.unsent().to_vec();
        let payload_bytes = sync("/long").encode(2).len();
        assert_eq!(
            outbox.push_checked(2, &sync("/long"), payload_bytes - 1),
            Err(payload_bytes)
        );
        assert_eq!(outbox.unsent(), before.as_slice());
        outbox
            .push_checked(2, &sync("/long"), payload_bytes)
            .unwrap();
    }

    #[test]
    fn outbox_keeps_unsent_bytes_across_partial_writes_and_compaction() {
        let mut outbox = Outbox::default();
        let mut expected = Vec::new();
        for xid in 1..=50 {
            outbox.push_checked(xid, &sync("/node"), 1024).unwrap();
            expected.extend_from_slice(&framed(&sync("/node").encode(xid)));
            assert!(outbox.queue.bytes.len() <= 2 * outbox.unsent().len());
            // The socket takes a little less than was queued each time.
            let taken = outbox.unsent().len() * 2 / 3;
            assert_eq!(outbox.unsent(), &expected[..]);
            outbox.advance(taken);
            expected.drain(..taken);
        }
        let rest = outbox.unsent().len();
        outbox.advance(rest);
        assert!(outbox.is_empty() && outbox.has_room());
    }

    /// Feeds `stream` in reads of `read_bytes`, collecting every frame as it completes.
    fn frames_of(stream: &[u8], read_bytes: usize, frame_bytes_max: usize) -> Vec<Vec<u8>> {
        let mut inbound = Inbound::new(frame_bytes_max);
        let mut frames = Vec::new();
        for chunk in stream.chunks(read_bytes) {
            inbound.read_buffer().extend_from_slice(chunk);
            while let Some(frame) = inbound.next_frame().unwrap() {
                frames.push(frame.to_vec());
            }
        }
        frames
    }

    #[test]
    fn inbound_cuts_frames_however_the_reads_split_them() {
        let payloads: Vec<Vec<u8>> = vec![vec![1; 16], vec![], vec![2; 3000], vec![3; 20]];
        let stream: Vec<u8> = payloads
            .iter()
            .flat_map(|payload| framed(payload))
            .collect();
        for read_bytes in [1, 3, 4, 5, 17, 1000, stream.len()] {
            assert_eq!(
                frames_of(&stream, read_bytes, 4096),
                payloads,
                "reads of {read_bytes}"
            );
        }
    }

    #[test]
    fn inbound_refuses_a_frame_over_the_limit_from_its_prefix() {
        let mut inbound = Inbound::new(100);
        inbound
            .read_buffer()
            .extend_from_slice(&101i32.to_be_bytes());
        assert_eq!(
            inbound.next_frame(),
            Err(FrameTooLong {
                length: 101,
                bytes_max: 100
            })
        );
        let mut negative = Inbound::new(100);
        negative
            .read_buffer()
            .extend_from_slice(&(-1i32).to_be_bytes());
        assert!(negative.next_frame().is_err());
    }

    #[test]
    fn inbound_makes_room_for_a_whole_large_frame() {
        let mut inbound = Inbound::new(1 << 20);
        let payload = vec![9; 3 * IDLE_CAPACITY_BYTES_MAX / 2];
        let stream = framed(&payload);
        inbound.read_buffer().extend_from_slice(&stream[..10]);
        assert_eq!(inbound.next_frame(), Ok(None));
        let buffer = inbound.read_buffer();
        assert!(buffer.capacity() - buffer.len() >= stream.len() - 10);
        buffer.extend_from_slice(&stream[10..]);
        assert_eq!(inbound.next_frame(), Ok(Some(payload.as_slice())));
        assert_eq!(inbound.next_frame(), Ok(None));
        // Empty again, the buffer gives the large frame's memory back.
        inbound.read_buffer();
        assert!(inbound.queue.bytes.capacity() <= IDLE_CAPACITY_BYTES_MAX);
    }
}
