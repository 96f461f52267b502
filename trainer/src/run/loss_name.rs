//! `--loss`: the losses `ember train` trains with (the data's targets call for one:
//! [`super::task::Task::loss`]).

/// The losses `--loss` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LossName {
    /// ½(ŷ − y)², Gluon's `L2Loss`.
    L2,
    /// Softmax cross-entropy over class labels.
    SoftmaxCe,
    /// Softmax cross-entropy over the next token at every step of a sequence.
    SequenceCe,
}

impl std::fmt::Display for LossName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LossName::L2 => "l2",
            LossName::SoftmaxCe => "softmax-ce",
            LossName::SequenceCe => "sequence-ce",
        })
    }
}
