//! Fuzzing ember's file parsers: IDX, gzip, CSV, NPY and safetensors. Each gets mutations of
//! valid files (bit flips, interesting bytes and 32-bit values, insertions, deletions,
//! truncations, repeated chunks), from a seeded generator so that any failure reproduces.
//!
//! The property: every input gives a value or an error; never a panic, an abort or a hang;
//! and no single allocation larger than the file can justify. The binary that runs it must
//! install [`PeakAlloc`] as its global allocator, which records the largest allocation.
//!
//! `tests/fuzz.rs` runs 10⁴ inputs per parser in CI; `cargo run --release --example
//! fuzz_parsers -- 1000000` runs 10⁶.

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use burn::prelude::*;
use ember::{Block, Dense, Init, Sequential};
use ember_datasets::csv::{CsvOptions, Label, read_csv};
use ember_datasets::idx::read_idx;
use ember_datasets::npy::read_npy;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// The system allocator, recording the largest single allocation since the last [`peak`].
pub struct PeakAlloc;

static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        PEAK.fetch_max(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        PEAK.fetch_max(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        PEAK.fetch_max(new_size, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The largest allocation since the last call, and a reset.
fn peak() -> usize {
    PEAK.swap(0, Ordering::Relaxed)
}

/// What one parser's run found.
#[derive(Debug, Default)]
pub struct Report {
    /// The parser.
    pub parser: &'static str,
    /// Inputs tried.
    pub inputs: usize,
    /// Inputs that parsed to a value.
    pub values: usize,
    /// Inputs that gave an error.
    pub errors: usize,
    /// The largest allocation seen, in bytes, and the file size it came with.
    pub largest_allocation: (usize, usize),
    /// The slowest input, in seconds.
    pub slowest: f64,
    /// Property violations: panics, oversized allocations, hangs; each with the file that
    /// reproduces it.
    pub failures: Vec<String>,
}

/// A parser under test: reads the file at a path, `Ok` for a value, with what is wrong in the
/// value if anything is (its data does not have the size its shape says).
type Parse = Box<dyn Fn(&Path) -> Result<Option<String>, String> + Send + Sync>;

/// What is wrong with a value whose `shape` of `width`-byte elements does not hold `len`
/// values, or `None`.
fn inconsistent(shape: &[usize], len: usize) -> Option<String> {
    let count = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    (count != Some(len)).then(|| format!("a value of shape {shape:?} holds {len} numbers"))
}

/// The parsers, each with a valid file to mutate and the expansion a file may justify (gzip
/// decompresses).
fn parsers(dir: &Path) -> Vec<(&'static str, Vec<u8>, usize, Parse)> {
    let mut idx = vec![0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 4];
    idx.extend((0..48u8).map(|i| i.wrapping_mul(37)));
    let gz = {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&idx).unwrap();
        encoder.finish().unwrap()
    };
    let csv = b"a,b,c,label\n0.5,1,-2e3,0\n1.5,2,3,1\n-1,0.25,7,2\n".to_vec();
    let npy = {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }";
        let mut header = header.to_string();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend((header.len() as u16).to_le_bytes());
        bytes.extend(header.as_bytes());
        for v in [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0] {
            bytes.extend(v.to_le_bytes());
        }
        bytes
    };
    let device = Device::flex();
    let build = {
        let device = device.clone();
        move || -> Sequential {
            Sequential::new()
                .add(Dense::new(4))
                .add(Dense::new(2))
                .initialize(Init::default(), &device)
                .infer_shape(Tensor::<2>::zeros([1, 3], &device))
                .unwrap()
        }
    };
    let safetensors_path = dir.join("seed.safetensors");
    build().save_parameters(&safetensors_path).unwrap();
    let safetensors = std::fs::read(&safetensors_path).unwrap();
    let net = build();
    vec![
        (
            "idx",
            idx,
            64,
            Box::new(|p: &Path| {
                read_idx(p, 3)
                    .map(|a| inconsistent(&a.dims, a.data.len()))
                    .map_err(|e| e.to_string())
            }) as Parse,
        ),
        (
            "gzip",
            gz,
            1100,
            Box::new(|p: &Path| {
                read_idx(p, 3)
                    .map(|a| inconsistent(&a.dims, a.data.len()))
                    .map_err(|e| e.to_string())
            }),
        ),
        (
            "csv",
            csv,
            64,
            Box::new(|p: &Path| {
                let plain = read_csv(p, &CsvOptions::new(Label::Last)).map(drop);
                let classes = read_csv(p, &CsvOptions::new(Label::Last).classes(3)).map(drop);
                plain.and(classes).map(|()| None).map_err(|e| e.to_string())
            }),
        ),
        (
            "npy",
            npy,
            64,
            Box::new(|p: &Path| {
                read_npy(p)
                    .map(|a| inconsistent(&a.shape, a.data.len()))
                    .map_err(|e| e.to_string())
            }),
        ),
        (
            "safetensors",
            safetensors,
            64,
            Box::new(move |p: &Path| {
                net.clone()
                    .load_parameters(p, &device)
                    .map(|_| None)
                    .map_err(|e| e.to_string())
            }),
        ),
    ]
}

/// One random change to `bytes`.
fn mutate(bytes: &mut Vec<u8>, rng: &mut StdRng) {
    const BYTES: [u8; 8] = [0, 1, 0x7f, 0x80, 0xff, b',', b'\n', b'"'];
    const WORDS: [u32; 6] = [0, 1, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 0x0001_0000];
    // Sizes whose products pass 2^64: NPY's shapes are decimal text.
    const HUGE: [&str; 3] = [
        "4611686018427387909",
        "9223372036854775808",
        "18446744073709551615",
    ];
    if bytes.is_empty() {
        bytes.push(rng.random());
        return;
    }
    let at = rng.random_range(0..bytes.len());
    match rng.random_range(0..9u8) {
        0 => bytes[at] ^= 1 << rng.random_range(0..8),
        1 => bytes[at] = BYTES[rng.random_range(0..BYTES.len())],
        2 => {
            let word = WORDS[rng.random_range(0..WORDS.len())];
            let big = rng.random::<bool>();
            let word = if big {
                word.to_be_bytes()
            } else {
                word.to_le_bytes()
            };
            for (i, b) in word.into_iter().enumerate() {
                if let Some(slot) = bytes.get_mut(at + i) {
                    *slot = b;
                }
            }
        }
        3 => bytes.insert(at, rng.random()),
        4 => {
            bytes.remove(at);
        }
        5 => bytes.truncate(at),
        6 => {
            let end = (at + rng.random_range(1..16)).min(bytes.len());
            let chunk = bytes[at..end].to_vec();
            let to = rng.random_range(0..=bytes.len());
            bytes.splice(to..to, chunk);
        }
        7 => {
            let huge = HUGE[rng.random_range(0..HUGE.len())].as_bytes();
            bytes.splice(at..at, huge.iter().copied());
        }
        _ => bytes[at] = bytes[at].wrapping_add(rng.random_range(1..4)),
    }
}

/// Runs `inputs` mutated files through every parser; `seed` fixes the mutations. Failing
/// inputs are kept in `dir` under names the report gives.
pub fn fuzz(dir: &Path, inputs: usize, seed: u64) -> Vec<Report> {
    let hang = Duration::from_secs(2);
    let mut reports = Vec::new();
    for (index, (parser, valid, expansion, parse)) in parsers(dir).into_iter().enumerate() {
        let mut report = Report {
            parser,
            ..Report::default()
        };
        let mut rng = StdRng::seed_from_u64(seed.wrapping_add(index as u64));
        let path: PathBuf = dir.join(format!("input.{parser}"));
        for input in 0..inputs {
            let mut bytes = valid.clone();
            for _ in 0..rng.random_range(1..=8) {
                mutate(&mut bytes, &mut rng);
            }
            std::fs::write(&path, &bytes).unwrap();
            let _ = peak();
            let start = Instant::now();
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| parse(&path)));
            let took = start.elapsed();
            let largest = peak();
            report.inputs += 1;
            report.slowest = report.slowest.max(took.as_secs_f64());
            if largest > report.largest_allocation.0 {
                report.largest_allocation = (largest, bytes.len());
            }
            let mut keep = |why: String| {
                let name = format!("failure-{parser}-{seed}-{input}");
                std::fs::write(dir.join(&name), &bytes).unwrap();
                report.failures.push(format!("{why} ({name})"));
            };
            match outcome {
                Ok(Ok(None)) => report.values += 1,
                Ok(Ok(Some(wrong))) => keep(format!("input {input}: {wrong}")),
                Ok(Err(_)) => report.errors += 1,
                Err(_) => keep(format!("input {input}: panicked")),
            }
            // Buffers of the file and of what it decodes to, plus a fixed allowance for
            // the parser's own bookkeeping.
            let justified = (1 << 20) + expansion * bytes.len();
            if largest > justified {
                keep(format!(
                    "input {input}: allocated {largest} bytes at once for a {}-byte file",
                    bytes.len()
                ));
            }
            if took > hang {
                keep(format!("input {input}: took {took:?}"));
            }
        }
        reports.push(report);
    }
    reports
}

