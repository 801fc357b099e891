//! How the xtask runs commands and what it prints. Interactive tasks show a command's output
//! as it comes. `cargo xtask test` runs quietly: each command's output goes to a log of its
//! own (`target/xtask/logs/NN-step.log`), the terminal gets one line per step, a failing
//! step's last lines and its log's path, and at the end one summary line (steps, tests,
//! time). Bench smoke runs and criterion's "Testing … Success" then stay in the logs.

use std::fs::File;
use std::io::{Read, Seek};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};

static QUIET: AtomicBool = AtomicBool::new(false);
static TOTALS: Mutex<Totals> = Mutex::new(Totals::new());

/// What the quiet commands ran so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Commands run.
    pub steps: u32,
    /// Tests that passed, over every `test result:` line (a test run twice, under Miri and
    /// natively, counts twice).
    pub passed: u64,
    /// Tests that failed.
    pub failed: u64,
    /// Tests ignored.
    pub ignored: u64,
}

impl Totals {
    const fn new() -> Totals {
        Totals {
            steps: 0,
            passed: 0,
            failed: 0,
            ignored: 0,
        }
    }

    /// Adds the `test result: ok. 12 passed; 0 failed; 1 ignored; …` lines of `log`.
    fn add_results(&mut self, log: &str) {
        for line in log.lines() {
            let Some(rest) = line.trim().strip_prefix("test result: ") else {
                continue;
            };
            for part in rest.split(';') {
                let mut words = part.split_whitespace().rev();
                let (Some(what), Some(n)) = (words.next(), words.next()) else {
                    continue;
                };
                let Ok(n) = n.parse::<u64>() else { continue };
                match what {
                    "passed" => self.passed += n,
                    "failed" => self.failed += n,
                    "ignored" => self.ignored += n,
                    _ => {}
                }
            }
        }
    }
}

/// From now on, commands run quietly (their output to logs).
pub fn set_quiet() {
    QUIET.store(true, Ordering::Relaxed);
    let _ = std::fs::remove_dir_all(log_dir());
}

/// Whether commands run quietly.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// The totals so far.
pub fn totals() -> Totals {
    *TOTALS.lock().unwrap_or_else(|e| e.into_inner())
}

fn log_dir() -> PathBuf {
    PathBuf::from("target/xtask/logs")
}

/// A short name for a command: the program's name and its first words that are not
/// options ("cargo clippy", "cargo test", "apt-get install").
fn short_name(cmd: &Command) -> String {
    let program = PathBuf::from(cmd.get_program());
    let program = program
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut words = vec![program];
    for a in cmd.get_args().map(|a| a.to_string_lossy().into_owned()) {
        if a.starts_with('-') || words.len() >= 3 {
            break;
        }
        words.push(a);
    }
    words.join(" ")
}

/// Runs a command to its end; an error when it fails. Quiet: output to a log, one line here.
pub fn run(cmd: &mut Command) -> Result<()> {
    let name = short_name(cmd);
    run_as(&name, cmd)
}

/// [`run`], the step named `name` on its line.
pub fn run_as(name: &str, cmd: &mut Command) -> Result<()> {
    if !quiet() {
        eprintln!("xtask: {cmd:?}");
        let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
        if !status.success() {
            bail!("{cmd:?} failed with {status}");
        }
        return Ok(());
    }
    let mut step = Step::new(name)?;
    let child = step.spawn(cmd)?;
    let (status, cpu) = wait_with_cpu(child).with_context(|| format!("waiting for {cmd:?}"))?;
    step.finish(&Ended {
        status,
        cpu,
        at: Instant::now(),
    })
}

/// A step of a quiet run: its number, its log, when its command started.
pub struct Step {
    number: u32,
    name: String,
    path: PathBuf,
    log: File,
    start: Instant,
    /// The seconds `cargo xtask test` waited for it, when it ran beside other steps.
    waited: Option<f64>,
}

/// How a step's command ended.
pub struct Ended {
    pub status: ExitStatus,
    /// CPU seconds of the command and what it waited for.
    pub cpu: f64,
    pub at: Instant,
}

impl Step {
    /// The next step: its number and its log, created.
    pub fn new(name: &str) -> Result<Step> {
        let number = {
            let mut t = TOTALS.lock().unwrap_or_else(|e| e.into_inner());
            t.steps += 1;
            t.steps
        };
        std::fs::create_dir_all(log_dir())?;
        let path = log_dir().join(format!("{number:02}-{}.log", name.replace([' ', '/'], "-")));
        let log = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(Step {
            number,
            name: name.to_string(),
            path,
            log,
            start: Instant::now(),
            waited: None,
        })
    }

