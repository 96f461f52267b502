//! The long fuzzing run, outside CI: `cargo run --release --example fuzz_parsers -- [N] [SEED]`
//! tries N (default 10⁶) mutated files per parser and prints what each parser did. Failing
//! inputs are kept in the printed directory.

#[path = "../tests/fuzz/parsers.rs"]
mod parsers;

#[global_allocator]
static ALLOC: parsers::PeakAlloc = parsers::PeakAlloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let inputs: usize = args
        .next()
        .map_or(1_000_000, |n| n.parse().expect("N: a count"));
    let seed: u64 = args
        .next()
        .map_or(1, |s| s.parse().expect("SEED: a number"));
    let dir = tempfile::Builder::new()
        .prefix("ember-fuzz-")
        .tempdir()
        .expect("a temporary directory")
        .keep();
    println!(
        "fuzzing {inputs} inputs per parser, seed {seed}, inputs in {}",
        dir.display()
    );
    let mut failed = false;
    for report in parsers::fuzz(&dir, inputs, seed) {
        println!(
            "{:<12} {} inputs: {} values, {} errors, {} failures; largest allocation {} bytes \
             (for a {}-byte file); slowest input {:.4} s",
            report.parser,
            report.inputs,
            report.values,
            report.errors,
            report.failures.len(),
            report.largest_allocation.0,
            report.largest_allocation.1,
            report.slowest
        );
        for failure in &report.failures {
            println!("  {failure}");
        }
        failed |= !report.failures.is_empty();
    }
    let hostile = parsers::hostile(&dir);
    println!(
        "endless streams, sparse giants, gzip bomb: {} failures",
        hostile.len()
    );
    for failure in &hostile {
        println!("  {failure}");
    }
    failed |= !hostile.is_empty();
    std::process::exit(i32::from(failed));
}
