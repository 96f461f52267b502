//! Lines into tokens, d2l's `tokenize`: characters or words, and d2l's cleaning of *The Time
//! Machine* (letters only, lower case).

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    /// Each character (a space is a token: d2l's character models predict it).
    Char,
    /// Each run of characters between spaces.
    Word,
}

/// Each line's tokens, d2l's `tokenize(lines, token)`.
///
/// ```
/// use ember_datasets::text::{Granularity, tokenize};
/// let lines = ["the time machine", "by h g wells"];
/// assert_eq!(tokenize(&lines, Granularity::Word)[1], ["by", "h", "g", "wells"]);
/// assert_eq!(tokenize(&lines, Granularity::Char)[0][..4], ["t", "h", "e", " "]);
/// ```
pub fn tokenize<S: AsRef<str>>(lines: &[S], granularity: Granularity) -> Vec<Vec<String>> {
    lines
        .iter()
        .map(|line| match granularity {
            Granularity::Char => line.as_ref().chars().map(String::from).collect(),
            Granularity::Word => line.as_ref().split_whitespace().map(String::from).collect(),
        })
        .collect()
}

/// d2l's cleaning of a line of *The Time Machine*: every run of characters that are not ASCII
/// letters becomes one space, the ends are trimmed, and the rest is lower case
/// (`re.sub('[^A-Za-z]+', ' ', line).strip().lower()`).
///
/// ```
/// use ember_datasets::text::letters_only;
/// assert_eq!(letters_only("  It's 1895, Mr. Wells! "), "it s mr wells");
/// ```
pub fn letters_only(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut gap = false;
    for c in line.chars() {
        if c.is_ascii_alphabetic() {
            if gap && !out.is_empty() {
                out.push(' ');
            }
            gap = false;
            out.push(c.to_ascii_lowercase());
        } else {
            gap = true;
        }
    }
    out
}
