//! The one parser of comma-separated flag values (`--hidden 2048,512`, `--policies
//! barrier,t+2,none`, `--sweep 1,2,4,8`), and sizes that must be at least 1.

use std::fmt;
use std::str::FromStr;

/// A comma-separated list of `T`, none of them empty; clap parses a flag into it with `T`'s
/// own parser, and an error names the item that is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct List<T>(pub Vec<T>);

impl<T: FromStr> FromStr for List<T>
where
    T::Err: fmt::Display,
{
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        s.split(',')
            .map(str::trim)
            .map(|item| item.parse::<T>().map_err(|e| format!("{item:?}: {e}")))
            .collect::<Result<Vec<T>, String>>()
            .map(List)
    }
}

impl<T: fmt::Display> fmt::Display for List<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, item) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

/// A size or count of at least 1: a layer's width, a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub usize);

impl FromStr for Size {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Size(n)),
            Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => Err(format!(
                "too large: a size is at most {} on this machine",
                usize::MAX
            )),
            _ => Err("expected a whole number of at least 1".to_string()),
        }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The sizes of a list of them.
pub fn sizes(list: &List<Size>) -> Vec<usize> {
    list.0.iter().map(|s| s.0).collect()
}

/// Sizes as a flag writes them: `2048,512`.
pub fn join(sizes: &[usize]) -> String {
    let sizes: Vec<String> = sizes.iter().map(usize::to_string).collect();
    sizes.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_each_item_and_name_the_wrong_one() {
        let list: List<Size> = " 2048, 512".parse().unwrap();
        assert_eq!(sizes(&list), [2048, 512]);
        assert_eq!(list.to_string(), "2048,512");
        assert_eq!(join(&sizes(&list)), "2048,512");
        for (bad, item) in [
            ("2048,x", "\"x\""),
            ("64,0", "\"0\""),
            ("", "\"\""),
            ("8,", "\"\""),
        ] {
            let err = bad.parse::<List<Size>>().unwrap_err();
            assert!(err.starts_with(item), "{bad}: {err}");
        }
    }
}
