//! Counters the four-letter words and metrics report.

pub use zoolog_log::Summary;
use zoolog_proto::OpCode;

/// Server-wide request counters and latency; `srst` starts them all over.
#[derive(Debug, Default, Clone)]
pub struct ServerStats {
    pub packets_received: u64,
    pub packets_sent: u64,
    /// Session handshakes (ConnectRequests) received.
    pub connect_requests: u64,
    /// Client connections closed as they opened, for the `maxClientCnxns` or `maxCnxns` limit.
    pub connections_rejected: u64,
    /// Every reply, in milliseconds (`srvr`'s min/avg/max, mntr's `*_latency`).
    pub latency_ms: Summary,
    /// Requests answered from the tree as it is (no log entry), from arrival to reply.
    pub read_latency_us: Summary,
    /// Requests ordered through the log, from arrival to reply.
    pub update_latency_us: Summary,
    /// Snapshots: encoding the tree and writing it durably.
    pub snapshot_time_us: Summary,
}

/// Per-connection counters for `cons` and `stat`.
#[derive(Debug, Clone)]
pub struct ConnectionStats {
    pub established_wall_ms: i64,
    pub received: u64,
    pub sent: u64,
    pub last_opcode: Option<OpCode>,
    pub last_cxid: i32,
    pub last_zxid: i64,
    pub last_request_ms: u64,
    pub last_response_ms: u64,
    pub last_latency_ms: u64,
    pub latency_ms: Summary,
}

impl ConnectionStats {
    pub fn new(monotonic_ms: u64, wall_ms: i64) -> Self {
        ConnectionStats {
            established_wall_ms: wall_ms,
            received: 0,
            sent: 0,
            last_opcode: None,
            last_cxid: 0,
            last_zxid: 0,
            last_request_ms: monotonic_ms,
            last_response_ms: 0,
            last_latency_ms: 0,
            latency_ms: Summary::default(),
        }
    }

    pub fn on_request(&mut self, xid: i32, opcode: OpCode, now_ms: u64) {
        self.received += 1;
        self.last_opcode = Some(opcode);
        if xid > 0 {
            self.last_cxid = xid;
        }
        self.last_request_ms = now_ms;
    }

    /// `crst`: as ZooKeeper's `ServerCnxn.resetStats`, the session fields stay and the last
    /// cxid and zxid read -1 until the next request.
    pub fn reset(&mut self) {
        *self = ConnectionStats {
            last_cxid: -1,
            last_zxid: -1,
            last_request_ms: self.last_request_ms,
            ..ConnectionStats::new(0, self.established_wall_ms)
        };
    }

    pub fn on_reply(&mut self, zxid: i64, now_ms: u64) {
        self.last_zxid = zxid;
        self.last_response_ms = now_ms;
        self.last_latency_ms = now_ms.saturating_sub(self.last_request_ms);
        self.latency_ms.record(self.last_latency_ms);
    }
}
