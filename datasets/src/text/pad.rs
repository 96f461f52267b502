//! Sequences of one length for a batch, d2l's `truncate_pad`, with the valid lengths that a
//! masked softmax or a loss over the real tokens reads.

/// `line` cut to `steps` tokens, or padded with `pad` up to them, and how many of them are the
/// line's own (d2l's valid length).
///
/// ```
/// use ember_datasets::text::truncate_pad;
/// assert_eq!(truncate_pad(&[5, 6, 7], 5, 1), (vec![5, 6, 7, 1, 1], 3));
/// assert_eq!(truncate_pad(&[5, 6, 7], 2, 1), (vec![5, 6], 2));
/// ```
pub fn truncate_pad(line: &[usize], steps: usize, pad: usize) -> (Vec<usize>, usize) {
    let valid = line.len().min(steps);
    let mut padded = line[..valid].to_vec();
    padded.resize(steps, pad);
    (padded, valid)
}
