//! Text for sequence models, d2l's chapter 9: lines into tokens ([`tokenize`], character or
//! word), tokens into indices ([`Vocab`], with `<unk>`, reserved tokens and a minimum
//! frequency), a corpus into a language model's minibatches ([`Subsequences`], random or
//! sequential partitioning), and sequences padded to one length with their valid lengths
//! ([`truncate_pad`]); and a corpus a package ships, Debian's [`fortunes`].
//!
//! ```
//! use ember_datasets::text::{Granularity, Partition, Subsequences, Vocab, letters_only, tokenize};
//! let lines: Vec<String> = ["The Time Machine, by H. G. Wells", "I. Introduction"]
//!     .iter().map(|l| letters_only(l)).collect();
//! let tokens = tokenize(&lines, Granularity::Char);
//! let vocab = Vocab::new(&tokens, 0, &[] as &[&str]);
//! let corpus: Vec<usize> = tokens.iter().flatten().map(|t| vocab.index(t)).collect();
//! assert_eq!(vocab.token(corpus[0]), Some("t"));
//! let batches = Subsequences::new(corpus, 2, 4, Partition::Random, 0).unwrap().epoch(0);
//! assert_eq!(batches[0].x_shape, [2, 4]);
//! ```

pub mod fortunes;
mod pad;
mod sequences;
mod tokens;
mod vocab;

pub use pad::truncate_pad;
pub use sequences::{Partition, Subsequences};
pub use tokens::{Granularity, letters_only, tokenize};
pub use vocab::{UNK, Vocab};
