//! d2l's `Vocab`: tokens to indices, `<unk>` first, then the reserved tokens, then every token
//! seen at least `min_freq` times, most frequent first (ties in the order first seen).

use std::collections::HashMap;

/// The unknown token's name and index.
pub const UNK: &str = "<unk>";

/// Tokens and their indices, as d2l's `Vocab(tokens, min_freq, reserved_tokens)` builds them.
///
/// ```
/// use ember_datasets::text::{Granularity, Vocab, tokenize};
/// let tokens = tokenize(&["a b a c a b"], Granularity::Word);
/// let vocab = Vocab::new(&tokens, 2, &["<pad>"]);
/// assert_eq!(vocab.tokens(), ["<unk>", "<pad>", "a", "b"]); // c is seen once: <unk>
/// assert_eq!(vocab.indices(&["b", "c", "a"]), [3, 0, 2]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Vocab {
    tokens: Vec<String>,
    index: HashMap<String, usize>,
    freqs: Vec<(String, usize)>,
}

impl Vocab {
    /// The vocabulary of `lines` of tokens: `<unk>` (index 0), `reserved` in their order, then
    /// each other token seen `min_freq` times or more.
    pub fn new<S: AsRef<str>>(lines: &[Vec<String>], min_freq: usize, reserved: &[S]) -> Self {
        let mut counts: HashMap<&str, (usize, usize)> = HashMap::new();
        for (order, token) in lines.iter().flatten().enumerate() {
            counts.entry(token.as_str()).or_insert((0, order)).0 += 1;
        }
        let mut freqs: Vec<(&str, usize, usize)> = counts
            .into_iter()
            .map(|(t, (n, first))| (t, n, first))
            .collect();
        // Most frequent first; a tie keeps the order first seen (Python's stable sort of a
        // Counter, which keeps insertion order).
        freqs.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)));
        let mut tokens: Vec<String> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let specials = std::iter::once(UNK).chain(reserved.iter().map(AsRef::as_ref));
        let counted = freqs
            .iter()
            .filter(|(_, count, _)| *count >= min_freq.max(1))
            .map(|(token, _, _)| *token);
        for token in specials.chain(counted) {
            if !index.contains_key(token) {
                index.insert(token.to_string(), tokens.len());
                tokens.push(token.to_string());
            }
        }
        Vocab {
            tokens,
            index,
            freqs: freqs
                .into_iter()
                .map(|(t, n, _)| (t.to_string(), n))
                .collect(),
        }
    }

    /// How many tokens it holds, `<unk>` and the reserved ones included.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether it holds no token (never: `<unk>` is always there).
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Every token, by index.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// The index of `token`, 0 (`<unk>`) for one it does not hold.
    pub fn index(&self, token: &str) -> usize {
        self.index.get(token).copied().unwrap_or(0)
    }

    /// The indices of `tokens`.
    pub fn indices<S: AsRef<str>>(&self, tokens: &[S]) -> Vec<usize> {
        tokens.iter().map(|t| self.index(t.as_ref())).collect()
    }

    /// The token at `index`, if there is one.
    pub fn token(&self, index: usize) -> Option<&str> {
        self.tokens.get(index).map(String::as_str)
    }

    /// Every token seen, with how often, most frequent first (d2l's `token_freqs`).
    pub fn token_freqs(&self) -> &[(String, usize)] {
        &self.freqs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{Granularity, tokenize};

    #[test]
    fn most_frequent_first_ties_in_the_order_seen_rare_ones_unknown() {
        let tokens = tokenize(&["b a c", "a d b e a", "c f"], Granularity::Word);
        // Counts: a 3, b 2, c 2, d 1, e 1, f 1; b was seen before c.
        let vocab = Vocab::new(&tokens, 1, &["<pad>", "<bos>"]);
        assert_eq!(
            vocab.tokens(),
            ["<unk>", "<pad>", "<bos>", "a", "b", "c", "d", "e", "f"]
        );
        let rare = Vocab::new(&tokens, 2, &["<pad>"]);
        assert_eq!(rare.tokens(), ["<unk>", "<pad>", "a", "b", "c"]);
        assert_eq!(rare.indices(&["f", "c", "<pad>", "zzz"]), [0, 4, 1, 0]);
        assert_eq!(rare.token_freqs()[0], ("a".to_string(), 3));
        assert_eq!(rare.token(4), Some("c"));
        assert_eq!(rare.token(99), None);
        // A reserved token that also occurs is listed once, where it was reserved.
        let again = Vocab::new(&tokens, 1, &["a"]);
        assert_eq!(again.tokens()[..3], ["<unk>", "a", "b"]);
        assert_eq!(again.len(), 7);
    }
}
