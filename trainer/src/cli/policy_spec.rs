//! The built-in policies as the command line names them: `barrier`, `t+2`, `window:K`,
//! `none`, `every:N`, `memory:MB`.

use std::fmt;
use std::str::FromStr;

use ember::{Error, Result};
use ember_trainer::policy::{EveryN, MemoryBudget, NoSync, SyncPolicy, Window};

/// A built-in policy, as parsed from the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PolicySpec {
    /// `barrier`, `t+2`, `window:K`.
    Window(usize),
    /// `none`.
    None,
    /// `every:N`.
    EveryN(usize),
    /// `memory:MB`.
    MemoryBudget(f64),
}

/// The valid forms, for help texts and errors.
pub const POLICY_FORMS: &str =
    "barrier | t+2 | window:K (K >= 1) | none | every:N (N >= 1) | memory:MB (MB > 0)";

impl PolicySpec {
    /// The policy object.
    pub fn build(self) -> Box<dyn SyncPolicy> {
        match self {
            PolicySpec::Window(k) => Box::new(Window(k)),
            PolicySpec::None => Box::new(NoSync),
            PolicySpec::EveryN(n) => Box::new(EveryN(n)),
            PolicySpec::MemoryBudget(mb) => Box::new(MemoryBudget(mb)),
        }
    }

    /// The name the built policy reports.
    pub fn name(self) -> String {
        self.build().name()
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for PolicySpec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let text = s.trim().to_ascii_lowercase();
        let bad = || Error::InvalidValue {
            name: "sync policy",
            value: s.to_string(),
            reason: format!("expected one of: {POLICY_FORMS}"),
        };
        let count = |v: &str| v.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(bad);
        match text.split_once(':') {
            None => match text.as_str() {
                "barrier" => Ok(PolicySpec::Window(1)),
                "t+2" | "overlap" => Ok(PolicySpec::Window(2)),
                "none" => Ok(PolicySpec::None),
                _ => Err(bad()),
            },
            Some(("window", k)) => count(k).map(PolicySpec::Window),
            Some(("every", n)) => count(n).map(PolicySpec::EveryN),
            Some(("memory", mb)) => mb
                .parse::<f64>()
                .ok()
                .filter(|mb| mb.is_finite() && *mb > 0.0)
                .map(PolicySpec::MemoryBudget)
                .ok_or_else(bad),
            Some(_) => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_bad_ones_list_the_valid_forms() {
        assert_eq!(
            "barrier".parse::<PolicySpec>().unwrap(),
            PolicySpec::Window(1)
        );
        assert_eq!("T+2".parse::<PolicySpec>().unwrap(), PolicySpec::Window(2));
        assert_eq!(
            "window:8".parse::<PolicySpec>().unwrap(),
            PolicySpec::Window(8)
        );
        assert_eq!(
            "every:10".parse::<PolicySpec>().unwrap(),
            PolicySpec::EveryN(10)
        );
        assert_eq!(
            "memory:256".parse::<PolicySpec>().unwrap(),
            PolicySpec::MemoryBudget(256.0)
        );
        assert_eq!("none".parse::<PolicySpec>().unwrap().name(), "none");
        assert_eq!(PolicySpec::Window(1).name(), "barrier");
        for bad in [
            "window:0",
            "sometimes",
            "every:x",
            "memory:-5",
            "window:",
            "t+3",
        ] {
            let err = bad.parse::<PolicySpec>().unwrap_err().to_string();
            assert!(
                err.contains(bad) && err.contains("window:K"),
                "{bad}: {err}"
            );
        }
    }
}
