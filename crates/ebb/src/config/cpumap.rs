//! `cpu-map [auto:]PROCESS[/THREADS] CPUSET...` (configuration.txt 3.1):
//! which CPUs the process and each scheduler thread may run on.
//!
//! As HAProxy 2.6 reads it: PROCESS and THREADS are `all`, `odd`, `even`,
//! `N`, `N-M` or `N-` (numbers 1 to 64; threads above `nbthread` are
//! ignored, so are processes, ebb being one); each CPUSET is `N`, `N-M` or
//! `N-` (CPUs 0 to 1023). No thread set, or thread 1 alone, maps the whole
//! process; a thread set maps each of its threads. `auto:` hands the CPUs
//! out one by one, lowest first, to the threads (or the process) in order,
//! and needs as many CPUs as threads or as processes (HAProxy's check: so
//! `auto:1/1-4 0` passes, giving thread 1 CPU 0 and the others nothing). A later line replaces
//! what an earlier one said for the same threads. At start a thread runs on
//! its own CPUs within the process's (the process's alone when it has none,
//! or when the two do not meet).

/// 1024 CPUs, bit `n` for CPU `n` (Linux's `CPU_SETSIZE`).
pub type CpuSet = [u64; 16];

const LONGBITS: u32 = 64;

/// What the `cpu-map` lines said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuMap {
    /// The whole process's CPUs (all zero: no mapping).
    pub proc: CpuSet,
    /// Thread `n + 1`'s CPUs (all zero: no mapping).
    pub thread: Vec<CpuSet>,
}

impl Default for CpuMap {
    fn default() -> Self {
        CpuMap {
            proc: [0; 16],
            thread: vec![[0; 16]; LONGBITS as usize],
        }
    }
}

fn count(s: &CpuSet) -> u32 {
    s.iter().map(|w| w.count_ones()).sum()
}

fn set(s: &mut CpuSet, cpu: u32) {
    s[(cpu / 64) as usize] |= 1u64 << (cpu % 64);
}

/// The lowest CPU of `s`, taken out of it.
fn take_lowest(s: &mut CpuSet) -> Option<u32> {
    let (i, w) = s.iter_mut().enumerate().find(|(_, w)| **w != 0)?;
    let b = w.trailing_zeros();
    *w &= !(1u64 << b);
    Some(i as u32 * 64 + b)
}

impl CpuMap {
    /// The CPUs thread number `tid` (from 0) is bound to at start, if any.
    pub fn for_thread(&self, tid: usize) -> Option<CpuSet> {
        let own = self.thread.get(tid).copied().unwrap_or([0; 16]);
        let meet: CpuSet = std::array::from_fn(|i| own[i] & self.proc[i]);
        if count(&self.proc) == 0 {
            return (count(&own) > 0).then_some(own);
        }
        if count(&meet) > 0 {
            return Some(meet);
        }
        Some(self.proc)
    }

    /// The process's own mapping, if any.
    pub fn for_process(&self) -> Option<CpuSet> {
        (count(&self.proc) > 0).then_some(self.proc)
    }
}

/// HAProxy's `parse_process_number`: a set of numbers from 1 to 64 as bits.
fn numbers(arg: &str) -> Result<u64, String> {
    match arg {
        "all" => return Ok(u64::MAX),
        "odd" => return Ok(u64::MAX / 3),
        "even" => return Ok((u64::MAX / 3) << 1),
        _ => {}
    }
    let bad = || format!("'{arg}' is not a valid number/range");
    let (lo, hi) = match arg.split_once('-') {
        Some((l, h)) => (l, Some(h)),
        None => (arg, None),
    };
    let num = |s: &str| -> Result<u32, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse::<u32>().map_err(|_| bad())
    };
    let mut low = num(lo)?;
    let mut high = match hi {
        Some("") => LONGBITS,
        Some(h) => num(h)?,
        None => low,
    };
    if high < low {
        std::mem::swap(&mut low, &mut high);
    }
    if low < 1 || high > LONGBITS {
        return Err(format!(
            "'{arg}' is not a valid number/range (numbers from 1 to {LONGBITS})"
        ));
    }
    Ok((low..=high).fold(0u64, |m, n| m | 1u64 << (n - 1)))
}

/// HAProxy's `parse_cpu_set`: CPU numbers and ranges, one per word.
fn cpus(words: &[String]) -> Result<CpuSet, String> {
    let mut s = [0u64; 16];
    for arg in words {
        let bad = || format!("'{arg}' is not a CPU range");
        let (lo, hi) = match arg.split_once('-') {
            Some((l, h)) => (l, Some(h)),
            None => (arg.as_str(), None),
        };
        let num = |t: &str| -> Result<u32, String> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            t.parse::<u32>().map_err(|_| bad())
        };
        let mut low = num(lo)?;
        let mut high = match hi {
            Some("") => 1023,
            Some(h) => num(h)?,
            None => low,
        };
        if high < low {
            std::mem::swap(&mut low, &mut high);
        }
        if high > 1023 {
            return Err("supports CPU numbers from 0 to 1023".to_string());
        }
        for c in low..=high {
            set(&mut s, c);
        }
    }
    Ok(s)
}

