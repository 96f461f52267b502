//! Where `ember bench` writes: `--profile` checked against `--report` and the report's files.

/// `--profile` against `--report` and its files: one path for both, or the profile on one of
/// the report's files.
pub(super) fn profile_clashes(
    profile: Option<&std::path::Path>,
    report: Option<&std::path::Path>,
    report_files: &[&str],
) -> anyhow::Result<()> {
    if let (Some(path), Some(dir)) = (profile, report) {
        let same =
            |other: &std::path::Path| ember::io::identity(path) == ember::io::identity(other);
        if same(dir) {
            anyhow::bail!(
                "--profile {} and --report {} are one path, where the report is a directory: \
                 give each a path of its own",
                path.display(),
                dir.display()
            );
        }
        if let Some(file) = report_files.iter().find(|file| same(&dir.join(file))) {
            anyhow::bail!(
                "--profile {} is --report {}'s {file}: give it a path of its own",
                path.display(),
                dir.display()
            );
        }
    }
    Ok(())
}
