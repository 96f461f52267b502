//! Tabular data from CSV: numeric cells, an optional header, the label column chosen by name or
//! index.
//!
//! ```
//! use ember_datasets::csv::{CsvOptions, Label, read_csv};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("iris.csv");
//! std::fs::write(&path, "a,b,species\n1.0,2.0,0\n3.0,4.0,1\n").unwrap();
//! let data = read_csv(&path, &CsvOptions::new(Label::Name("species".into())).classes(2)).unwrap();
//! assert_eq!((data.len(), data.features(), data.classes()), (2, 2, Some(2)));
//! ```

use std::path::Path;

use std::io::Read;

use crate::error::{DatasetError, Result};
use crate::examples::{Examples, class_labels};
use crate::input::Input;

/// Which column holds the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Label {
    /// The column of this header name (the file must have a header).
    Name(String),
    /// The column at this index, from 0.
    Index(usize),
    /// The last column.
    Last,
}

/// How to read a CSV file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOptions {
    /// The target column.
    pub label: Label,
    /// Whether the first line is a header; `None` decides from the line itself (a header is
    /// a first line with a cell that is not a number).
    pub header: Option<bool>,
    /// For classification: the number of classes; labels must then be integers in range.
    pub classes: Option<usize>,
}

impl CsvOptions {
    /// Regression targets from `label`, header detected.
    pub fn new(label: Label) -> Self {
        Self {
            label,
            header: None,
            classes: None,
        }
    }

    /// Says whether the first line is a header.
    pub fn header(mut self, header: bool) -> Self {
        self.header = Some(header);
        self
    }

    /// Class indices in `0..classes` as targets.
    pub fn classes(mut self, classes: usize) -> Self {
        self.classes = Some(classes);
        self
    }
}

/// UTF-8's byte-order mark.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// The longest line read: a row of half a million numbers. A longer one is no table of
/// examples (a file of one giant line), and is refused before its cells are split.
pub const MAX_LINE: usize = 1 << 20;

/// The file's text, read a chunk at a time and refused at the first NUL byte, which no CSV
/// of numbers holds: a file that is mostly hole (a sparse giant) costs what precedes it.
fn read_text(mut input: Input) -> Result<String> {
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = input
            .file
            .read(&mut chunk)
            .map_err(|source| DatasetError::Io {
                path: input.path.clone(),
                source,
            })?;
        if n == 0 {
            break;
        }
        if let Some(at) = chunk[..n].iter().position(|&b| b == 0) {
            return Err(input.format(
                format!("byte {}", bytes.len() + at),
                "a NUL byte: this is not a CSV text file".to_string(),
            ));
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    // A byte-order mark (spreadsheets write one) is not part of the first cell.
    if bytes.starts_with(BOM) {
        bytes.drain(..BOM.len());
    }
    String::from_utf8(bytes).map_err(|e| {
        input.format(
            format!("byte {}", e.utf8_error().valid_up_to()),
            "not UTF-8 text".to_string(),
        )
    })
}

/// A row's cells, trimmed, as RFC 4180 reads them: a cell in double quotes keeps its commas
/// (`"1,5"` is one cell, which is then no number) and reads `""` as `"`.
fn cells(line: &str) -> Vec<std::borrow::Cow<'_, str>> {
    use std::borrow::Cow;
    let mut cells = Vec::new();
    let mut rest = line;
    loop {
        let trimmed = rest.trim_start();
        let (cell, after) = match trimmed.strip_prefix('"') {
            Some(quoted) => {
                // The closing quote is the first one not doubled.
                let mut value = String::new();
                let mut chars = quoted.char_indices();
                let mut end = quoted.len();
                while let Some((i, c)) = chars.next() {
                    if c != '"' {
                        value.push(c);
                    } else if quoted[i + 1..].starts_with('"') {
                        value.push('"');
                        chars.next();
                    } else {
                        end = i + 1;
                        break;
                    }
                }
                let after = &quoted[end..];
                let after = after.find(',').map_or("", |comma| &after[comma..]);
                (Cow::Owned(value.trim().to_string()), after)
            }
            None => match trimmed.find(',') {
                Some(comma) => (Cow::Borrowed(trimmed[..comma].trim()), &trimmed[comma..]),
                None => (Cow::Borrowed(trimmed.trim()), ""),
            },
        };
        cells.push(cell);
        match after.strip_prefix(',') {
            Some(next) => rest = next,
            None => return cells,
        }
    }
}

