//! `--data text:fortunes[,steps=S][,tokens=N][,random][,offset=K][,dir=PATH]`: a character
//! language model's text,
//! d2l's chapter 9 on Debian's fortunes (`apt-get install fortunes`) as the book uses *The
//! Time Machine*: letters and spaces, lower case, one token a character, cut into
//! subsequences of `steps` (35, d2l's) by sequential partitioning (d2l's default: the state
//! goes from batch to batch) or random partitioning.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use ember_datasets::text::{Partition, Vocab, fortunes};

/// The text `--data text:…` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextSpec {
    /// Tokens in each subsequence.
    pub steps: usize,
    /// The first tokens of the corpus only, where given.
    pub tokens: Option<usize>,
    /// How the corpus is cut into batches.
    pub partition: Partition,
    /// Where every epoch's subsequences start, where fixed (d2l draws it per epoch).
    pub offset: Option<usize>,
    /// Where the fortunes' files are, where not where Debian installs them
    /// ([`fortunes::DIR`]): a copy carried to a machine without the package.
    pub dir: Option<PathBuf>,
}

/// What `--data` takes of text.
pub const FORM: &str = "text:fortunes[,steps=S][,tokens=N][,random][,offset=K][,dir=PATH]";

impl TextSpec {
    /// `fortunes[,steps=S][,tokens=N][,random|,sequential][,offset=K][,dir=PATH]`, what
    /// follows `text:`.
    ///
    /// # Errors
    /// Another corpus, or an option it cannot take, named.
    pub fn parse(s: &str) -> anyhow::Result<Self> {
        let mut parts = s.split(',');
        match parts.next() {
            Some("fortunes") => {}
            other => bail!(
                "text corpus {:?}: ember knows fortunes (Debian's, apt-get install fortunes); \
                 expected {FORM}",
                other.unwrap_or("")
            ),
        }
        let mut spec = Self {
            steps: 35,
            tokens: None,
            partition: Partition::Sequential,
            offset: None,
            dir: None,
        };
        let positive = |name: &str, value: &str| match value.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(anyhow::anyhow!(
                "{name}={value}: expected a whole number from 1 up"
            )),
        };
        for part in parts {
            match part.split_once('=') {
                Some(("steps", n)) => spec.steps = positive("steps", n)?,
                Some(("tokens", n)) => spec.tokens = Some(positive("tokens", n)?),
                Some(("dir", path)) if !path.is_empty() => spec.dir = Some(PathBuf::from(path)),
                Some(("offset", n)) => match n.parse() {
                    Ok(offset) => spec.offset = Some(offset),
                    Err(_) => bail!("offset={n}: expected a whole number of tokens"),
                },
                None if part == "random" => spec.partition = Partition::Random,
                None if part == "sequential" => spec.partition = Partition::Sequential,
                _ => bail!("{part:?}: expected {FORM}"),
            }
        }
        // d2l's ranges: below the steps for random sampling, up to them for sequential.
        let most = match spec.partition {
            Partition::Random => spec.steps - 1,
            Partition::Sequential => spec.steps,
        };
        if let Some(offset) = spec.offset.filter(|&offset| offset > most) {
            let partition = match spec.partition {
                Partition::Random => "random",
                Partition::Sequential => "sequential",
            };
            bail!(
                "offset={offset}: at most {most} with steps={} ({partition} partitioning)",
                spec.steps
            );
        }
        Ok(spec)
    }

    /// The corpus as token indices, and its vocabulary.
    ///
    /// # Errors
    /// Where the fortunes are not installed or cannot be read.
    pub fn load(&self) -> anyhow::Result<(Vec<usize>, Vocab)> {
        let dir = self.dir.as_deref().unwrap_or(Path::new(fortunes::DIR));
        let hint = match self.dir {
            Some(_) => "",
            None => " (apt-get install fortunes)",
        };
        fortunes::characters(dir, self.tokens)
            .with_context(|| format!("invalid --data text:{self}{hint}"))
    }
}

impl fmt::Display for TextSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fortunes")?;
        if self.steps != 35 {
            write!(f, ",steps={}", self.steps)?;
        }
        if let Some(tokens) = self.tokens {
            write!(f, ",tokens={tokens}")?;
        }
        if self.partition == Partition::Random {
            write!(f, ",random")?;
        }
        if let Some(offset) = self.offset {
            write!(f, ",offset={offset}")?;
        }
        if let Some(dir) = &self.dir {
            write!(f, ",dir={}", dir.display())?;
        }
        Ok(())
    }
}

/// A language model's data: the corpus, its vocabulary, and how it is cut.
pub struct TextTask {
    /// What `--data` named.
    pub spec: TextSpec,
    /// Every token of the corpus, as indices into `vocab`.
    pub corpus: Vec<usize>,
    /// The corpus' vocabulary.
    pub vocab: Vocab,
}

impl TextTask {
    /// The corpus split for `--valid-split share`: its first tokens to train on, its last
    /// `share` held out (one text, cut once: consecutive tokens stay together).
    pub fn split(&self, share: Option<f64>) -> (Vec<usize>, Option<Vec<usize>>) {
        match share {
            None => (self.corpus.clone(), None),
            Some(share) => {
                let held = ((self.corpus.len() as f64) * share).round() as usize;
                let (train, valid) = self.corpus.split_at(self.corpus.len() - held);
                (train.to_vec(), Some(valid.to_vec()))
            }
        }
    }

    /// About how many batches of `batch` an epoch has.
    pub fn batches(&self, batch: usize) -> usize {
        self.corpus.len() / batch.saturating_mul(self.spec.steps).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_back_and_bad_ones_are_named() {
        for form in [
            "fortunes",
            "fortunes,steps=20,tokens=5000,random",
            "fortunes,tokens=9,offset=0",
            "fortunes,tokens=9,dir=/srv/corpus/fortunes",
        ] {
            assert_eq!(TextSpec::parse(form).unwrap().to_string(), form);
        }
        let err = TextSpec::parse("timemachine").unwrap_err().to_string();
        assert!(
            err.contains("\"timemachine\"") && err.contains(FORM),
            "{err}"
        );
        let err = TextSpec::parse("fortunes,steps=5,offset=6")
            .unwrap_err()
            .to_string();
        assert!(err.contains("offset=6") && err.contains("steps=5"), "{err}");
        let err = TextSpec::parse("fortunes,steps=5,random,offset=5")
            .unwrap_err()
            .to_string();
        assert!(err.contains("at most 4"), "{err}");
        let err = TextSpec::parse("fortunes,steps=0").unwrap_err().to_string();
        assert!(err.contains("steps=0"), "{err}");
        let err = TextSpec::parse("fortunes,dir=").unwrap_err().to_string();
        assert!(err.contains("\"dir=\"") && err.contains(FORM), "{err}");
    }
}
