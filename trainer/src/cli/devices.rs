//! `ember devices`.

use ember::device::{DeviceName, list_devices};

pub fn run() -> anyhow::Result<()> {
    for (name, status) in list_devices() {
        match status {
            Ok(reason) => say!("{name:<8} usable    {reason}"),
            Err(err) => say!("{name:<8} unusable  {err}"),
        }
    }
    let auto = DeviceName::Auto.resolve()?;
    say!("auto     -> {}    {}", auto.name, auto.reason);
    Ok(())
}
