//! Counters the four-letter words and metrics report.

use zoolog_proto::OpCode;

/// Server-wide request counters and latency; `srst` starts them all over.
#[derive(Debug, Default, Clone)]
pub struct ServerStats {
    pub packets_received: u64,
    pub packets_sent: u64,
    pub latency: Latency,
    /// Requests answered from the tree as it is (no log entry), from arrival to reply.
    pub read_latency: TimeSummary,
    /// Requests ordered through the log, from arrival to reply.
    pub update_latency: TimeSummary,
    /// Snapshots: encoding the tree and writing it durably.
    pub snapshot_time: TimeSummary,
}

impl ServerStats {
    pub fn on_latency(&mut self, latency_ms: u64) {
        self.latency.record(latency_ms);
    }
}

/// min/avg/max of request latencies in milliseconds.
#[derive(Debug, Default, Clone)]
pub struct Latency {
    pub count: u64,
    pub total_ms: u64,
    pub min_ms: u64,
    pub max_ms: u64,
}

impl Latency {
    pub fn record(&mut self, latency_ms: u64) {
        self.min_ms = if self.count == 0 {
            latency_ms
        } else {
            self.min_ms.min(latency_ms)
        };
        self.max_ms = self.max_ms.max(latency_ms);
        self.total_ms += latency_ms;
        self.count += 1;
    }

    pub fn average_ms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.total_ms as f64 / self.count as f64
        }
    }
}

/// ZooKeeper's AvgMinMaxCounter, behind mntr's `avg_`, `min_`, `max_`, `cnt_` and `sum_` keys:
/// kept in microseconds, shown in milliseconds (ZooKeeper counts whole milliseconds, so its
/// average of sub-millisecond times reads 0 where this one keeps the fraction).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TimeSummary {
    pub count: u64,
    pub total_us: u64,
    /// 0 while `count` is.
    pub min_us: u64,
    pub max_us: u64,
}

impl TimeSummary {
    pub fn record(&mut self, took_us: u64) {
        self.min_us = match self.count {
            0 => took_us,
            _ => self.min_us.min(took_us),
        };
        self.max_us = self.max_us.max(took_us);
        self.total_us = self.total_us.saturating_add(took_us);
        self.count += 1;
    }

    pub fn average_ms(&self) -> f64 {
        match self.count {
            0 => 0.0,
            count => self.total_us as f64 / 1e3 / count as f64,
        }
    }
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
    pub latency: Latency,
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
            latency: Latency::default(),
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
        self.latency.record(self.last_latency_ms);
    }
}
