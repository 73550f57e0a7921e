//! `strftime` as glibc writes it in the C locale, for the `ltime` and
//! `utime` converters (HAProxy 2.6 hands their format to the C library's
//! `strftime`, with the process in the C locale): every conversion of
//! glibc's, its flags (`_` `-` `0` `^` `#`), a field width and the `E` and
//! `O` modifiers (which change nothing in the C locale); a conversion it
//! does not know is copied as written.

use crate::calendar::{civil_from_days, days_from_civil};

/// A broken-down time (C's `struct tm`, with the zone it is in).
pub(super) struct Tm {
    pub year: i64,
    /// 1..=12.
    pub mon: u32,
    pub mday: u32,
    pub hour: u32,
    pub min: u32,
    pub sec: u32,
    /// 0 = Sunday.
    pub wday: u32,
    /// 0..=365.
    pub yday: u32,
    /// Seconds east of UTC, and the zone's abbreviation.
    pub gmtoff: i64,
    pub zone: String,
    /// What `%s` writes (C's `mktime` of this time: seconds since the epoch).
    pub epoch: i64,
}

impl Tm {
    /// The time `t` (seconds since the epoch) in UTC (`local`: in the
    /// local zone, as `localtime_r` gives it).
    pub(super) fn at(t: i64, local: bool) -> Tm {
        let (gmtoff, zone) = if local {
            (
                i64::from(crate::sys::utc_offset(t)),
                crate::sys::zone_name(t),
            )
        } else {
            (0, "GMT".to_string())
        };
        let l = t.wrapping_add(gmtoff);
        let days = l.div_euclid(86_400);
        let rem = l.rem_euclid(86_400) as u32;
        let (year, mon, mday) = civil_from_days(days);
        Tm {
            year,
            mon,
            mday,
            hour: rem / 3600,
            min: rem / 60 % 60,
            sec: rem % 60,
            wday: (days + 4).rem_euclid(7) as u32,
            yday: (days - days_from_civil(year, 1, 1)) as u32,
            gmtoff,
            zone,
            // glibc's `%s` reads a UTC time as a local one (mktime).
            epoch: if local {
                t
            } else {
                t.wrapping_sub(i64::from(crate::sys::utc_offset(t)))
            },
        }
    }
}

const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
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

/// The ISO 8601 week-based year and week of `tm` (`%G`, `%V`): those of
/// the Thursday of its week (weeks start on Monday).
fn iso_week(tm: &Tm) -> (i64, i64) {
    let len = |y: i64| days_from_civil(y + 1, 1, 1) - days_from_civil(y, 1, 1);
    let mut y = tm.year;
    let mut thu = i64::from(tm.yday) - i64::from((tm.wday + 6) % 7) + 3;
    if thu < 0 {
        y -= 1;
        thu += len(y);
    } else if thu >= len(y) {
        thu -= len(y);
        y += 1;
    }
    (y, thu / 7 + 1)
}

/// Writes `fmt` for `tm` to `out`.
pub(super) fn strftime(fmt: &[u8], tm: &Tm, out: &mut Vec<u8>) {
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] != b'%' {
            out.push(fmt[i]);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        // Flags, width, modifier.
        let (mut pad, mut upper, mut swap) = (None, false, false);
        while let Some(&c) = fmt.get(i) {
            match c {
                b'_' | b'-' | b'0' => pad = Some(c),
                b'^' => upper = true,
                b'#' => swap = true,
                _ => break,
            }
            i += 1;
        }
        let mut width: Option<usize> = None;
        while let Some(&c) = fmt.get(i).filter(|c| c.is_ascii_digit()) {
            width = Some(
                width
                    .unwrap_or(0)
                    .saturating_mul(10)
                    .saturating_add(usize::from(c - b'0')),
            );
            i += 1;
        }
        while matches!(fmt.get(i), Some(b'E' | b'O')) {
            i += 1;
        }
        let Some(&conv) = fmt.get(i) else {
            out.extend_from_slice(&fmt[start..]);
            break;
        };
        i += 1;
        let f = Field {
            pad,
            width,
            upper,
            swap,
        };
        convert(conv, &fmt[start..i], tm, &f, out);
    }
}

