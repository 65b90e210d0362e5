//! Stamps the build date into the binary in the style ZooKeeper 3.6 printed it
//! (`MM/DD/YYYY HH:MM GMT`), which go-zookeeper's `srvr` parser requires.

use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    let seconds = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("clock after 1970")
                .as_secs() as i64
        });
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let minute_of_day = seconds.rem_euclid(86_400) / 60;
    println!(
        "cargo:rustc-env=ZOOLOG_BUILD_DATE={month:02}/{day:02}/{year:04} {:02}:{:02} GMT",
        minute_of_day / 60,
        minute_of_day % 60
    );
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
}

/// Days since 1970-01-01 to a Gregorian (year, month, day).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}
