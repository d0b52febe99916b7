//! `strftime_now(format)`: the current time formatted like Python's `datetime.strftime`.
//!
//! Templates print the date into system prompts, so tests need to freeze it: a [`ChatTemplate`] can carry
//! a fixed [`DateTime`]. Without one the clock is the system's, in UTC (servers run in UTC; Python would
//! use the local zone).
//!
//! [`ChatTemplate`]: crate::ChatTemplate

use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// A calendar date and time of day, without a time zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateTime {
    pub year: i32,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

impl DateTime {
    /// 2025-01-15 10:30:00, a Wednesday: the frozen date the differential fixtures were rendered with
    /// (`strftime_now` in their expected outputs prints this), so tests and examples that compare against
    /// them freeze a template's clock here.
    pub const FIXTURE: Self = Self {
        year: 2025,
        month: 1,
        day: 15,
        hour: 10,
        minute: 30,
        second: 0,
    };

    /// The current UTC time.
    pub fn now_utc() -> Self {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        Self::from_unix(secs)
    }

    /// The UTC calendar time of a Unix timestamp.
    pub fn from_unix(secs: i64) -> Self {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        Self {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem / 60 % 60) as u32,
            second: (rem % 60) as u32,
        }
    }

    fn days_since_epoch(&self) -> i64 {
        // Inverse of `civil_from_days` (proleptic Gregorian calendar).
        let y = i64::from(self.year) - i64::from(self.month <= 2);
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let m = i64::from(self.month);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(self.day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    /// Monday = 0, as Python's `weekday()`.
    fn weekday(&self) -> usize {
        // 1970-01-01 was a Thursday (3).
        (self.days_since_epoch() + 3).rem_euclid(7) as usize
    }

    fn day_of_year(&self) -> i64 {
        let jan1 = DateTime {
            month: 1,
            day: 1,
            ..*self
        };
        self.days_since_epoch() - jan1.days_since_epoch() + 1
    }

    /// Format like Python's `strftime` in the C locale. Unknown directives are copied through.
    pub fn strftime(&self, format: &str) -> String {
        let mut out = String::with_capacity(format.len() + 8);
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            let Some(d) = chars.next() else {
                out.push('%');
                break;
            };
            let month = MONTHS[(self.month.clamp(1, 12) - 1) as usize];
            let weekday = WEEKDAYS[self.weekday()];
            let _ = match d {
                'Y' => write!(out, "{}", self.year),
                'y' => write!(out, "{:02}", self.year.rem_euclid(100)),
                'm' => write!(out, "{:02}", self.month),
                'd' => write!(out, "{:02}", self.day),
                'e' => write!(out, "{:2}", self.day),
                'H' => write!(out, "{:02}", self.hour),
                'I' => write!(out, "{:02}", (self.hour + 11) % 12 + 1),
                'p' => write!(out, "{}", if self.hour < 12 { "AM" } else { "PM" }),
                'M' => write!(out, "{:02}", self.minute),
                'S' => write!(out, "{:02}", self.second),
                'f' => write!(out, "000000"),
                'B' => write!(out, "{month}"),
                'b' | 'h' => write!(out, "{}", &month[..3]),
                'A' => write!(out, "{weekday}"),
                'a' => write!(out, "{}", &weekday[..3]),
                'w' => write!(out, "{}", (self.weekday() + 1) % 7),
                'u' => write!(out, "{}", self.weekday() + 1),
                'j' => write!(out, "{:03}", self.day_of_year()),
                'F' => write!(out, "{}-{:02}-{:02}", self.year, self.month, self.day),
                'T' => write!(out, "{:02}:{:02}:{:02}", self.hour, self.minute, self.second),
                'D' => write!(
                    out,
                    "{:02}/{:02}/{:02}",
                    self.month,
                    self.day,
                    self.year.rem_euclid(100)
                ),
                'R' => write!(out, "{:02}:{:02}", self.hour, self.minute),
                'z' | 'Z' => Ok(()),
                '%' => write!(out, "%"),
                other => write!(out, "%{other}"),
            };
        }
        out
    }
}

/// Days since 1970-01-01 -> (year, month, day), Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i32, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y as i32, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_python() {
        let t = DateTime::FIXTURE;
        assert_eq!(t.strftime("%d %b %Y"), "15 Jan 2025");
        assert_eq!(t.strftime("%B %d, %Y"), "January 15, 2025");
        assert_eq!(
            t.strftime("%Y-%m-%d %H:%M:%S %A %a %j"),
            "2025-01-15 10:30:00 Wednesday Wed 015"
        );
        assert_eq!(DateTime::from_unix(1_736_937_000), t);
    }
}