/// Reads one `cpu-map` line (`w[0]` is the keyword) into `map`.
pub(crate) fn line(w: &[String], map: &mut CpuMap) -> Result<(), String> {
    if w.len() < 3 {
        return Err(format!(
            "'cpu-map' expects a process number ('all', 'odd', 'even', a number from 1 to {LONGBITS} or a range), followed by a list of CPU ranges"
        ));
    }
    let (auto, spec) = match w[1].strip_prefix("auto:") {
        Some(s) => (true, s),
        None => (false, w[1].as_str()),
    };
    let (p, t) = match spec.split_once('/') {
        Some((p, t)) => (p, Some(t)),
        None => (spec, None),
    };
    let proc = numbers(p)?;
    let thread = t.map(numbers).transpose()?.unwrap_or(0);
    let cpus = cpus(&w[2..])?;
    let n = count(&cpus);
    if auto && proc.count_ones() != n && thread.count_ones() != n {
        return Err(
            "'cpu-map': PROC/THREAD range and CPU sets must have the same size to be automatically bound"
                .to_string(),
        );
    }
    let mut pool = cpus;
    let mut next = || -> CpuSet {
        let mut one = [0u64; 16];
        if let Some(c) = take_lowest(&mut pool) {
            set(&mut one, c);
        }
        one
    };
    if thread == 0 || thread == 1 {
        map.proc = if auto { next() } else { cpus };
    } else {
        for j in 0..LONGBITS as usize {
            if thread & (1u64 << j) != 0 {
                map.thread[j] = if auto { next() } else { cpus };
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lines: &[&str]) -> Result<CpuMap, String> {
        let mut m = CpuMap::default();
        for l in lines {
            let w: Vec<String> = l.split_whitespace().map(String::from).collect();
            line(&w, &mut m)?;
        }
        Ok(m)
    }

    fn bits(s: Option<CpuSet>) -> Vec<u32> {
        let Some(s) = s else { return Vec::new() };
        (0..1024)
            .filter(|&c| s[(c / 64) as usize] & (1u64 << (c % 64)) != 0)
            .collect()
    }

    #[test]
    fn haproxys_examples() {
        let m = parse(&["cpu-map 1/all 0-3"]).unwrap();
        assert_eq!(bits(m.for_thread(0)), [0, 1, 2, 3]);
        assert_eq!(bits(m.for_thread(63)), [0, 1, 2, 3]);
        assert_eq!(m.for_process(), None);
        for l in [
            "cpu-map auto:1/1-4 0-3",
            "cpu-map auto:1/1-4 0-1 2-3",
            "cpu-map auto:1/1-4 3 2 1 0",
        ] {
            let m = parse(&[l]).unwrap();
            for t in 0..4 {
                assert_eq!(bits(m.for_thread(t)), [t as u32], "{l}");
            }
            assert_eq!(bits(m.for_thread(4)), Vec::<u32>::new(), "{l}");
        }
        let m = parse(&["cpu-map auto:1/even 0-31"]).unwrap();
        assert_eq!(bits(m.for_thread(1)), [0]);
        assert_eq!(bits(m.for_thread(3)), [1]);
        assert_eq!(bits(m.for_thread(0)), Vec::<u32>::new());
        // HAProxy's check wants either set to match: one process, one CPU.
        let m = parse(&["cpu-map auto:1/1-4 0"]).unwrap();
        assert_eq!(bits(m.for_thread(0)), [0]);
        assert_eq!(bits(m.for_thread(1)), Vec::<u32>::new());
        assert!(parse(&["cpu-map auto:1/1 0-3"]).is_err());
        assert!(parse(&["cpu-map auto:1/all 0-1"]).is_err());
        // A lone process (or thread 1 alone) maps the process.
        let m = parse(&["cpu-map 1 1"]).unwrap();
        assert_eq!(bits(m.for_process()), [1]);
        assert_eq!(bits(m.for_thread(5)), [1]);
        let m = parse(&["cpu-map 1/1 0-1", "cpu-map 1/2-3 1-2"]).unwrap();
        assert_eq!(bits(m.for_thread(0)), [0, 1]);
        assert_eq!(bits(m.for_thread(1)), [1]);
        // A thread whose CPUs miss the process's keeps the process's.
        let m = parse(&["cpu-map 1 0", "cpu-map 1/2 1"]).unwrap();
        assert_eq!(bits(m.for_thread(1)), [0]);
        // Open ranges.
        let m = parse(&["cpu-map 1/3- 1020-"]).unwrap();
        assert_eq!(bits(m.for_thread(63)), [1020, 1021, 1022, 1023]);
        assert_eq!(bits(m.for_thread(1)), Vec::<u32>::new());
        // Later lines replace earlier ones.
        let m = parse(&["cpu-map 1/all 0-3", "cpu-map 1/2 7"]).unwrap();
        assert_eq!(bits(m.for_thread(1)), [7]);
        for bad in [
            "cpu-map 0 1",
            "cpu-map 65 1",
            "cpu-map 1/x 1",
            "cpu-map 1 a",
            "cpu-map 1 1024",
            "cpu-map 1",
            "cpu-map 1/0 1",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
    }
}
