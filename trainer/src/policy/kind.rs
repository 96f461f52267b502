//! What a policy is, as data ([`PolicyKind`]), and the names of the built-ins ([`BUILT_INS`]),
//! which help texts, errors and traces share.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use ember::{Error, Result};

/// What a policy is, as data: a built-in with its parameter, or a user's policy by name.
/// It prints as the policy's name (`barrier`, `window:2`, `none`, `every:10`, `memory:256`),
/// parses from it ([`BUILT_INS`]), and is stored in traces that way.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyKind {
    /// [`Window`]: `barrier` for 1, `window:K` (`t+2` for 2).
    Window(usize),
    /// [`NoSync`]: `none`.
    NoSync,
    /// [`EveryN`]: `every:N`.
    EveryN(usize),
    /// [`MemoryBudget`]: `memory:MB`.
    MemoryBudget(f64),
    /// [`Auto`]: `auto`, or `auto:MB` with a memory budget.
    Auto(Option<f64>),
    /// A policy of the user's own, by its name.
    Custom(String),
}

/// A built-in policy as the command line and traces name it, and the rule it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltIn {
    /// The form of its name: `barrier`, or `window:K` with its parameter in capitals.
    pub name: &'static str,
    /// What the parameter must be, for a name that has one: `K >= 1`.
    pub bound: Option<&'static str>,
    /// When batch t may start.
    pub rule: &'static str,
}

/// The built-in policies: the one table that `ember train --help`, [`forms`] and the parse
/// errors read. [`PolicyKind`]'s parser takes each name (a test holds them together).
pub const BUILT_INS: [BuiltIn; 7] = [
    BuiltIn {
        name: "barrier",
        bound: None,
        rule: "batch t starts after batch t-1 finished (wait_to_read on every loss)",
    },
    BuiltIn {
        name: "t+2",
        bound: None,
        rule: "batch t starts after batch t-2 finished (the chapter's exercise 2)",
    },
    BuiltIn {
        name: "window:K",
        bound: Some("K >= 1"),
        rule: "batch t starts after batch t-K finished (barrier = window:1)",
    },
    BuiltIn {
        name: "none",
        bound: None,
        rule: "no wait until the end of the epoch (waitall): queued batches pile up",
    },
    BuiltIn {
        name: "every:N",
        bound: Some("N >= 1"),
        rule: "a full barrier before every N-th batch (Keras' steps_per_execution)",
    },
    BuiltIn {
        name: "memory:MB",
        bound: Some("MB > 0"),
        rule: "wait for the oldest batch while the process grew by more than MB",
    },
    BuiltIn {
        name: "auto:MB",
        bound: Some("MB > 0, or auto alone for the memory free"),
        rule: "a window that sizes itself while training: the smallest whose pace is within \
               1% of the best, within MB of growth",
    },
];

/// The forms a built-in policy's name takes, for help texts and errors: `barrier | t+2 |
/// window:K (K >= 1) | …`.
pub fn forms() -> String {
    let forms: Vec<String> = BUILT_INS
        .iter()
        .map(|b| match b.bound {
            Some(bound) => format!("{} ({bound})", b.name),
            None => b.name.to_string(),
        })
        .collect();
    forms.join(" | ")
}

impl PolicyKind {
    /// The kind a trace names: a built-in where the name is one, else a user's policy.
    pub fn from_name(name: &str) -> Self {
        name.parse()
            .unwrap_or_else(|_| PolicyKind::Custom(name.to_string()))
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyKind::Window(1) => f.write_str("barrier"),
            PolicyKind::Window(k) => write!(f, "window:{k}"),
            PolicyKind::NoSync => f.write_str("none"),
            PolicyKind::EveryN(n) => write!(f, "every:{n}"),
            PolicyKind::MemoryBudget(mb) => write!(f, "memory:{}", ember::error::number(*mb)),
            PolicyKind::Auto(None) => f.write_str("auto"),
            PolicyKind::Auto(Some(mb)) => write!(f, "auto:{}", ember::error::number(*mb)),
            PolicyKind::Custom(name) => f.write_str(name),
        }
    }
}