    /// Starts `cmd` with its output to the log.
    pub fn spawn(&mut self, cmd: &mut Command) -> Result<Child> {
        use std::io::Write;
        writeln!(self.log, "$ {cmd:?}")?;
        self.start = Instant::now();
        cmd.stdin(Stdio::null())
            .stdout(self.log.try_clone()?)
            .stderr(self.log.try_clone()?)
            .spawn()
            .with_context(|| format!("running {cmd:?}"))
    }

    /// That `cargo xtask test` waited `seconds` for this step, which ran beside others.
    pub fn waited(&mut self, seconds: f64) {
        self.waited = Some(seconds);
    }

    /// Counts the tests of the log and prints the step's line; an error with the log's
    /// last lines when the command failed.
    pub fn finish(mut self, ended: &Ended) -> Result<()> {
        let seconds = ended.at.duration_since(self.start).as_secs_f64();
        let mut text = String::new();
        self.log.rewind()?;
        self.log.read_to_string(&mut text)?;
        let before = totals();
        TOTALS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .add_results(&text);
        let ran = totals().passed - before.passed;
        let tests = if ran > 0 {
            format!(", {ran} tests")
        } else {
            String::new()
        };
        let beside = match self.waited {
            Some(w) => format!(", beside; waited {w:.0} s"),
            None => String::new(),
        };
        let (number, name, cpu) = (self.number, &self.name, ended.cpu);
        if ended.status.success() {
            eprintln!(
                "xtask: {number:>2} {name:<36} ok ({seconds:.0} s{tests}, {cpu:.0} s CPU{beside})"
            );
            return Ok(());
        }
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(80)..];
        eprintln!("{}", tail.join("\n"));
        bail!(
            "{name} failed with {} after {seconds:.0} s; its whole output: {}",
            ended.status,
            self.path.display()
        )
    }
}

/// Waits for `child` to end: its exit status and the CPU time (user and system) it and the
/// processes it waited for used (a compiler's jobs, a test binary's threads). Beside a
/// step's wall time on a shared machine, the CPU time says what the step costs a quiet one.
pub fn wait_with_cpu(child: Child) -> Result<(ExitStatus, f64)> {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value (integers and timevals).
    // Checked by: nothing to check: no memory is passed.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are live locals the call writes before it returns;
        // `pid` is our child, not yet waited for (`child` is never waited on by std).
        // Checked by: `a_step_waits_for_its_command_and_reads_its_status`.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e.into());
        }
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok((
        ExitStatus::from_raw(status),
        secs(usage.ru_utime) + secs(usage.ru_stime),
    ))
}

/// The one line `cargo xtask test` ends with.
pub fn summary_line(passed: bool, started: Instant) -> String {
    let t = totals();
    let s = started.elapsed().as_secs();
    format!(
        "cargo xtask test: {} — {} steps, {} tests passed, {} failed, {} ignored, {} min {:02} s",
        if passed { "passed" } else { "FAILED" },
        t.steps,
        t.passed,
        t.failed,
        t.ignored,
        s / 60,
        s % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_result_lines_add_up() {
        let mut t = Totals::new();
        t.add_results(
            "running 3 tests\n...\ntest result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s\n\
             test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 4 filtered out\n\
             mio 64 B: delivered 1 of 2816 received\n",
        );
        assert_eq!((t.passed, t.failed, t.ignored), (5, 1, 1));
    }

    #[test]
    fn a_step_waits_for_its_command_and_reads_its_status() {
        let run = |script: &str| {
            let child = Command::new("sh").args(["-c", script]).spawn().unwrap();
            let (status, cpu) = wait_with_cpu(child).unwrap();
            (status.code(), cpu >= 0.0)
        };
        assert_eq!(run("exit 0"), (Some(0), true));
        assert_eq!(run("exit 3"), (Some(3), true));
    }

    #[test]
    fn commands_are_named_by_their_first_words() {
        let mut c = Command::new("/usr/bin/cargo");
        c.args(["clippy", "--quiet", "--workspace"]);
        assert_eq!(short_name(&c), "cargo clippy");
        let mut c = Command::new("cargo");
        c.args(["+nightly", "miri", "test", "--quiet"]);
        assert_eq!(short_name(&c), "cargo +nightly miri");
    }
}
