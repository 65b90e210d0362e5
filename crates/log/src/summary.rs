//! Count, sum and extremes of values in one unit, which the holder's name gives: ZooKeeper's
//! AvgMinMaxCounter. The log keeps its syncs' times in one; the server its request and
//! snapshot times (`srvr`'s min/avg/max and mntr's `avg_`, `min_`, `max_`, `cnt_`, `sum_` keys).

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub count: u64,
    pub total: u64,
    /// 0 while `count` is.
    pub min: u64,
    pub max: u64,
}

impl Summary {
    pub fn record(&mut self, value: u64) {
        self.min = match self.count {
            0 => value,
            _ => self.min.min(value),
        };
        self.max = self.max.max(value);
        self.total = self.total.saturating_add(value);
        self.count += 1;
    }

    pub fn average(&self) -> f64 {
        match self.count {
            0 => 0.0,
            count => self.total as f64 / count as f64,
        }
    }
}