/// Reads a CSV file into examples. A ragged row, a non-numeric cell or a bad label is an error
/// naming the file, the line and the column.
pub fn read_csv(path: impl AsRef<Path>, options: &CsvOptions) -> Result<Examples> {
    let path = path.as_ref();
    let text = read_text(Input::open(path)?)?;
    let format = |line: usize, message: String| DatasetError::Format {
        path: path.to_path_buf(),
        at: format!("line {line}"),
        message,
    };
    if let Some((i, line)) = text.lines().enumerate().find(|(_, l)| l.len() > MAX_LINE) {
        return Err(format(
            i + 1,
            format!(
                "the line is {} bytes long, longer than any row read ({MAX_LINE} bytes): this \
                 is not a table of examples",
                line.len()
            ),
        ));
    }
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let Some((first_no, first)) = lines.next() else {
        return Err(format(1, "the file has no rows".to_string()));
    };
    let first_cells = cells(first);

    let numbers = first_cells
        .iter()
        .filter(|c| c.parse::<f32>().is_ok())
        .count();
    // A row of numbers with a cell left out (a header may leave its index column unnamed).
    if numbers > 0
        && let Some(empty) = first_cells.iter().position(|c| c.is_empty())
    {
        return Err(format(first_no, format!("column {} is empty", empty + 1)));
    }
    // pandas' `to_csv` writes its index as a first column with no name, which `read_csv`
    // names `Unnamed: 0` and a second `to_csv` writes so.
    if numbers == 0
        && options.header != Some(false)
        && first_cells.len() > 1
        && (first_cells[0].is_empty() || first_cells[0].starts_with("Unnamed: "))
    {
        return Err(format(
            first_no,
            format!(
                "column 1 is named {:?} in the header: pandas' index, which `to_csv` writes \
                 unless given `index=False`, would train as a feature; write the file with \
                 `index=False`, or name the column",
                first_cells[0]
            ),
        ));
    }
    let has_header = match options.header {
        Some(given) => given,
        // A header names every column; a row is all numbers. A first line of both is a row
        // with a typo, which taken as a header would be dropped without a word.
        None if numbers == 0 => true,
        None if numbers == first_cells.len() => false,
        None => {
            return Err(format(
                first_no,
                format!(
                    "the first line {first_cells:?} mixes numbers and text: a header names \
                     every column, and a row of examples holds numbers only; fix the cell \
                     that is not a number"
                ),
            ));
        }
    };
    let width = first_cells.len();
    let label = match &options.label {
        Label::Index(i) if *i < width => *i,
        Label::Index(i) => {
            return Err(format(
                first_no,
                format!("label column {i} is out of range: rows have {width} columns"),
            ));
        }
        Label::Last => width - 1,
        Label::Name(name) if has_header => first_cells
            .iter()
            .position(|c| *c == name.as_str())
            .ok_or_else(|| {
                format(
                    first_no,
                    format!("no column named {name:?} in the header {first_cells:?}"),
                )
            })?,
        Label::Name(name) => {
            return Err(format(
                first_no,
                format!("label column {name:?} needs a header, and the file has none"),
            ));
        }
    };
    if width < 2 {
        return Err(format(
            first_no,
            format!("rows have {width} column: a feature and a label need 2"),
        ));
    }
    let body: Box<dyn Iterator<Item = (usize, &str)>> = if has_header {
        Box::new(lines)
    } else {
        Box::new(std::iter::once((first_no, first)).chain(lines))
    };
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for (line_no, line) in body {
        let row = cells(line);
        if row.len() != width {
            return Err(format(
                line_no,
                format!("{} columns, expected {width} (ragged row)", row.len()),
            ));
        }
        for (column, cell) in row.iter().enumerate() {
            let value: f32 = cell.parse().map_err(|_| {
                let comma = if cell.contains(',') {
                    " (a decimal comma? numbers take a point: 1.5)"
                } else {
                    ""
                };
                format(
                    line_no,
                    format!("column {} is {cell:?}, not a number{comma}", column + 1),
                )
            })?;
            if !value.is_finite() {
                return Err(format(
                    line_no,
                    format!(
                        "column {} is {cell}: training on it gives a NaN loss",
                        column + 1
                    ),
                ));
            }
            if column == label {
                // Checked as written: through f32, a label of 2^40 + 1 reads 2^40.
                if let Some(classes) = options.classes
                    && !cell
                        .parse::<f64>()
                        .is_ok_and(|v| v.fract() == 0.0 && v >= 0.0 && v < classes as f64)
                {
                    return Err(DatasetError::Label {
                        path: path.to_path_buf(),
                        at: format!("line {line_no}"),
                        label: cell.to_string(),
                        classes,
                    });
                }
                y.push(value);
            } else {
                x.push(value);
            }
        }
    }
    let features = width - 1;
    match options.classes {
        None => Examples::regression(x, features, y, 1),
        Some(classes) => {
            let labels = class_labels(&y, classes, path)?;
            Examples::classification(x, features, labels, classes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn header_detection_and_label_by_name_index_or_last() {
        let dir = tempfile::tempdir().unwrap();
        let with = write(&dir, "with.csv", "x1,y,x2\n1,10,2\n3,20,4\n");
        let without = write(&dir, "without.csv", "1,10,2\n3,20,4\n");
        let by_name = read_csv(&with, &CsvOptions::new(Label::Name("y".into()))).unwrap();
        let by_index = read_csv(&without, &CsvOptions::new(Label::Index(1))).unwrap();
        assert_eq!(by_name, by_index);
        assert_eq!(by_name.row(1), (&[3.0, 4.0][..], &[20.0][..]));
        let last = read_csv(&without, &CsvOptions::new(Label::Last)).unwrap();
        assert_eq!(last.row(0), (&[1.0, 10.0][..], &[2.0][..]));
        let forced = read_csv(&without, &CsvOptions::new(Label::Last).header(true)).unwrap();
        assert_eq!(forced.len(), 1, "a forced header eats the first row");
    }

    #[test]
    fn bad_rows_name_the_line_and_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (
                "ragged.csv",
                "a,b,c\n1,2,3\n4,5\n",
                Label::Last,
                None,
                "line 3",
                "ragged",
            ),
            (
                "text.csv",
                "1,2,3\n4,five,6\n",
                Label::Last,
                None,
                "line 2",
                "\"five\"",
            ),
            (
                "name.csv",
                "a,b\n1,2\n",
                Label::Name("c".into()),
                None,
                "line 1",
                "no column named \"c\"",
            ),
            (
                "class.csv",
                "a,b\n1,2\n1,7\n",
                Label::Last,
                Some(5),
                "line 3",
                "label 7",
            ),
            ("empty.csv", "\n\n", Label::Last, None, "line 1", "no rows"),
        ];
        for (name, text, label, classes, place, detail) in cases {
            let path = write(&dir, name, text);
            let mut options = CsvOptions::new(label);
            options.classes = classes;
            let err = read_csv(&path, &options).unwrap_err().to_string();
            assert!(
                err.contains(name) && err.contains(place) && err.contains(detail),
                "{err}"
            );
        }
    }

    /// A spreadsheet's byte-order mark is not a header: both rows are examples (before
    /// 2026-11-25 the first row, read as `"\u{feff}1"`, was taken for a header and dropped).
    #[test]
    fn a_byte_order_mark_is_not_a_header() {
        let dir = tempfile::tempdir().unwrap();
        let bare = write(&dir, "bom.csv", "\u{feff}1,2,0\n3,4,1\n");
        let data = read_csv(&bare, &CsvOptions::new(Label::Last).classes(3)).unwrap();
        assert_eq!(data.len(), 2);
        assert_eq!(data.row(0).0, &[1.0, 2.0][..]);
        let named = write(&dir, "bom-header.csv", "\u{feff}a,b,y\n3,4,1\n");
        let data = read_csv(&named, &CsvOptions::new(Label::Name("a".into()))).unwrap();
        assert_eq!((data.len(), data.row(0).1), (1, &[3.0][..]));
    }

    /// A first row with a typo (numbers and a word) is an error naming it, not a header
    /// dropped without a word.
    #[test]
    fn a_first_row_of_numbers_and_text_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, "typo.csv", "1,2.o,0\n3,4,1\n5,6,0\n");
        let err = read_csv(&path, &CsvOptions::new(Label::Last))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 1") && err.contains("2.o") && err.contains("mixes"),
            "{err}"
        );
        // Said to be a header, it is one.
        let data = read_csv(&path, &CsvOptions::new(Label::Last).header(true)).unwrap();
        assert_eq!(data.len(), 2);
    }

    /// A line longer than any row is refused before its cells are split (before 2026-11-25 a
    /// 100 MB line took 5.8 GB of memory for 17 s).
    #[test]
    fn a_line_longer_than_any_row_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let line = "1,".repeat(MAX_LINE / 2 + 1) + "0";
        let path = write(&dir, "long.csv", &format!("1,2,3\n{line}\n"));
        let err = read_csv(&path, &CsvOptions::new(Label::Last))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 2") && err.contains("longer than any row"),
            "{err}"
        );
    }
}