/// A built-in policy's name, as [`BUILT_INS`] lists them (case and spaces aside).
impl FromStr for PolicyKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let text = s.trim().to_ascii_lowercase();
        let bad = || Error::InvalidValue {
            name: "sync policy",
            value: s.to_string(),
            reason: format!("expected one of: {}", forms()),
        };
        let count = |v: &str| v.parse::<usize>().ok().filter(|n| *n >= 1).ok_or_else(bad);
        let megabytes = |v: &str| {
            v.parse::<f64>()
                .ok()
                .filter(|mb| mb.is_finite() && *mb > 0.0)
                .ok_or_else(bad)
        };
        match text.split_once(':') {
            None => match text.as_str() {
                "barrier" => Ok(PolicyKind::Window(1)),
                "t+2" | "overlap" => Ok(PolicyKind::Window(2)),
                "none" => Ok(PolicyKind::NoSync),
                "auto" => Ok(PolicyKind::Auto(None)),
                _ => Err(bad()),
            },
            Some(("window", k)) => count(k).map(PolicyKind::Window),
            Some(("every", n)) => count(n).map(PolicyKind::EveryN),
            Some(("memory", mb)) => megabytes(mb).map(PolicyKind::MemoryBudget),
            Some(("auto", mb)) => megabytes(mb).map(|mb| PolicyKind::Auto(Some(mb))),
            Some(_) => Err(bad()),
        }
    }
}

impl Serialize for PolicyKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PolicyKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        String::deserialize(deserializer).map(|name| PolicyKind::from_name(&name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_bad_ones_list_the_valid_forms() {
        assert_eq!(
            "barrier".parse::<PolicyKind>().unwrap(),
            PolicyKind::Window(1)
        );
        assert_eq!("T+2".parse::<PolicyKind>().unwrap(), PolicyKind::Window(2));
        assert_eq!(
            "window:8".parse::<PolicyKind>().unwrap(),
            PolicyKind::Window(8)
        );
        assert_eq!(
            "every:10".parse::<PolicyKind>().unwrap(),
            PolicyKind::EveryN(10)
        );
        assert_eq!(
            "memory:256".parse::<PolicyKind>().unwrap(),
            PolicyKind::MemoryBudget(256.0)
        );
        assert_eq!("none".parse::<PolicyKind>().unwrap().to_string(), "none");
        assert_eq!(PolicyKind::Window(1).to_string(), "barrier");
        // A tiny budget as written, so its name parses back to it.
        let tiny = "memory:1e-50".parse::<PolicyKind>().unwrap();
        assert_eq!(tiny.to_string(), "memory:1e-50");
        assert_eq!(tiny.to_string().parse::<PolicyKind>().unwrap(), tiny);
        for bad in [
            "window:0",
            "sometimes",
            "every:x",
            "memory:-5",
            "auto:0",
            "auto:x",
            "window:",
            "t+3",
        ] {
            let err = bad.parse::<PolicyKind>().unwrap_err().to_string();
            assert!(
                err.contains(bad) && err.contains("window:K"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn every_name_of_the_table_parses_to_a_policy_that_prints_a_name_of_the_table() {
        let forms = forms();
        for built_in in BUILT_INS {
            // The parameter in capitals, as a value within its bound.
            let name = match built_in.name.split_once(':') {
                Some((prefix, _)) => format!("{prefix}:3"),
                None => built_in.name.to_string(),
            };
            let kind: PolicyKind = name.parse().unwrap_or_else(|e| panic!("{name}: {e}"));
            let printed = kind.to_string();
            let prefix = printed.split(':').next().unwrap();
            assert!(
                BUILT_INS
                    .iter()
                    .any(|b| b.name.split(':').next() == Some(prefix)),
                "{name} prints as {printed}, which the table does not name"
            );
        }
        assert_eq!(
            forms,
            "barrier | t+2 | window:K (K >= 1) | none | every:N (N >= 1) | memory:MB (MB > 0) | \
             auto:MB (MB > 0, or auto alone for the memory free)"
        );
    }
}
