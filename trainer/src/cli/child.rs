//! `ember` running itself in a fresh process: every measurement that needs a clean heap, or a
//! process-wide setting of its own (kernel fusion off), runs this way. The parent builds the
//! arguments from typed values; the child prints its result as one JSON line, last
//! ([`report`]), which the parent reads back typed ([`Child::result`]).

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// One run of `ember` in a child process.
pub struct Child {
    command: Command,
    what: String,
}

impl Child {
    /// `ember ARGS`; `what` names the run in errors (`the run of t+2 (round 2)`).
    pub fn ember<I, S>(what: impl Into<String>, args: I) -> anyhow::Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let exe = std::env::current_exe().context("locating the ember binary")?;
        let mut command = Command::new(exe);
        // The process's bound on a remote device holds for its children too.
        let bound = ember::device::remote::answer_within().as_secs_f64();
        command.arg(format!("--remote-timeout={bound}")).args(args);
        // The child stops when this process ends, however it ends (a SIGTERM: the child
        // finishes its batch and writes what it has); it was left running on its own.
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: between fork and exec the closure makes one async-signal-safe call.
            unsafe {
                command.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
        }
        Ok(Self {
            command,
            what: what.into(),
        })
    }

    /// Sets environment variables of the child.
    pub fn envs<'a>(mut self, vars: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        self.command.envs(vars);
        self
    }

    /// Runs the child to its end, handing each line of its output to `line` as it comes, and
    /// returns its last line. A failed child is an error with what it wrote to stderr.
    pub fn run(mut self, mut line: impl FnMut(&str)) -> anyhow::Result<String> {
        let mut child = self
            .command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", self.what))?;
        // stderr drains on a thread of its own, so that neither pipe can fill and stall.
        let mut stderr = child.stderr.take().context("the child's stderr")?;
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let mut last = String::new();
        if let Some(stdout) = child.stdout.take() {
            for text in BufReader::new(stdout).lines().map_while(Result::ok) {
                line(&text);
                last = text;
            }
        }
        let status = child
            .wait()
            .with_context(|| format!("waiting for {}", self.what))?;
        let errors = errors.join().unwrap_or_default();
        if !status.success() {
            // The child's own "error: " is this error's already.
            let errors = errors.trim();
            bail!(
                "{} failed: {}",
                self.what,
                errors.strip_prefix("error: ").unwrap_or(errors)
            );
        }
        Ok(last)
    }

    /// Runs the child and reads its result: the JSON line it printed last ([`report`]).
    pub fn result<T: DeserializeOwned>(self) -> anyhow::Result<T> {
        let what = self.what.clone();
        let last = self.run(|_| {})?;
        serde_json::from_str(&last)
            .with_context(|| format!("reading the result of {what}: {last:?}"))
    }
}

/// The child's side: prints `result` as the JSON line [`Child::result`] reads.
pub fn report(result: &impl Serialize) -> anyhow::Result<()> {
    say!("{}", serde_json::to_string(result)?);
    Ok(())
}
