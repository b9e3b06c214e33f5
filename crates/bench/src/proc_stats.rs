//! CPU time and peak memory of a process, from Linux's `/proc/<pid>/stat` and
//! `/proc/<pid>/status`.

use crate::store::BoxError;

/// Clock ticks per second of the `utime`/`stime` fields: Linux reports them in
/// `USER_HZ`, which is 100 on every architecture this bench runs on (x86-64, aarch64);
/// `sysconf(_SC_CLK_TCK)` would need unsafe code, which the workspace forbids.
pub const USER_HZ: f64 = 100.0;

/// One read of a process's counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcSample {
    /// User plus system CPU time so far, in seconds.
    pub cpu_secs: f64,
    /// Peak resident set size so far (`VmHWM`), in MiB.
    pub rss_peak_mib: f64,
}

/// Reads `pid`'s counters.
///
/// # Errors
/// If the files cannot be read (the process is gone) or are not as expected.
pub fn sample(pid: u32) -> Result<ProcSample, BoxError> {
    let read = |file: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/{file}"))
            .map_err(|e| format!("reading /proc/{pid}/{file}: {e}"))
    };
    let ticks =
        cpu_ticks(&read("stat")?).ok_or_else(|| format!("/proc/{pid}/stat: no utime and stime"))?;
    let kib =
        vm_hwm_kib(&read("status")?).ok_or_else(|| format!("/proc/{pid}/status: no VmHWM"))?;
    Ok(ProcSample {
        cpu_secs: ticks as f64 / USER_HZ,
        rss_peak_mib: kib as f64 / 1024.0,
    })
}

/// `utime + stime` (fields 14 and 15, in clock ticks) of a `/proc/<pid>/stat` line.
/// The command name (field 2) is in parentheses and may itself hold spaces and
/// parentheses, so the fields are counted from the last `)`.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    // `rest` starts at field 3 (the state): utime is field 14, the 12th from here.
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The `VmHWM` (peak resident set size) of a `/proc/<pid>/status` file, in KiB.
pub fn vm_hwm_kib(status: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix("VmHWM:")?.trim();
        value.strip_suffix("kB")?.trim().parse().ok()
    })
}

/// CPU used between two samples, as a percentage of one core over `secs`.
pub fn cpu_pct(before: &ProcSample, after: &ProcSample, secs: f64) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    ((after.cpu_secs - before.cpu_secs) / secs * 100.0).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_count_from_the_last_parenthesis() {
        let stat = "4242 (leasehold (x) b) S 1 4242 4242 0 -1 4194304 1822 0 0 0 \
                    37 12 0 0 20 0 5 0 123456 1000000 2000 18446744073709551615\n";
        assert_eq!(cpu_ticks(stat), Some(49));
        assert_eq!(cpu_ticks("4242 (short) S 1 2"), None);
        assert_eq!(cpu_ticks("no parenthesis"), None);
    }

    #[test]
    fn vm_hwm_is_read_in_kib() {
        let status = "Name:\tleasehold-bench\nVmPeak:\t  900000 kB\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(vm_hwm_kib(status), Some(20_480));
        assert_eq!(vm_hwm_kib("Name:\tx\n"), None);
    }

    #[test]
    fn cpu_pct_is_a_share_of_one_core() {
        let a = ProcSample {
            cpu_secs: 1.0,
            rss_peak_mib: 5.0,
        };
        let b = ProcSample {
            cpu_secs: 1.5,
            rss_peak_mib: 5.0,
        };
        assert_eq!(cpu_pct(&a, &b, 2.0), 25.0);
        assert_eq!(cpu_pct(&b, &a, 2.0), 0.0);
        assert_eq!(cpu_pct(&a, &b, 0.0), 0.0);
    }

    #[test]
    fn this_process_can_be_sampled() {
        let s = sample(std::process::id()).expect("read /proc/self");
        assert!(s.cpu_secs >= 0.0 && s.rss_peak_mib > 0.0, "{s:?}");
    }
}