#[derive(Clone, Copy)]
struct Field {
    pad: Option<u8>,
    width: Option<usize>,
    upper: bool,
    swap: bool,
}

impl Field {
    /// A number padded to `digits` by default (`space`: with spaces).
    fn num(&self, n: i64, digits: usize, space: bool, out: &mut Vec<u8>) {
        let neg = n < 0;
        let s = n.unsigned_abs().to_string();
        let width = self.width.unwrap_or(digits);
        let fill = match self.pad {
            // No padding, unless a width is asked for (glibc pads with
            // spaces then).
            Some(b'-') if self.width.is_none() => None,
            Some(b'-') => Some(b' '),
            Some(b'_') => Some(b' '),
            Some(b'0') => Some(b'0'),
            _ => Some(if space { b' ' } else { b'0' }),
        };
        let len = s.len() + usize::from(neg);
        match fill {
            Some(b' ') => {
                out.extend(std::iter::repeat_n(b' ', width.saturating_sub(len)));
                if neg {
                    out.push(b'-');
                }
            }
            Some(c) => {
                if neg {
                    out.push(b'-');
                }
                out.extend(std::iter::repeat_n(c, width.saturating_sub(len)));
            }
            None => {
                if neg {
                    out.push(b'-');
                }
            }
        }
        out.extend_from_slice(s.as_bytes());
    }

    /// A text, case changed as the flags ask (`swap_lower`: `#` lowers it
    /// rather than raising it), padded to the width on its left.
    fn text(&self, t: &str, swap_lower: bool, out: &mut Vec<u8>) {
        let t: String = if self.upper || (self.swap && !swap_lower) {
            t.to_ascii_uppercase()
        } else if self.swap {
            t.to_ascii_lowercase()
        } else {
            t.to_string()
        };
        if let Some(w) = self.width {
            let fill = if self.pad == Some(b'0') { b'0' } else { b' ' };
            out.extend(std::iter::repeat_n(fill, w.saturating_sub(t.len())));
        }
        out.extend_from_slice(t.as_bytes());
    }
}

