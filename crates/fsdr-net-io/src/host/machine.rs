//! Which machine a measurement ran on: the CPU model, its caches, the kernel, and whether a
//! hypervisor is underneath ([`Machine`]).
//!
//! A receiver's CPU per GB against the bare loop's is a property of the host as much as of
//! the code: the loop keeps its few hundred kilobytes in the cache, a receiver that keeps its
//! data for a consumer cycles through megabytes, and how much that costs depends on the
//! caches and on who else shares them (docs/measurements/2026-11-28.md, "Twenty-fifth
//! session": the same code 0.87× the loop on one host and 1.45× on the next). So every sweep
//! names the machine it ran on.

use std::fmt;

use serde::Serialize;

/// One cache level as `cpu0` sees it (`/sys/devices/system/cpu/cpu0/cache/index*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cache {
    /// 1, 2, 3, …
    pub level: u8,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// How many CPUs of this machine share it.
    pub shared_by: usize,
}

impl Cache {
    /// Parses one `index*` directory's files: `level`, `type`, `size` (`48K`, `2048K`,
    /// `300M`) and `shared_cpu_list` (`0`, `0-1`, `0,2-3`). `None` when any is malformed.
    pub fn parse(level: &str, kind: &str, size: &str, shared_cpu_list: &str) -> Option<Cache> {
        Some(Cache {
            level: level.trim().parse().ok()?,
            kind: kind.trim().to_string(),
            bytes: parse_size(size)?,
            shared_by: count_cpus(shared_cpu_list)?,
        })
    }

    fn label(&self) -> String {
        match self.kind.as_str() {
            "Data" => format!("L{}d", self.level),
            "Instruction" => format!("L{}i", self.level),
            _ => format!("L{}", self.level),
        }
    }
}

/// A size as sysfs writes it: bytes with an optional `K`, `M` or `G` (binary multiples).
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, mult) = match s.char_indices().last()? {
        (i, 'K') => (&s[..i], 1u64 << 10),
        (i, 'M') => (&s[..i], 1 << 20),
        (i, 'G') => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

/// The number of CPUs in a list such as `0-3,8,10-11`.
fn count_cpus(list: &str) -> Option<usize> {
    let mut n = 0usize;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                b.checked_sub(a)? + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

/// The machine a measurement ran on; fields that could not be read are `None` or empty.
///
/// ```
/// use fsdr_net_io::host::Machine;
///
/// let m = Machine::detect();
/// println!("{m}"); // "Intel(R) Xeon(R) Processor, 2 CPUs, L1d 48 KiB, L2 2 MiB, …"
/// assert!(m.caches.windows(2).all(|w| w[0].level <= w[1].level));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Machine {
    /// `model name` of `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// Online CPUs.
    pub cpus: usize,
    /// `cpu0`'s caches, by level.
    pub caches: Vec<Cache>,
    /// The kernel release (`uname -r`).
    pub kernel: Option<String>,
    /// The CPU reports the `hypervisor` flag: a virtual machine, whose caches and memory
    /// other guests may share.
    pub hypervisor: bool,
}

impl Machine {
    /// Reads `/proc/cpuinfo`, `/proc/sys/kernel/osrelease` and `cpu0`'s cache directories.
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let mut m = Machine::from_cpuinfo(&cpuinfo);
        m.kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        let read = |dir: &std::path::Path, f: &str| std::fs::read_to_string(dir.join(f)).ok();
        let base = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
        for i in 0.. {
            let dir = base.join(format!("index{i}"));
            if !dir.exists() {
                break;
            }
            let parsed = (|| {
                Cache::parse(
                    &read(&dir, "level")?,
                    &read(&dir, "type")?,
                    &read(&dir, "size")?,
                    &read(&dir, "shared_cpu_list")?,
                )
            })();
            m.caches.extend(parsed);
        }
        m.caches.sort_by_key(|c| c.level);
        m
    }

    /// The CPU model, the number of processors and the `hypervisor` flag from the text of
    /// `/proc/cpuinfo` (no caches, no kernel).
    pub fn from_cpuinfo(cpuinfo: &str) -> Machine {
        let field = |line: &str, name: &str| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        };
        let mut m = Machine::default();
        for line in cpuinfo.lines() {
            if m.cpu_model.is_none() {
                m.cpu_model = field(line, "model name").filter(|s| !s.is_empty());
            }
            if field(line, "processor").is_some() {
                m.cpus += 1;
            }
            if field(line, "flags").is_some_and(|f| f.split_whitespace().any(|x| x == "hypervisor"))
            {
                m.hypervisor = true;
            }
        }
        m
    }
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.cpu_model.as_deref().unwrap_or("unknown CPU"))?;
        write!(
            f,
            ", {} CPU{}",
            self.cpus,
            if self.cpus == 1 { "" } else { "s" }
        )?;
        for c in &self.caches {
            let size = match c.bytes {
                b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
                b if b >= 1 << 10 => format!("{} KiB", b >> 10),
                b => format!("{b} B"),
            };
            write!(f, ", {} {size}", c.label())?;
            if c.shared_by > 1 {
                write!(f, " (shared by {})", c.shared_by)?;
            }
        }
        if let Some(k) = &self.kernel {
            write!(f, ", kernel {k}")?;
        }
        if self.hypervisor {
            write!(f, ", under a hypervisor")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_cpu_lists_parse_as_sysfs_writes_them() {
        assert_eq!(parse_size("48K\n"), Some(48 << 10));
        assert_eq!(parse_size("307200K"), Some(300 << 20));
        assert_eq!(parse_size("2M"), Some(2 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
        assert_eq!(count_cpus("0\n"), Some(1));
        assert_eq!(count_cpus("0-1"), Some(2));
        assert_eq!(count_cpus("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpus("3-1"), None);
        assert_eq!(count_cpus("x"), None);
        assert_eq!(count_cpus(""), None);
    }

    #[test]
    fn a_machine_reads_and_prints_what_it_found() {
        let info = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n\
                    flags\t\t: fpu sse2 hypervisor avx2\n\nprocessor\t: 1\n\
                    model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu\n";
        let mut m = Machine::from_cpuinfo(info);
        assert_eq!(m.cpu_model.as_deref(), Some("Intel(R) Xeon(R) Processor"));
        assert_eq!(m.cpus, 2);
        assert!(m.hypervisor);
        m.caches = vec![
            Cache::parse("1", "Data", "48K", "0").unwrap(),
            Cache::parse("2", "Unified", "2048K", "0").unwrap(),
            Cache::parse("3", "Unified", "307200K", "0-1").unwrap(),
        ];
        m.kernel = Some("6.18.44".into());
        assert_eq!(
            m.to_string(),
            "Intel(R) Xeon(R) Processor, 2 CPUs, L1d 48 KiB, L2 2 MiB, L3 300 MiB (shared by 2), \
             kernel 6.18.44, under a hypervisor"
        );
        assert!(Cache::parse("x", "Data", "48K", "0").is_none());
        let bare = Machine::from_cpuinfo("");
        assert_eq!(bare.to_string(), "unknown CPU, 0 CPUs");
    }

    #[test]
    fn this_machine_is_detected_without_a_panic() {
        let m = Machine::detect();
        assert!(m.caches.iter().all(|c| c.bytes > 0 && c.shared_by > 0));
        let json = serde_json::to_value(&m).unwrap();
        assert!(json.get("caches").is_some());
    }
}
