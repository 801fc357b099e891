//! Steps of `cargo xtask test` that run beside the others: a chain of commands started early
//! and joined where its result is needed. A build whose artefacts a later step runs (ASan's
//! test binaries, the exactness model in release, the fuzz targets) or a check that reads no
//! clock (Miri) then uses the CPU time the steps in front leave idle: a compiler's serial
//! stretches, and the test binaries waiting on sockets and timers.
//!
//! A chain started [`Priority::Idle`] runs under `SCHED_IDLE` until it is joined: the kernel
//! gives it a CPU only when no other task wants one, and a task of the usual class that wakes
//! (a test's receive thread) preempts it at once, as if the CPU were idle. The steps in front
//! keep the CPUs they ask for, whatever is built beside them. Joined, the chain runs at the
//! usual priority, since `cargo xtask test` then waits for it, also on a machine others share
//! (raising it back needs root; elsewhere it stays idle, which only costs time under load).

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Result, anyhow};

use crate::report::{Ended, Step, wait_with_cpu};

/// The priority a chain's commands start at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// `SCHED_IDLE` until joined: only the CPU time the steps in front leave.
    Idle,
    /// The usual one: steps that share the CPUs as equals (fuzz targets, one a CPU).
    Normal,
}

/// What the chain's thread and the joining side share.
#[derive(Default)]
struct Shared {
    /// The command running now.
    pid: Mutex<Option<u32>>,
    /// Joined: the commands still to start run at the usual priority.
    promoted: AtomicBool,
    /// Dropped without a join (a step in front failed): start nothing more.
    stop: AtomicBool,
}

/// A step of a chain and how its command ended (or why it could not start).
type Done = (Step, Result<Ended>);

/// A chain of steps running beside the others, one command after the other; the first that
/// fails ends it.
pub struct Beside {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<Vec<Done>>>,
}

impl Beside {
    /// Starts `steps` (name, command) in order on a thread of their own.
    pub fn start(priority: Priority, steps: Vec<(String, Command)>) -> Result<Beside> {
        let shared = Arc::new(Shared::default());
        shared
            .promoted
            .store(priority == Priority::Normal, Ordering::Relaxed);
        let mut numbered = Vec::new();
        for (name, cmd) in steps {
            numbered.push((Step::new(&name)?, cmd));
        }
        let on_thread = Arc::clone(&shared);
        let thread = std::thread::spawn(move || run_chain(&on_thread, numbered));
        Ok(Beside {
            shared,
            thread: Some(thread),
        })
    }

    /// Waits for every step of the chain (at the usual priority from now on) and prints
    /// their lines; the first failure's error.
    pub fn join(mut self) -> Result<()> {
        let waiting = Instant::now();
        self.promote();
        let thread = self.thread.take().expect("joined once");
        let done = thread
            .join()
            .map_err(|_| anyhow!("a chain of steps panicked"))?;
        let waited = waiting.elapsed().as_secs_f64();
        let mut result = Ok(());
        for (mut step, ended) in done {
            step.waited(waited);
            let finished = ended.and_then(|e| step.finish(&e));
            if result.is_ok() {
                result = finished;
            }
        }
        result
    }

    /// The running command and everything it started, at the usual priority; the commands
    /// still to come start at it.
    fn promote(&self) {
        if self.shared.promoted.swap(true, Ordering::Relaxed) {
            return;
        }
        if let Some(pid) = *self.shared.pid.lock().unwrap_or_else(|e| e.into_inner()) {
            // Twice: a process started while the first pass read /proc inherited the idle
            // class from a parent not yet raised.
            for _ in 0..2 {
                for task in tree_tasks(pid) {
                    // Leaving SCHED_IDLE needs root (CAP_SYS_NICE): elsewhere the chain stays
                    // idle, which only costs time on a machine others load.
                    let _ = Command::new("chrt")
                        .args(["--other", "--pid", "0"])
                        .arg(task.to_string())
                        .output();
                }
            }
        }
    }
}

impl Drop for Beside {
    /// Not joined (a step in front failed): the running command and what it started end.
    fn drop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(pid) = *self.shared.pid.lock().unwrap_or_else(|e| e.into_inner()) {
            let _ = Command::new("kill")
                .arg("-TERM")
                .args(tree_pids(pid).iter().map(u32::to_string))
                .output();
        }
        let _ = thread.join();
    }
}

/// Runs the steps in order until one fails or the chain is stopped.
fn run_chain(shared: &Shared, steps: Vec<(Step, Command)>) -> Vec<Done> {
    let mut done = Vec::new();
    for (mut step, cmd) in steps {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let mut cmd = if shared.promoted.load(Ordering::Relaxed) {
            cmd
        } else {
            idle(&cmd)
        };
        let ended = step.spawn(&mut cmd).and_then(|child| {
            *shared.pid.lock().unwrap_or_else(|e| e.into_inner()) = Some(child.id());
            let (status, cpu) = wait_with_cpu(child)?;
            *shared.pid.lock().unwrap_or_else(|e| e.into_inner()) = None;
            Ok(Ended {
                status,
                cpu,
                at: Instant::now(),
            })
        });
        let failed = !ended.as_ref().is_ok_and(|e| e.status.success());
        done.push((step, ended));
        if failed {
            break;
        }
    }
    done
}

/// `cmd` under `SCHED_IDLE` (`chrt --idle 0`, which execs it: the step's process is the
/// command's), with its environment and directory.
fn idle(cmd: &Command) -> Command {
    let mut n = Command::new("chrt");
    n.args(["--idle", "0"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => n.env(k, v),
            None => n.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        n.current_dir(dir);
    }
    n
}

/// `root` and the processes it started, and theirs (from /proc).
fn tree_pids(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: the name may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(
            parent_of
                .iter()
                .filter(|(_, pp)| *pp == p)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    tree
}

/// Every thread of [`tree_pids`]: a priority is a thread's, and a compiler's threads are
/// already running.
fn tree_tasks(root: u32) -> Vec<u32> {
    tree_pids(root)
        .into_iter()
        .flat_map(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|t| t.file_name().to_str()?.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_tree_is_found_from_its_root() {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 5 & sleep 5 & wait"])
            .spawn()
            .unwrap();
        // The shell starts its two sleeps; wait until /proc shows them.
        let mut tree = Vec::new();
        for _ in 0..500 {
            tree = tree_pids(child.id());
            if tree.len() >= 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = Command::new("kill")
            .args(tree.iter().map(u32::to_string))
            .output();
        let _ = child.wait();
        assert_eq!(tree.len(), 3, "{tree:?}");
        assert_eq!(tree[0], child.id());
        assert!(tree_tasks(std::process::id()).contains(&std::process::id()));
    }

    #[test]
    fn an_idle_command_keeps_its_arguments_and_environment() {
        let mut cmd = Command::new("cargo");
        cmd.args(["test", "--quiet"])
            .env("A", "1")
            .env_remove("B")
            .current_dir("/tmp");
        let n = idle(&cmd);
        assert_eq!(n.get_program(), "chrt");
        let args: Vec<_> = n.get_args().collect();
        assert_eq!(args, ["--idle", "0", "cargo", "test", "--quiet"]);
        let envs: Vec<_> = n.get_envs().collect();
        assert_eq!(
            envs,
            [
                (std::ffi::OsStr::new("A"), Some(std::ffi::OsStr::new("1"))),
                (std::ffi::OsStr::new("B"), None)
            ]
        );
        assert_eq!(n.get_current_dir(), Some(std::path::Path::new("/tmp")));
    }
}