fn convert(c: u8, spec: &[u8], tm: &Tm, f: &Field, out: &mut Vec<u8>) {
    let h12 = if tm.hour % 12 == 0 { 12 } else { tm.hour % 12 };
    let sub = |fmt: &str, out: &mut Vec<u8>| {
        let mut t = Vec::new();
        strftime(fmt.as_bytes(), tm, &mut t);
        let s = String::from_utf8_lossy(&t).into_owned();
        f.text(&s, false, out);
    };
    let day = DAYS[tm.wday as usize % 7];
    let month = MONTHS[(tm.mon.clamp(1, 12) - 1) as usize];
    match c {
        b'a' => f.text(&day[..3], false, out),
        b'A' => f.text(day, false, out),
        b'b' | b'h' => f.text(&month[..3], false, out),
        b'B' => f.text(month, false, out),
        b'c' => sub("%a %b %e %H:%M:%S %Y", out),
        b'C' => f.num(tm.year.div_euclid(100), 2, false, out),
        b'd' => f.num(i64::from(tm.mday), 2, false, out),
        b'D' | b'x' => sub("%m/%d/%y", out),
        b'e' => f.num(i64::from(tm.mday), 2, true, out),
        b'F' => sub("%Y-%m-%d", out),
        b'G' => f.num(iso_week(tm).0, 1, false, out),
        b'g' => f.num(iso_week(tm).0.rem_euclid(100), 2, false, out),
        b'H' => f.num(i64::from(tm.hour), 2, false, out),
        b'I' => f.num(i64::from(h12), 2, false, out),
        b'j' => f.num(i64::from(tm.yday) + 1, 3, false, out),
        b'k' => f.num(i64::from(tm.hour), 2, true, out),
        b'l' => f.num(i64::from(h12), 2, true, out),
        b'm' => f.num(i64::from(tm.mon), 2, false, out),
        b'M' => f.num(i64::from(tm.min), 2, false, out),
        b'n' => out.push(b'\n'),
        b'p' => f.text(if tm.hour < 12 { "AM" } else { "PM" }, true, out),
        b'P' => f.text(if tm.hour < 12 { "am" } else { "pm" }, false, out),
        b'r' => sub("%I:%M:%S %p", out),
        b'R' => sub("%H:%M", out),
        b's' => f.num(tm.epoch, 1, false, out),
        b'S' => f.num(i64::from(tm.sec), 2, false, out),
        b't' => out.push(b'\t'),
        b'T' | b'X' => sub("%H:%M:%S", out),
        b'u' => f.num(
            i64::from(if tm.wday == 0 { 7 } else { tm.wday }),
            1,
            false,
            out,
        ),
        b'U' => f.num(i64::from((tm.yday + 7 - tm.wday) / 7), 2, false, out),
        b'V' => f.num(iso_week(tm).1, 2, false, out),
        b'w' => f.num(i64::from(tm.wday), 1, false, out),
        b'W' => f.num(
            i64::from((tm.yday + 7 - (tm.wday + 6) % 7) / 7),
            2,
            false,
            out,
        ),
        b'y' => f.num(tm.year.rem_euclid(100), 2, false, out),
        b'Y' => f.num(tm.year, 1, false, out),
        b'z' => {
            let o = tm.gmtoff;
            out.push(if o < 0 { b'-' } else { b'+' });
            let o = o.unsigned_abs() / 60;
            let v = (o / 60 * 100 + o % 60) as i64;
            let g = Field {
                width: Some(f.width.unwrap_or(5).saturating_sub(1)),
                ..*f
            };
            g.num(v, 4, false, out);
        }
        b'Z' => f.text(&tm.zone, true, out),
        b'%' => out.push(b'%'),
        _ => out.extend_from_slice(spec),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(f: &str, t: i64) -> String {
        let mut o = Vec::new();
        strftime(f.as_bytes(), &Tm::at(t, false), &mut o);
        String::from_utf8(o).unwrap()
    }

    #[test]
    fn glibc_conversions_in_utc() {
        // 2021-01-03 04:05:06 UTC, a Sunday.
        let t = 1_609_646_706;
        assert_eq!(fmt("%Y-%m-%d %H:%M:%S", t), "2021-01-03 04:05:06");
        assert_eq!(
            fmt("%a %A %b %B %e %j %u %w", t),
            "Sun Sunday Jan January  3 003 7 0"
        );
        assert_eq!(fmt("%c|%D|%F|%r|%R|%T|%x|%X", t), "Sun Jan  3 04:05:06 2021|01/03/21|2021-01-03|04:05:06 AM|04:05|04:05:06|01/03/21|04:05:06");
        assert_eq!(fmt("%G %g %V %U %W %C %y", t), "2020 20 53 01 00 20 21");
        assert_eq!(fmt("%z %Z %p %P %I %l %k", t), "+0000 GMT AM am 04  4  4");
        assert_eq!(
            fmt("%_d|%-d|%5Y|%^a|%#Z|%#b|%10B|%q|%%|%", t),
            " 3|3|02021|SUN|gmt|JAN|   January|%q|%|%"
        );
        assert_eq!(fmt("%Ey %Od", t), "21 03");
    }

    #[test]
    fn iso_weeks_at_year_ends() {
        // 2018-12-31 is in week 1 of 2019; 2016-01-01 in week 53 of 2015.
        assert_eq!(fmt("%G-%V", 1_546_214_400), "2019-01");
        assert_eq!(fmt("%G-%V", 1_451_606_400), "2015-53");
        assert_eq!(fmt("%G-%V", 1_609_459_200), "2020-53");
    }
}
