//! Where, when and how a run was taken: the machine, the date, the commit and the settings,
//! written at the head of each results file (and in its JSON), so that a published figure
//! says what it came from and a user can take it again.

use std::process::Command;

use serde::Serialize;

/// What a run's figures came from.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Provenance {
    /// When the run started, UTC (`2026-11-25T18:40:00Z`).
    pub date_utc: String,
    /// The commit the binaries were built from, as `git rev-parse HEAD` says it (`unknown`
    /// outside a checkout), and whether the work tree differed from it.
    pub commit: String,
    pub uncommitted_changes: bool,
    pub cpu_model: String,
    /// Cores this process may run on.
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    /// `release`, or `debug` (figures worth nothing beyond a smoke test).
    pub build: &'static str,
    /// The benchmark's arguments, and the settings that shape each figure.
    pub command: String,
    pub settings: String,
}

impl Provenance {
    /// This machine and checkout, now; `settings` names the rounds and lengths of the run.
    pub fn here(settings: String) -> Provenance {
        let git = |args: &[&str]| {
            Command::new("git")
                .args(args)
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        };
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_kb: f64 = meminfo
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0.0);
        Provenance {
            date_utc: utc_now(),
            commit: git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into()),
            // The results files themselves are what runs write: one part's results,
            // written before the next part starts, are no change to what is measured.
            uncommitted_changes: git(&[
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                ":(exclude)bench/results*",
            ])
            .is_some_and(|s| !s.is_empty()),
            cpu_model: cpuinfo
                .lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map_or("unknown".into(), |(_, m)| m.trim().to_owned()),
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_gib: mem_kb / (1024.0 * 1024.0),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map_or("unknown".into(), |k| k.trim().to_owned()),
            build: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            command: std::env::args().skip(1).collect::<Vec<_>>().join(" "),
            settings,
        }
    }

    /// The lines a results file starts with.
    pub fn markdown(&self) -> String {
        let commit = if self.uncommitted_changes {
            format!("{} with uncommitted changes", self.commit)
        } else {
            self.commit.clone()
        };
        format!(
            "Taken {} at commit {commit}, {} build, on {} cores of {}, {:.1} GiB, Linux {}.\n\
             Run as `beacon-bench {}`; {}.\n",
            self.date_utc,
            self.build,
            self.cores,
            self.cpu_model,
            self.memory_gib,
            self.kernel,
            self.command,
            self.settings,
        )
    }
}

/// The current time, UTC, as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The calendar date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_fall_on_the_calendar() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        // 2024 is a leap year: its 29 February is day 19,782.
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(20_417), (2025, 11, 25));
    }
}
