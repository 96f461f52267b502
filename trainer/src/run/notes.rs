//! What a run says as it goes, beside its progress: the lines `ember train` prints (the device
//! picked, the checkpoint resumed, the files written), as cargo's operations speak through its
//! shell.

use std::sync::Arc;

/// One line a run says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note<'a> {
    /// What the run does or did: `device: …`, `resuming from …`, `parameters saved to …`.
    /// `ember train` prints it on its standard output.
    Line(&'a str),
    /// What the user has to know and may have to act on (`warning: …`, `error: --save … not
    /// written: …`). `ember train` prints it on its standard error.
    Warning(&'a str),
}

/// Where a run's lines go: printed (the default, as `ember train` prints them), to a closure
/// of the caller's (a log, a GUI), or nowhere. Cheap to clone: what runs after the call returns
/// (the rescue of a failed run, `--save-best`'s saves) keeps a clone.
#[derive(Clone)]
pub struct Notes(Arc<dyn Fn(Note<'_>) + Send + Sync>);

impl Notes {
    /// Each line to `hear`.
    pub fn new(hear: impl Fn(Note<'_>) + Send + Sync + 'static) -> Self {
        Self(Arc::new(hear))
    }

    /// Lines on the standard output, warnings on the standard error; a stream that cannot be
    /// written (a closed pipe) is skipped, never a panic.
    pub fn printed() -> Self {
        use std::io::Write;
        Self::new(|note| {
            let _ = match note {
                Note::Line(line) => writeln!(std::io::stdout().lock(), "{line}"),
                Note::Warning(line) => writeln!(std::io::stderr().lock(), "{line}"),
            };
        })
    }

    /// Every line dropped.
    pub fn silent() -> Self {
        Self::new(|_| {})
    }

    /// Says `line`.
    pub fn line(&self, line: std::fmt::Arguments<'_>) {
        (self.0)(Note::Line(&line.to_string()));
    }

    /// Warns with `line`.
    pub fn warning(&self, line: std::fmt::Arguments<'_>) {
        (self.0)(Note::Warning(&line.to_string()));
    }
}

impl Default for Notes {
    fn default() -> Self {
        Self::printed()
    }
}

impl std::fmt::Debug for Notes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notes")
    }
}

/// `notes.line(format_args!(…))`: `say!`'s shape in the library.
macro_rules! note {
    ($notes:expr, $($arg:tt)*) => {
        $notes.line(format_args!($($arg)*))
    };
}

/// `notes.warning(format_args!(…))`.
macro_rules! warn_note {
    ($notes:expr, $($arg:tt)*) => {
        $notes.warning(format_args!($($arg)*))
    };
}