/// Inputs no mutation makes: an endless stream (a FIFO nobody writes, a character device
/// that reads as zeros forever, as `/dev/zero`; both made here, in `dir`), a sparse giant (a
/// valid file followed by 8 GiB of hole) and, for gzip, a bomb (a valid header, then 256 MiB
/// of zeros in 256 KiB). Each parser must refuse each within 5 s, allocating no more than the
/// bytes before the hole (and, for the bomb, its header) justify. A gzip file is the one
/// exception: its stream ends before the hole, which gzip ignores as trailing bytes, so it
/// may read as the value its stream holds. Returns the failures.
pub fn hostile(dir: &Path) -> Vec<String> {
    let fifo = dir.join("endless-fifo");
    let zero = dir.join("endless-zero");
    let made = |program: &str, args: &[&str]| {
        let status = std::process::Command::new(program)
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "{program} {args:?}");
    };
    made("mkfifo", &[fifo.to_str().unwrap()]);
    made("mknod", &[zero.to_str().unwrap(), "c", "1", "5"]);
    let mut failures = Vec::new();
    for (parser, valid, expansion, parse) in parsers(dir) {
        let parse = std::sync::Arc::new(parse);
        let giant = dir.join(format!("giant.{parser}"));
        std::fs::write(&giant, &valid).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&giant)
            .unwrap()
            .set_len(8 << 30)
            .unwrap();
        let mut cases = vec![
            ("a FIFO", fifo.clone(), 0),
            ("a character device of zeros", zero.clone(), 0),
            ("a sparse giant", giant, valid.len()),
        ];
        if parser == "gzip" {
            use std::io::Write;
            let bomb = dir.join("bomb.gz");
            let mut encoder = flate2::write::GzEncoder::new(
                std::fs::File::create(&bomb).unwrap(),
                flate2::Compression::best(),
            );
            encoder
                .write_all(&[0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 4])
                .unwrap();
            let zeros = vec![0u8; 1 << 20];
            for _ in 0..256 {
                encoder.write_all(&zeros).unwrap();
            }
            encoder.finish().unwrap();
            cases.push(("a gzip bomb", bomb, 32));
        }
        for (what, path, justified) in cases {
            let (send, receive) = std::sync::mpsc::channel();
            let parse = parse.clone();
            let input = path.clone();
            let _ = peak();
            std::thread::spawn(move || {
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| parse(&input)));
                let _ = send.send(outcome.map_err(|_| ()));
            });
            match receive.recv_timeout(Duration::from_secs(5)) {
                Err(_) => failures.push(format!("{parser}: {what} took more than 5 s")),
                Ok(Err(())) => failures.push(format!("{parser}: {what} panicked")),
                Ok(Ok(Ok(_))) if parser == "gzip" && what == "a sparse giant" => {}
                Ok(Ok(Ok(_))) => failures.push(format!("{parser}: {what} was read as a value")),
                Ok(Ok(Err(_))) => {}
            }
            let largest = peak();
            let allowed = (1 << 20) + expansion * justified;
            if largest > allowed {
                failures.push(format!(
                    "{parser}: {what}: allocated {largest} bytes at once, {allowed} allowed"
                ));
            }
        }
    }
    failures
}
